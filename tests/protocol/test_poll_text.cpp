// A poll's JSON text written straight from the worker's state: the same bytes as the PollRequest's, at its size.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/poll_text.hpp"
#include "protocol/protocol.hpp"

namespace p = nymph::protocol;

namespace {

// poll_request_text() over `r`'s own contents.
std::string written_from_parts(const p::PollRequest& r) {
  return p::poll_request_text(r.free, r.draining, [&](const auto& emit) {
    for (const auto& a : r.running) emit(a.job_id, a.lease_id);
  });
}

}  // namespace

TEST(PollRequestText, IsTheSameTextAsThePollRequests) {
  p::PollRequest empty;
  EXPECT_EQ(written_from_parts(empty), p::to_json_text(empty));
  empty.draining = true;
  EXPECT_EQ(written_from_parts(empty), p::to_json_text(empty));

  p::PollRequest r;
  r.free = {{"process", 3}, {"slurm", 0}, {"z", -1}, {"big", 2147483647}};
  r.running = {{"job_01JAAAAAAAAAAAAAAAAAAAAAAA", "lse_1"}, {"job_2", "lse_2"}};
  EXPECT_EQ(written_from_parts(r), p::to_json_text(r));
}

TEST(PollRequestText, EscapesIdsAsBoostJsonDoes) {
  // Lease ids come from the control plane: whatever it sent goes back escaped exactly as the serializer would.
  p::PollRequest r;
  r.free = {{"we\"ird\\runner", 1}};
  r.running = {{"job \"quoted\" \\ back", std::string("lse\n\t\x01\x1f end")},
               {"j\xc3\xa9", std::string(700, 'x') + "\"" + std::string(300, '\\')}};  // longer than one chunk
  const auto text = written_from_parts(r);
  EXPECT_EQ(text, p::to_json_text(r));
  auto back = p::parse_as<p::PollRequest>(text);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->running.size(), 2u);
  EXPECT_EQ(back->running[0].lease_id, r.running[0].lease_id);
  EXPECT_EQ(back->running[1].lease_id, r.running[1].lease_id);
}

TEST(PollRequestText, TenThousandAttemptsAreWrittenIntoOneStringAtItsSize) {
  p::PollRequest r;
  r.free = {{"slurm", 0}};
  for (int i = 0; i < 10000; ++i)
    r.running.push_back({"job_01JX" + std::to_string(1000000 + i), "lse_01JY" + std::to_string(2000000 + i)});
  const auto text = written_from_parts(r);
  EXPECT_EQ(text, p::to_json_text(r));
  // Sized by a counting pass, then written: no doubling growth, no spare capacity held through the poll's hold.
  EXPECT_EQ(text.capacity(), text.size());
}
