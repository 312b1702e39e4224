// Fault-injection case (g) of issue 15: events of one lease are applied in seq order or refused
// (docs/protocol.md 8.3). Before, `seq 5 running` then `seq 3 succeeded` answered 200 and the final event was
// thrown away (the worker believed it delivered; the lease then expired and the job ran again), and a seq of
// 2^63-1 was accepted, after which no event of that lease could apply.
#include <gtest/gtest.h>

#include "tests/control/worker_api.hpp"

namespace p = nymph::protocol;
namespace http = nymph::http;
using nymph::test::ControlServer;
using nymph::test::WorkerApi;

namespace {

struct Running {
  WorkerApi::Worker worker;
  std::string job, lease;
};

Running running_job(WorkerApi& api) {
  auto w = api.register_with(WorkerApi::registration());
  std::string job = api.submit();
  auto lease = api.poll(w, {{"process", 1}}).jobs.at(0).lease_id;
  return {w, job, lease};
}

}  // namespace

TEST(EventOrder, AFinalEventBelowAnAppliedSeqIs409OutOfOrderAndTheJobIsNotMarkedSucceeded) {
  ControlServer cp({.poll_timeout = "200ms"});
  WorkerApi api(cp);
  auto r = running_job(api);
  EXPECT_EQ(WorkerApi::outcome(api.post_event(r.worker, r.job, WorkerApi::event(r.lease, 5, p::EventState::running))),
            "200");
  auto late = api.post_event(r.worker, r.job, WorkerApi::event(r.lease, 3, p::EventState::succeeded));
  EXPECT_EQ(WorkerApi::outcome(late), "409 outOfOrder") << late.body;
  auto err = p::parse_error_document(late.body);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->last_seq, 5);
  auto job = api.job_info(r.job);
  EXPECT_EQ(job.state, p::JobState::running);
  EXPECT_EQ(job.attempts.at(0).state, p::AttemptState::running);
  ASSERT_EQ(job.events.size(), 1u) << "the refused event is not recorded";
  EXPECT_EQ(job.events[0].seq, 5);
  // The same seq again is still a duplicate (200), and a higher one applies: gaps are allowed.
  auto dup = api.post_event(r.worker, r.job, WorkerApi::event(r.lease, 5, p::EventState::running));
  EXPECT_EQ(WorkerApi::outcome(dup), "200");
  EXPECT_TRUE(p::parse_as<p::EventResponse>(dup.body)->duplicate);
  EXPECT_EQ(WorkerApi::outcome(api.post_event(r.worker, r.job, WorkerApi::event(r.lease, 9, p::EventState::succeeded))),
            "200");
  EXPECT_EQ(api.job_info(r.job).state, p::JobState::succeeded);
}

TEST(EventOrder, ASeqOutside1To1000000Is400AndChangesNothing) {
  ControlServer cp({.poll_timeout = "200ms"});
  WorkerApi api(cp);
  auto r = running_job(api);
  for (const char* seq : {"9223372036854775807", "1000001", "0", "-1"}) {
    std::string body = std::string(R"({"leaseId":")") + r.lease + R"(","seq":)" + seq + R"(,"state":"running"})";
    auto res = api.send(http::Method::post, p::events_path(r.job), r.worker.credential, body);
    EXPECT_EQ(res.status, 400u) << seq << ": " << res.body;
    EXPECT_NE(res.body.find("seq"), std::string::npos) << res.body;
  }
  EXPECT_EQ(WorkerApi::outcome(api.post_event(r.worker, r.job, WorkerApi::event(r.lease, 1000000, p::EventState::running))),
            "200");
  EXPECT_TRUE(api.job_info(r.job).events.size() == 1u);
}
