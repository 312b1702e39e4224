// The per-attempt outbox: ordering, chunking, acknowledgement, 409 offset recovery; and status.json.
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/outbox.hpp"
#include "agent/status_file.hpp"
#include "allocation_counter.hpp"

using namespace nymph::agent;
using nymph::runners::JobState;
using nymph::runners::JobUpdate;
using nymph::runners::Stream;

namespace {
const auto now = std::chrono::system_clock::time_point{};
const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
using std::chrono::milliseconds;

// Drains the outbox as a perfect server would, returning what it received.
struct Received {
  std::string out, err;
  std::vector<std::int64_t> seqs;
};
Received drain(AttemptOutbox& box, Received r = {}) {
  while (auto u = box.next_upload(t0)) {
    if (u->kind == Upload::Kind::log) {
      auto& s = u->stream == Stream::out ? r.out : r.err;
      EXPECT_EQ(u->offset, s.size());
      s.append(u->bytes);
    } else {
      r.seqs.push_back(u->event->seq);
    }
    box.acknowledged(*u);
  }
  return r;
}
}  // namespace

TEST(Outbox, AnEmptyOutboxAllocatesNothing) {
  // Every attempt has one, and a tracked Slurm job's is empty nearly all its life: ten thousand of them must
  // not hold a buffer each (libstdc++'s deque allocated 576 bytes at construction, three per outbox).
  const std::size_t before = nymph::test::allocations_on_this_thread();
  AttemptOutbox box(1 << 20, milliseconds(20));
  EXPECT_EQ(nymph::test::allocations_on_this_thread() - before, 0u);
  // ...and it is empty again once what was queued has been acknowledged.
  box.push_event(JobUpdate{.state = JobState::running}, now, t0);
  box.push_output(Stream::out, 0, "hello");
  drain(box);
  EXPECT_EQ(box.buffered_bytes(), 0u);
  EXPECT_EQ(box.next_upload(t0 + std::chrono::seconds(1)), std::nullopt);
}

TEST(Outbox, AnOutboxWithoutOutputKeepsNoStreamBuffers) {
  // The two streams' buffers (56 bytes each) come with the first output: a tracked Slurm job's outbox holds
  // events only, and a manager keeps ten thousand.
  EXPECT_LE(sizeof(AttemptOutbox), 64u);
  AttemptOutbox box(1 << 20);
  EXPECT_TRUE(box.expected_offset(Stream::err, 0)) << "nothing sent, nothing expected";
  EXPECT_FALSE(box.expected_offset(Stream::out, 3)) << "the server expects bytes this outbox never had";
  box.push_output(Stream::out, 0, "abc");
  EXPECT_EQ(box.buffered_bytes(), 3u);
}

TEST(Outbox, ProgressEventsFirstFinalEventAfterAllLogs) {
  AttemptOutbox box(4);
  EXPECT_EQ(box.push_event({.state = JobState::running}, now, t0), 1);
  box.push_output(Stream::out, 0, "hello world");
  box.push_output(Stream::err, 0, "oops");
  auto first = box.next_upload(t0);
  EXPECT_EQ(box.push_event({.state = JobState::succeeded, .exit_code = 0}, now, t0), 2);
  EXPECT_EQ(box.buffered_bytes(), 15u);

  ASSERT_EQ(first->kind, Upload::Kind::event);
  EXPECT_EQ(first->event->seq, 1);
  box.acknowledged(*first);
  // logs in chunks of at most 4 bytes, then the final event
  auto chunk = box.next_upload(t0);
  ASSERT_EQ(chunk->kind, Upload::Kind::log);
  EXPECT_EQ(chunk->bytes, "hell");
  box.acknowledged(*chunk);
  auto r = drain(box, Received{.out = "hell"});
  EXPECT_EQ(r.out, "hello world");
  EXPECT_EQ(r.err, "oops");
  EXPECT_EQ(r.seqs, (std::vector<std::int64_t>{2}));
  EXPECT_TRUE(box.finished());
  EXPECT_EQ(box.buffered_bytes(), 0u);
}

TEST(Outbox, UnacknowledgedUploadsAreOfferedAgain) {
  AttemptOutbox box;
  box.push_output(Stream::out, 0, "abc");
  auto u1 = box.next_upload(t0);
  auto u2 = box.next_upload(t0);  // no ack (connection failed): the same bytes again
  EXPECT_EQ(u1->offset, u2->offset);
  EXPECT_EQ(u2->bytes, "abc");
}

TEST(Outbox, OverlappingOutputIsDroppedAndGapsAreBugs) {
  AttemptOutbox box;
  box.push_output(Stream::out, 0, "abcdef");
  box.push_output(Stream::out, 3, "defgh");
  EXPECT_EQ(drain(box).out, "abcdefgh");
  EXPECT_THROW(box.push_output(Stream::out, 100, "x"), std::logic_error);
}

TEST(Outbox, ServerAheadAfterALostReplySkipsWhatItHas) {
  AttemptOutbox box;
  box.push_output(Stream::err, 0, "0123456789");
  ASSERT_TRUE(box.expected_offset(Stream::err, 6));  // 409: the server already has 6 bytes
  auto u = box.next_upload(t0);
  EXPECT_EQ(u->offset, 6u);
  EXPECT_EQ(u->bytes, "6789");
  EXPECT_FALSE(box.expected_offset(Stream::err, 2));   // the server lost data we no longer have
  EXPECT_FALSE(box.expected_offset(Stream::err, 99));  // the server claims bytes never produced
}

TEST(Outbox, OutputSpanningManyChunksIsOfferedChunkByChunk) {
  AttemptOutbox box(4);
  box.push_output(Stream::out, 0, "ab");
  box.push_output(Stream::out, 2, "cdefghij");  // fills "abcd", then "efgh", "ij"
  EXPECT_EQ(box.next_upload(t0)->bytes, "abcd");
  ASSERT_TRUE(box.expected_offset(Stream::out, 5));  // the server has "abcde": resume inside a chunk
  auto u = box.next_upload(t0);
  EXPECT_EQ(u->offset, 5u);
  EXPECT_EQ(u->bytes, "fgh");
  box.acknowledged(*u);
  box.push_output(Stream::out, 10, "klm");  // appended to the partial last chunk, then a new one
  EXPECT_EQ(box.buffered_bytes(), 5u);
  EXPECT_EQ(drain(box, Received{.out = "abcdefgh"}).out, "abcdefghijklm");
  EXPECT_EQ(box.buffered_bytes(), 0u);
}

TEST(Outbox, NothingAfterTheFinalEvent) {
  AttemptOutbox box;
  box.push_event({.state = JobState::failed, .exit_code = 3}, now, t0);
  EXPECT_THROW(box.push_event({.state = JobState::running}, now, t0), std::logic_error);
}

TEST(Outbox, ProgressEventIsHeldAndReplacedByAQuickFinalEvent) {
  AttemptOutbox box(1 << 20, milliseconds(20));
  EXPECT_EQ(box.push_event({.state = JobState::pending, .slurm_job_id = "42"}, now, t0), 1);
  EXPECT_EQ(box.push_event({.state = JobState::running}, now, t0 + milliseconds(1)), 2);
  EXPECT_FALSE(box.next_upload(t0 + milliseconds(5)));
  EXPECT_EQ(box.held_until(t0 + milliseconds(5)), t0 + milliseconds(20));
  // The job ends within the hold: its final event alone, numbered 1, carrying the Slurm job id.
  EXPECT_EQ(box.push_event({.state = JobState::succeeded, .exit_code = 0}, now, t0 + milliseconds(6)), 1);
  auto u = box.next_upload(t0 + milliseconds(6));
  ASSERT_TRUE(u);
  EXPECT_EQ(u->event->seq, 1);
  EXPECT_EQ(u->event->update.state, JobState::succeeded);
  EXPECT_EQ(u->event->update.slurm_job_id, std::optional<std::string>("42"));
  box.acknowledged(*u);
  EXPECT_TRUE(box.finished());
}

TEST(Outbox, HeldProgressEventGoesOutWhenTheHoldEndsOrOutputArrives) {
  AttemptOutbox box(1 << 20, milliseconds(20));
  box.push_event({.state = JobState::running}, now, t0);
  EXPECT_FALSE(box.next_upload(t0 + milliseconds(19)));
  auto u = box.next_upload(t0 + milliseconds(20));
  ASSERT_TRUE(u);
  EXPECT_EQ(u->event->update.state, JobState::running);
  // Once offered it may be on the wire: a final event no longer replaces it.
  EXPECT_EQ(box.push_event({.state = JobState::failed, .exit_code = 1}, now, t0 + milliseconds(21)), 2);
  box.acknowledged(*u);
  EXPECT_EQ(drain(box).seqs, (std::vector<std::int64_t>{2}));

  AttemptOutbox chatty(1 << 20, milliseconds(20));
  chatty.push_event({.state = JobState::running}, now, t0);
  chatty.push_output(Stream::out, 0, "hi");  // output must not wait: the running event goes first, at once
  EXPECT_FALSE(chatty.held_until(t0));
  // ... and is no longer replaced by a final event.
  EXPECT_EQ(chatty.push_event({.state = JobState::succeeded, .exit_code = 0}, now, t0), 2);
  auto r = drain(chatty);
  EXPECT_EQ(r.seqs, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(r.out, "hi");
}

TEST(StatusFile, RoundTripsAtomically) {
  auto dir = std::filesystem::temp_directory_path() / ("nymph-status-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  DaemonStatus s{.pid = 42, .launch_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV", .label = "h-01AR", .worker_id = "w1",
                 .state = "exited", .exit_reason = "sigterm", .message = "stopped by SIGTERM"};
  s.started_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1000));
  ASSERT_TRUE(write_status_file(dir / "status.json", s, StatusDurability::synced).has_value());
  EXPECT_FALSE(std::filesystem::exists(dir / "status.json.tmp"));
  EXPECT_EQ(std::filesystem::status(dir / "status.json").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto back = read_status_file(dir / "status.json");
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->exit_reason, "sigterm");
  EXPECT_EQ(back->started_at, s.started_at);
  EXPECT_TRUE(back->runner_trouble.empty());
  s.runner_trouble["slurm"] = "slurmctld: squeue: error: Rate limit exceeded";
  ASSERT_TRUE(write_status_file(dir / "status.json", s, StatusDurability::unsynced).has_value());
  back = read_status_file(dir / "status.json");
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->runner_trouble, s.runner_trouble);
  std::filesystem::remove_all(dir);
}

TEST(Outbox, AClosedStreamDropsItsBytesAndTheFinalEventStillGoes) {
  AttemptOutbox box(4);
  box.push_output(Stream::out, 0, "0123456789");
  box.push_output(Stream::err, 0, "err");
  box.push_event(JobUpdate{.state = JobState::succeeded, .exit_code = 0}, now, t0);
  auto first = box.next_upload(t0);
  ASSERT_TRUE(first && first->kind == Upload::Kind::log && first->stream == Stream::out);
  box.acknowledged(*first);  // "0123" stored, then the control plane takes no more of stdout
  box.close_stream(Stream::out);
  EXPECT_EQ(box.buffered_bytes(), 3u);
  box.push_output(Stream::out, 10, "later");  // dropped at once
  EXPECT_EQ(box.buffered_bytes(), 3u);
  auto r = drain(box);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "err");
  EXPECT_EQ(r.seqs, std::vector<std::int64_t>{1});
  EXPECT_TRUE(box.finished());
}

TEST(Outbox, ATakenOverAttemptContinuesAfterTheServersLastSeq) {
  AttemptOutbox box;
  box.continue_after(3);  // the previous run's events 1-3 were applied
  EXPECT_EQ(box.push_event(JobUpdate{.state = JobState::running}, now, t0), 4);
  EXPECT_EQ(box.push_event(JobUpdate{.state = JobState::succeeded}, now, t0), 5);
  box.continue_after(1);  // never goes back
  EXPECT_EQ(box.last_seq(), 5);
  EXPECT_EQ(drain(box).seqs, (std::vector<std::int64_t>{4, 5}));
}
