// The worker seams of issue 15 against the real nymph-control: takeover by identity (docs/protocol.md 8.1),
// per-runner lease TTLs (section 5), what lastSeen means (8.11).
#include <gtest/gtest.h>

#include "common/time.hpp"
#include "tests/control/worker_api.hpp"

namespace p = nymph::protocol;
namespace http = nymph::http;
using nymph::test::ControlServer;
using nymph::test::WorkerApi;

TEST(Takeover, ANewManagerOfTheIdentityCarriesTheListedLeasesOnAndTheRestIsRequeued) {
  ControlServer cp({.poll_timeout = "200ms"});
  WorkerApi api(cp);
  auto old = api.register_with(WorkerApi::registration("alice@c1"));
  std::string kept = api.submit(), dropped = api.submit();
  auto jobs = api.poll(old, {{"process", 2}}).jobs;
  ASSERT_EQ(jobs.size(), 2u);
  const auto& kept_lease = jobs[0].job_id == kept ? jobs[0].lease_id : jobs[1].lease_id;
  const auto& dropped_lease = jobs[0].job_id == kept ? jobs[1].lease_id : jobs[0].lease_id;
  ASSERT_EQ(WorkerApi::outcome(api.post_event(old, kept, WorkerApi::event(kept_lease, 1, p::EventState::running))),
            "200");

  // The old manager died without a word; a new one (a new launch) of the same identity lists one attempt.
  auto fresh = api.register_with(WorkerApi::registration("alice@c1", {{kept, kept_lease}}));
  EXPECT_NE(fresh.id, old.id);
  EXPECT_TRUE(fresh.reply.cancel.empty()) << "no leaseLost for an adopted attempt";

  auto gone = api.worker_info(old.id);
  EXPECT_EQ(gone.status, p::WorkerStatus::gone);
  EXPECT_EQ(gone.exit_reason, p::ExitReason::killed);
  EXPECT_EQ(gone.exit_message, "replaced by worker " + fresh.id);
  EXPECT_EQ(gone.identity, "alice@c1");
  // Its credential ended with it: a replaced agent exits (401) instead of re-registering and taking back.
  EXPECT_EQ(WorkerApi::outcome(api.poll_raw(old, {{"process", 1}})), "401 unauthorized");
  EXPECT_EQ(api.metric("nymph_workers{status=\"gone\"}"), 1);
  EXPECT_EQ(api.metric("nymph_workers{status=\"active\"}"), 1);

  // The adopted attempt: same lease, now the new worker's; the old credential cannot report it any more.
  auto k = api.job_info(kept);
  EXPECT_EQ(k.worker_id, fresh.id);
  EXPECT_EQ(k.attempt, 1);
  EXPECT_EQ(k.attempts.at(0).lease_id, kept_lease);
  EXPECT_EQ(WorkerApi::outcome(api.post_event(old, kept, WorkerApi::event(kept_lease, 2, p::EventState::failed))),
            "401 unauthorized");
  EXPECT_TRUE(api.poll(fresh, {{"process", 0}}, {{kept, kept_lease}}).cancel.empty());
  EXPECT_EQ(WorkerApi::outcome(api.post_event(fresh, kept, WorkerApi::event(kept_lease, 2, p::EventState::succeeded))),
            "200");
  EXPECT_EQ(api.job_info(kept).state, p::JobState::succeeded);

  // The attempt the new manager did not list was lost and its job re-queued; it runs again, as attempt 2.
  auto d = api.job_info(dropped);
  EXPECT_EQ(d.attempts.at(0).state, p::AttemptState::lost);
  EXPECT_EQ(d.attempts.at(0).message, "its worker was replaced by worker " + fresh.id);
  EXPECT_EQ(WorkerApi::outcome(api.post_event(fresh, dropped, WorkerApi::event(dropped_lease, 1, p::EventState::running))),
            "403 forbidden");
  auto again = api.poll(fresh, {{"process", 1}}).jobs;
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].job_id, dropped);
  EXPECT_EQ(again[0].attempt, 2);
  EXPECT_EQ(api.metric("nymph_jobs{state=\"running\"}"), 1);
  EXPECT_EQ(api.metric("nymph_jobs{state=\"succeeded\"}"), 1);
}

TEST(Takeover, AnotherTokenOrIdentityCannotTakeAnAttemptOver) {
  ControlServer cp({.poll_timeout = "200ms"});
  WorkerApi api(cp);
  std::string other_token = cp.create_token("agent", {"--name", "other"});
  auto owner = api.register_with(WorkerApi::registration("alice@c1"));
  std::string job = api.submit();
  auto lease = api.poll(owner, {{"process", 1}}).jobs.at(0).lease_id;
  struct Case {
    const char* what;
    p::RegisterRequest reg;
    std::string token;
  };
  std::vector<Case> cases{{"another identity", WorkerApi::registration("bob@c1", {{job, lease}}), ""},
                          {"another token", WorkerApi::registration("alice@c1", {{job, lease}}), other_token},
                          {"no identity", WorkerApi::registration(std::nullopt, {{job, lease}}), ""}};
  for (const auto& c : cases) {
    auto w = api.register_with(c.reg, c.token);
    ASSERT_EQ(w.reply.cancel.size(), 1u) << c.what;
    EXPECT_EQ(w.reply.cancel[0].reason, p::CancelReason::lease_lost) << c.what;
    EXPECT_EQ(w.reply.cancel[0].lease_id, lease) << c.what;
    EXPECT_EQ(WorkerApi::outcome(api.post_event(w, job, WorkerApi::event(lease, 1, p::EventState::running))),
              "403 forbidden")
        << c.what;
  }
  EXPECT_EQ(api.worker_info(owner.id).status, p::WorkerStatus::active);
  EXPECT_EQ(api.job_info(job).worker_id, owner.id);
  EXPECT_EQ(WorkerApi::outcome(api.post_event(owner, job, WorkerApi::event(lease, 1, p::EventState::succeeded))), "200");
}

TEST(Takeover, AnIdentityThatIsNotPrintableAsciiOrTooLongIs400) {
  ControlServer cp({.poll_timeout = "200ms"});
  WorkerApi api(cp);
  for (std::string bad : {std::string(201, 'a'), std::string("a\tb")}) {
    auto r = api.send(http::Method::post, p::workers_path(), cp.agent_token(),
                      p::to_json_text(WorkerApi::registration(bad)));
    EXPECT_EQ(WorkerApi::outcome(r), "400 invalidField") << r.body;
  }
}

TEST(LostReason, AnOverCapacityRefusalIsAcceptedAsTheFirstEventAndRequeuesWithoutUsingAnAttempt) {
  ControlServer cp({.poll_timeout = "200ms"});
  WorkerApi api(cp);
  auto w = api.register_with(WorkerApi::registration());
  std::string job = api.submit("process", /*max_attempts=*/1);
  auto lease = api.poll(w, {{"process", 1}}).jobs.at(0).lease_id;
  auto refuse = WorkerApi::event(lease, 1, p::EventState::lost);
  refuse.reason = p::EventReason::over_capacity;
  refuse.message = "refused: worker at capacity (4 of 4 slots busy)";
  auto r = api.post_event(w, job, refuse);
  ASSERT_EQ(WorkerApi::outcome(r), "200") << r.body;
  EXPECT_EQ(p::parse_as<p::EventResponse>(r.body)->job_state, p::JobState::queued);
  auto info = api.job_info(job);
  EXPECT_EQ(info.state, p::JobState::queued);
  ASSERT_EQ(info.events.size(), 1u);
  EXPECT_EQ(info.events[0].reason, p::EventReason::over_capacity);
  EXPECT_EQ(api.poll(w, {{"process", 1}}).jobs.at(0).attempt, 2);

  // A reason belongs to a lost event only.
  auto bad = WorkerApi::event(lease, 2, p::EventState::failed);
  bad.reason = p::EventReason::worker_stopping;
  EXPECT_EQ(WorkerApi::outcome(api.post_event(w, job, bad)), "400 invalidField");
}

TEST(LeaseTtl, EachRunnersLeasesRunOnTheirOwnTtlAlsoAfterARestart) {
  ControlServer cp({.poll_timeout = "200ms", .lease_ttl = "60s", .extra_args = {"--runner-lease-ttl", "slurm=1s"}});
  WorkerApi api(cp);
  auto w = api.register_with(WorkerApi::registration(std::nullopt, {}, {"process", "slurm"}));
  EXPECT_EQ(w.reply.lease_ttl_s, 60);
  EXPECT_EQ(w.reply.runner_lease_ttl_s, (std::map<std::string, double>{{"slurm", 1}}));
  std::string slurm_job = api.submit("slurm", 1), process_job = api.submit("process", 1);
  auto jobs = api.poll(w, {{"process", 1}, {"slurm", 1}}).jobs;
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& j : jobs) EXPECT_EQ(j.lease_ttl_s, j.runner == "slurm" ? 1 : 60) << j.runner;

  // After a restart each live lease gets its runner's TTL again: the Slurm attempt is lost within seconds,
  // the process attempt keeps running.
  cp.kill9();
  cp.restart();
  WorkerApi after(cp);  // the old client's pooled connections died with the server
  auto r = after.send(http::Method::get, p::job_path(slurm_job) + "?waitS=20", cp.admin_token());
  auto job = p::parse_as<p::JobInfo>(r.body).value();
  EXPECT_EQ(job.state, p::JobState::lost) << r.body;
  EXPECT_EQ(job.attempts.at(0).message, "lease not renewed for 1s");
  EXPECT_EQ(after.job_info(process_job).state, p::JobState::running);
}

TEST(LeaseTtl, AMalformedRunnerLeaseTtlKeepsTheServerFromStarting) {
  for (const char* bad : {"slurm", "=30m", "slurm=soon", "slurm=0s"})
    EXPECT_THROW(ControlServer({.extra_args = {"--runner-lease-ttl", bad},
                                .start_timeout = std::chrono::milliseconds(10'000)}),
                 std::runtime_error)
        << bad;
}

TEST(LastSeen, IsTheEndOfAHeldPollNotItsStart) {
  using namespace std::chrono_literals;
  ControlServer cp({.poll_timeout = "2500ms"});
  WorkerApi api(cp);
  auto w = api.register_with(WorkerApi::registration());
  auto sent = std::chrono::system_clock::now();
  auto reply = api.poll(w, {{"process", 1}});  // nothing queued: held for the whole poll timeout
  auto answered = std::chrono::system_clock::now();
  EXPECT_TRUE(reply.jobs.empty());
  ASSERT_GE(answered - sent, 2000ms) << "the poll was not held";
  // The reply has arrived, so its end was recorded before it was sent.
  auto seen = nymph::parse_time(api.worker_info(w.id).last_seen).value();
  EXPECT_GE(seen, sent + 2000ms) << "lastSeen " << api.worker_info(w.id).last_seen << " is the poll's start";
  EXPECT_LE(seen, answered);
}

TEST(LastSeen, AnEventOrALogUploadIsContactToo) {
  ControlServer cp({.poll_timeout = "1500ms"});
  WorkerApi api(cp);
  auto w = api.register_with(WorkerApi::registration());
  std::string job = api.submit();
  auto lease = api.poll(w, {{"process", 1}}).jobs.at(0).lease_id;
  // Another worker's held poll passes 1.5 s in which `w` has no contact (lastSeen is kept to the second).
  auto clock = api.register_with(WorkerApi::registration());
  api.poll(clock, {{"process", 0}});
  // lastSeen is written to the millisecond: on a quiet machine the event lands within the millisecond it was sent.
  const auto sent = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  ASSERT_EQ(WorkerApi::outcome(api.post_event(w, job, WorkerApi::event(lease, 1, p::EventState::running))), "200");
  EXPECT_GE(nymph::parse_time(api.worker_info(w.id).last_seen).value(), sent) << "the event was not contact";
  api.poll(clock, {{"process", 0}});
  const auto sent_log = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  auto log = api.send(http::Method::put, p::log_put_target(job, p::LogStream::out, 0, lease), w.credential, "x");
  ASSERT_EQ(WorkerApi::outcome(log), "200");
  EXPECT_GE(nymph::parse_time(api.worker_info(w.id).last_seen).value(), sent_log) << "the upload was not contact";
}
