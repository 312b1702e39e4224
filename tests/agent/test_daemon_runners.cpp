// What the daemon does with a runner's attempts follows the Runner contract, never the runner's name: its
// lifetime decides what a stop waits for, stops or leaves running and which jobs must fit before the
// walltime; its resumable part decides what a restarted agent takes back. Each test names its runners
// against expectation ("process" for a runner whose jobs survive the agent) to prove the name is not asked.
#include "tests/agent/daemon_fixture.hpp"

namespace {

using namespace nymph;
using namespace nymph::agent;
using namespace nymph::agent::daemon_test;
using runners::Lifetime;

TEST_F(DaemonTest, AJobThatStopsWithTheAgentIsStoppedAndReportedAtShutdownWhateverItsRunnerIsCalled) {
  FakeRunner batch("batch", Lifetime::stops_with_agent);
  runner_map = {{"batch", &batch}};
  settings.capacity = {{"batch", 1}};
  settings.lifecycle.drain_grace = 50ms;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1", "L1", "batch")}});
    co_await until([&] { return batch.started == 1; }, &batch);
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(batch.stops["j1"], runners::StopReason::shutdown);
  ASSERT_FALSE(cp.event_states("j1").empty());
  EXPECT_EQ(cp.event_states("j1").back(), "lost") << "waited for and reported (workerStopping), not detached";
  EXPECT_TRUE(batch.released.contains("j1"));
}

TEST_F(DaemonTest, AJobThatSurvivesTheAgentIsDetachedAtShutdownNotWaitedForWhateverItsRunnerIsCalled) {
  FakeRunner surviving("process", Lifetime::survives_agent);
  runner_map = {{"process", &surviving}};
  settings.lifecycle.drain_grace = 60s;  // longer than the test's hang guard: waiting for the job would fail it
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return surviving.started == 1; }, &surviving);
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(surviving.stops["j1"], runners::StopReason::shutdown) << "the detach request";
  for (const auto& state : cp.event_states("j1")) EXPECT_EQ(state, "running") << "no end is reported";
  EXPECT_FALSE(surviving.released.contains("j1")) << "a detached job keeps its files for the next agent";
}

// D4 for a job that survives the agent (a Slurm job): an expired lease is a stop(lease_expired) (the Slurm runner
// scancels), never a kill of the agent's own children, and a per-runner TTL from registration applies.
TEST_F(DaemonTest, AnExpiredLeaseStopsAJobThatSurvivesTheAgentWithLeaseExpired) {
  FakeRunner slurm("slurm", Lifetime::survives_agent);
  runner_map = {{"slurm", &slurm}, {"process", &runner}};
  settings.capacity = {{"slurm", 1}, {"process", 1}};
  settings.backoff_initial = 50ms;
  settings.backoff_max = 200ms;
  cp.lease_ttl_s = 3600;  // the process job's lease outlives the test
  auto assignment = job("s1", "Ls", "slurm");
  assignment.lease_ttl_s = 6;  // this lease: window 1 s
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {assignment, job("p1", "Lp", "process")}});
    co_await until([&] { return slurm.started == 1 && runner.started == 1; }, &slurm);
    cp.silent = true;
    cp.replies.emplace_back(CallError{CallFailure::transient, "poll: connection reset"});
    cp.changed.notify();
    co_await until([&] { return slurm.stops.contains("s1"); }, &slurm);
    cp.silent = false;
    co_await until([&] { return cp.event_states("s1").size() == 2; }, &slurm);
    daemon->on_signal(Signal::term);
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(slurm.stops["s1"], runners::StopReason::lease_expired);
  EXPECT_FALSE(slurm.kills.contains("s1"));
  EXPECT_FALSE(runner.stops.contains("p1") && runner.stops["p1"] == runners::StopReason::lease_expired)
      << "the process job's lease (1 h) did not expire";
  EXPECT_EQ(cp.event_states("s1"), (std::vector<std::string>{"running", "lost"}));
  for (const auto& [id, e] : cp.events) {
    if (id == "s1" && e.state == protocol::EventState::lost) {
      EXPECT_EQ(e.reason, protocol::EventReason::lease_expired);
    }
  }
}

TEST_F(DaemonTest, OnlyJobsThatStopWithTheAgentMustFitBeforeTheWalltime) {
  FakeRunner local("local", Lifetime::stops_with_agent);
  FakeRunner surviving("process", Lifetime::survives_agent);
  runner_map = {{"local", &local}, {"process", &surviving}};
  settings.capacity = {{"local", 2}, {"process", 1}};
  settings.lifecycle.walltime_end = Clock::now() + 1h;  // lead 2 min: a 2 h job does not fit, a 30 min one does
  auto too_long = job("a", "La", "local");
  too_long.spec.timeout_s = 7200;
  auto fits = job("c", "Lc", "local");
  fits.spec.timeout_s = 1800;
  auto unbounded = job("d", "Ld", "local");  // placed here by the control plane: no worker serves longer
  auto surviving_job = job("b", "Lb", "process");
  surviving_job.spec.timeout_s = 7200;
  surviving.finish.insert("b");
  local.finish = {"c", "d"};
  auto ended = [&](const std::string& id) {
    auto states = cp.event_states(id);
    return !states.empty() && states.back() != "running";
  };
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {too_long, surviving_job}});
    co_await until([&] { return ended("a") && ended("b"); }, &surviving);
    co_await until([&] { return cp.polls.size() >= 2; });
    cp.reply({.jobs = {fits, unbounded}});
    co_await until([&] { return ended("c") && ended("d"); }, &local);
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(local.started, 2) << "c and d started, a did not";
  // A refusal, never started: lost/overCapacity, so the control plane re-queues it without counting an attempt.
  EXPECT_EQ(cp.event_states("a"), (std::vector<std::string>{"lost"}));
  for (const auto& [id, e] : cp.events) {
    if (id == "a") {
      EXPECT_EQ(e.reason, protocol::EventReason::over_capacity);
      EXPECT_NE(e.message.find("does not fit"), std::string::npos) << e.message;
    }
  }
  EXPECT_EQ(cp.event_states("c").back(), "succeeded");
  EXPECT_EQ(cp.event_states("d").back(), "succeeded");
  EXPECT_EQ(surviving.started, 1);
  EXPECT_EQ(cp.event_states("b").back(), "succeeded");
}

TEST_F(DaemonTest, AttemptsAResumableRunnerLeftRunningAreListedThenResumedOrAbandoned) {
  FakeRunner batch("batch", Lifetime::survives_agent);
  batch.resumable_part = true;
  batch.left_running = {{"keep", "Lk", 1, std::string("record of keep")},
                        {"drop", "Ld", 2, std::string("record of drop")}};
  runner_map["batch"] = &batch;
  cp.cancel_at_registration = {{"drop", "Ld", protocol::CancelReason::lease_lost}};
  run([&]() -> asio::awaitable<void> {
    co_await until([&] { return cp.event_states("keep").size() == 1 && !cp.polls.empty(); }, &batch);
    co_await until([&] { return batch.released.contains("keep"); }, &batch);
    daemon->on_signal(Signal::term);
  });
  ASSERT_EQ(cp.registrations.size(), 1u);
  ASSERT_EQ(cp.registrations[0].running.size(), 2u);
  EXPECT_EQ(batch.resumed, (std::vector<std::string>{"record of keep"})) << "the record comes back unchanged";
  EXPECT_EQ(batch.abandoned, (std::vector<std::string>{"record of drop"}));
  EXPECT_EQ(batch.started, 0);
  EXPECT_EQ(runner.started, 0);
  EXPECT_EQ(cp.event_states("keep"), (std::vector<std::string>{"succeeded"}));
  EXPECT_EQ(cp.logs["keep/stdout"], "from slurm\n");
  EXPECT_TRUE(cp.event_states("drop").empty());
  EXPECT_FALSE(batch.released.contains("drop")) << "abandon() forgets the attempt itself";
}

TEST_F(DaemonTest, ARunnerWithoutAResumablePartHasNothingToTakeBack) {
  runner.left_running = {{"old", "Lo", 1, std::string("never listed")}};  // resumable_part stays false
  run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    daemon->on_signal(Signal::term);
  });
  ASSERT_EQ(cp.registrations.size(), 1u);
  EXPECT_TRUE(cp.registrations[0].running.empty());
  EXPECT_TRUE(runner.resumed.empty());
}

}  // namespace
