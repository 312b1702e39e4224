// The daemon's policy, driven through an in-memory control plane and runner: registration, dispatch, ordered
// delivery, retries without loss, fencing, cancel, re-registration, directives and stops. No sockets, no
// child processes; each test runs under the run_coro hang guard.
#include <algorithm>
#include <filesystem>

#include "agent/status_file.hpp"
#include "tests/agent/daemon_fixture.hpp"

namespace {

using namespace nymph;
using namespace nymph::agent;
using namespace nymph::agent::daemon_test;

TEST_F(DaemonTest, RunsAJobAndDeliversEventsAndLogsInOrderThenStopsOnSigterm) {
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return cp.polls.size() == 1; });
    EXPECT_EQ(cp.polls[0].free.at("process"), 2);
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1 && cp.logs["j1/stdout"] == "hello\n"; });
    runner.finish.insert("j1");
    runner.changed.notify();
    co_await until([&] { return cp.event_states("j1").size() == 2 && runner.released.contains("j1"); });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(cp.event_states("j1"), (std::vector<std::string>{"running", "succeeded"}));
  EXPECT_EQ(cp.events[0].second.seq, 1);
  EXPECT_EQ(cp.events[1].second.seq, 2);
  ASSERT_EQ(cp.exits.size(), 1u);
  EXPECT_EQ(cp.exits[0].exit_reason, protocol::ExitReason::sigterm);
  auto status = read_status_file(dir / "status.json");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->state, "exited");
  EXPECT_EQ(status->exit_reason, "sigterm");
  EXPECT_EQ(status->worker_id, "w1");
}

TEST_F(DaemonTest, TransientFailuresLoseNothing) {
  cp.fail_next_uploads = 5;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    runner.finish.insert("j1");
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return cp.event_states("j1").size() == 2; });
    daemon->on_signal(Signal::interrupt);
  });
  EXPECT_EQ(reason, ExitReason::sigint);
  EXPECT_EQ(cp.event_states("j1"), (std::vector<std::string>{"running", "succeeded"}));
  EXPECT_EQ(cp.logs["j1/stdout"], "hello\n");
  EXPECT_EQ(cp.fail_next_uploads, 0);
}

TEST_F(DaemonTest, AQuickJobReportsItsFinalEventOnlyALongerOneRunningFirst) {
  runner.output = "";
  runner.finish.insert("quick");
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("quick", "L1"), job("slow", "L2")}});
    co_await until([&] { return cp.event_states("quick").size() == 1 && cp.event_states("slow").size() == 1; });
    runner.finish.insert("slow");
    runner.changed.notify();
    co_await until([&] { return cp.event_states("slow").size() == 2; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(cp.event_states("quick"), (std::vector<std::string>{"succeeded"}));
  EXPECT_EQ(cp.event_states("slow"), (std::vector<std::string>{"running", "succeeded"}));
  for (const auto& [job_id, e] : cp.events) {
    if (job_id == "quick") {
      EXPECT_EQ(e.seq, 1);  // seqs stay contiguous from 1
    }
  }
}

TEST_F(DaemonTest, FencedLeaseStopsTheAttemptAndDropsItsUploads) {
  cp.fenced_leases.insert("L-old");
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1", "L-old")}});
    co_await until([&] { return runner.stops.contains("j1"); });
    EXPECT_EQ(runner.stops["j1"], runners::StopReason::lease_lost);
    co_await until([&] { return runner.released.contains("j1"); });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_TRUE(cp.events.empty());
}

TEST_F(DaemonTest, PastTheLogCapTheStreamIsDroppedWithOneWarningAndTheFinalEventStillGoes) {
  runner.output = std::string(3 << 20, 'x');  // three 1 MiB uploads, more than the backlog bound
  runner.finish.insert("j1");
  cp.log_cap = (3 << 20) / 2;                 // the second upload is refused
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.released.contains("j1"); });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  ASSERT_FALSE(cp.event_states("j1").empty());
  EXPECT_EQ(cp.event_states("j1").back(), "succeeded");
  EXPECT_EQ(cp.logs["j1/stdout"].size(), std::size_t{1} << 20);
  EXPECT_EQ(cp.log_refusals, 1) << "no upload of a refused stream after the refusal";
  std::string text = log_text.str();
  auto first = text.find("takes no more stdout");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("takes no more stdout", first + 1), std::string::npos) << text;
}

TEST_F(DaemonTest, CancelOrderStopsTheJobAndReportsCancelled) {
  run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1 && cp.polls.size() >= 2; });
    EXPECT_EQ(cp.polls.back().running.size(), 1u);
    cp.reply({.cancel = {{"j1", "L1", protocol::CancelReason::user}}});
    co_await until([&] { return cp.event_states("j1").size() == 2; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(runner.stops["j1"], runners::StopReason::user_cancel);
  EXPECT_EQ(cp.event_states("j1"), (std::vector<std::string>{"running", "cancelled"}));
}

TEST_F(DaemonTest, UnknownWorkerReRegistersListingRunningAttempts) {
  run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1 && cp.polls.size() >= 2; });
    cp.replies.emplace_back(CallError{CallFailure::worker_unknown, "HTTP 404 unknownWorker"});
    cp.changed.notify();
    co_await until([&] { return cp.registrations.size() == 2; });
    daemon->on_signal(Signal::term);
    daemon->on_signal(Signal::term);  // second signal: stop the job at once
  });
  ASSERT_EQ(cp.registrations.size(), 2u);
  EXPECT_EQ(cp.registrations[1].launch_id, settings.launch_id);
  ASSERT_EQ(cp.registrations[1].running.size(), 1u);
  EXPECT_EQ(cp.registrations[1].running[0].job_id, "j1");
  EXPECT_EQ(cp.registrations[1].running[0].lease_id, "L1");
  EXPECT_EQ(runner.stops["j1"], runners::StopReason::shutdown);
}

TEST_F(DaemonTest, UnauthorizedExitsWithError) {
  cp.unauthorized = true;
  auto reason = run([&]() -> asio::awaitable<void> { co_return; });
  EXPECT_EQ(reason, ExitReason::error);
  EXPECT_NE(daemon->exit_message().find("401"), std::string::npos) << daemon->exit_message();
  EXPECT_TRUE(cp.polls.empty());
}

TEST_F(DaemonTest, AWorkerIdThatIsNotAnIdIsARegistrationErrorNotALoop) {
  cp.worker_id = "../../../v1/jobs/x?y=";  // would have been polled as a path
  auto reason = run([&]() -> asio::awaitable<void> { co_return; });
  EXPECT_EQ(reason, ExitReason::error);
  EXPECT_NE(daemon->exit_message().find("field 'workerId': '../../../v1/jobs/x?y=' is not an id"), std::string::npos)
      << daemon->exit_message();
  EXPECT_EQ(cp.registrations.size(), 1u);
  EXPECT_TRUE(cp.polls.empty());
  EXPECT_TRUE(cp.exits.empty());  // no exit report to a path built from it either
}

TEST_F(DaemonTest, AJobWhoseIdsAreNotIdsIsDroppedWithAnErrorAndTheOthersRun) {
  runner.finish.insert("good");
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("job\r\nX-Injected: yes"), job("bad-lease", "L\r\nX: y"), job("good", "L3")}});
    co_await until([&] {
      auto states = cp.event_states("good");
      return !states.empty() && states.back() == "succeeded";
    });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(runner.started, 1);
  for (const auto& [job_id, e] : cp.events) EXPECT_EQ(job_id, "good");
  for (const auto& poll : cp.polls)
    for (const auto& held : poll.running) EXPECT_EQ(held.job_id, "good");  // the dropped ones are not held
  auto logged = log_text.str();
  EXPECT_NE(logged.find("field 'jobId': 'job\\r\\nX-Injected: yes' is not an id"), std::string::npos) << logged;
  EXPECT_NE(logged.find("field 'leaseId': 'L\\r\\nX: y' is not an id"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("X-Injected: yes\n"), std::string::npos) << logged;  // no forged line
}

TEST_F(DaemonTest, KillDirectiveIsKilled) {
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.directive = protocol::Directive::kill});
    co_return;
  });
  EXPECT_EQ(reason, ExitReason::killed);
  ASSERT_EQ(cp.exits.size(), 1u);
  EXPECT_EQ(cp.exits[0].exit_reason, protocol::ExitReason::killed);
}

TEST_F(DaemonTest, DrainTakesNoNewJobsAndExitsWhenIdle) {
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}, .directive = protocol::Directive::drain});
    co_await until([&] { return runner.started == 1 && cp.polls.size() >= 2; });
    EXPECT_TRUE(cp.polls.back().draining);
    EXPECT_EQ(cp.polls.back().free.at("process"), 0);
    cp.reply({.jobs = {job("j2", "L2")}});  // a job in a racing reply is not started
    runner.finish.insert("j1");
    runner.changed.notify();
  });
  EXPECT_EQ(reason, ExitReason::killed);
  EXPECT_EQ(runner.started, 1);
  EXPECT_EQ(cp.event_states("j1").back(), "succeeded");
  // The job that crossed the stop is handed back at once, unstarted (re-queued without counting an attempt).
  EXPECT_EQ(cp.event_states("j2"), (std::vector<std::string>{"lost"}));
  for (const auto& [j, e] : cp.events)
    if (j == "j2") {
      EXPECT_EQ(e.reason, protocol::EventReason::over_capacity);
    }
}

TEST_F(DaemonTest, SigtermWaitsForRunningJobsWithinDrainGraceThenKills) {
  settings.lifecycle.drain_grace = 50ms;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(runner.stops["j1"], runners::StopReason::shutdown);
  // A1: stopped because the worker is going away: lost (re-queued while attempts remain), not cancelled.
  EXPECT_EQ(cp.event_states("j1").back(), "lost");
  EXPECT_EQ(cp.events.back().second.reason, protocol::EventReason::worker_stopping);
}

TEST_F(DaemonTest, SigtermExitsWithinTheStopBudgetWhenAJobIgnoresSigtermAndEventsGet503) {
  // A1/A2 (issue 15 points 3 and 4): budget 3 s; one job ends on SIGTERM, one ignores it; every upload of the
  // second gets 503. /exit goes first, the polite job's final event (lost/workerStopping) is delivered, the
  // stubborn one is killed at the hard kill and its undeliverable event is named in the log, and run() returns
  // within the budget (plus slack for a loaded machine) although the delivery keeps failing.
  settings.lifecycle.stop_budget = 3s;
  settings.lifecycle.kill_grace = 10s;  // more than the budget leaves: SIGTERM at once, SIGKILL at the hard kill
  settings.lifecycle.drain_grace = 60s;
  settings.backoff_initial = 100ms;
  settings.backoff_max = 60s;  // a retry would sleep far past the budget if it did not wake at the deadline
  runner.output = "";
  runner.ignore_stop.insert("stubborn");
  cp.unavailable_leases.insert("L2");
  Clock::time_point signalled;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("polite", "L1"), job("stubborn", "L2")}});
    co_await until([&] { return runner.started == 2 && cp.event_states("polite").size() == 1; });
    signalled = Clock::now();
    daemon->on_signal(Signal::term);
  });
  const auto took = Clock::now() - signalled;
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_LE(took, 3s + 1500ms);
  EXPECT_GE(took, 2s) << "the stubborn job is killed at the hard kill (budget - reserve), not before";
  EXPECT_EQ(runner.stops["polite"], runners::StopReason::shutdown);
  EXPECT_TRUE(runner.kills.contains("stubborn"));
  EXPECT_FALSE(runner.kills.contains("polite"));
  ASSERT_EQ(cp.exits.size(), 1u);
  EXPECT_EQ(cp.exits[0].exit_reason, protocol::ExitReason::sigterm);
  auto exit_at = std::find(cp.calls.begin(), cp.calls.end(), "exit");
  auto polite_final = std::find(cp.calls.begin(), cp.calls.end(), "event polite lost");
  ASSERT_NE(polite_final, cp.calls.end());
  EXPECT_LT(exit_at, polite_final) << "/exit is reported before the jobs' final events";
  EXPECT_EQ(cp.events.back().second.reason, protocol::EventReason::worker_stopping);
  EXPECT_TRUE(cp.event_states("stubborn").empty());
  auto text = log_text.str();
  EXPECT_NE(text.find("job stubborn: attempt 1 (lease L2): its final event was not delivered"), std::string::npos)
      << text;
}

// D4 (issue 15 point 5): the control plane goes silent while a job runs. The agent gives the lease up after
// ttl - margin without renewal (12 s TTL: 7 s), kills the job before the server could re-queue it, and reports
// lost/leaseExpired once the control plane answers again.
TEST_F(DaemonTest, ALeaseThatCannotBeRenewedStopsTheJobAndIsReportedLostWhenContactReturns) {
  cp.lease_ttl_s = 12;
  settings.backoff_initial = 50ms;
  settings.backoff_max = 200ms;
  Clock::time_point silent_since;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1 && cp.event_states("j1").size() == 1; });
    silent_since = Clock::now();
    cp.silent = true;
    cp.replies.emplace_back(CallError{CallFailure::transient, "poll: connection reset"});  // ends the held poll
    cp.changed.notify();
    co_await until([&] { return runner.kills.contains("j1"); });
    EXPECT_GE(Clock::now() - silent_since, 6500ms) << "not before ttl - margin (7 s) since the last renewal";
    EXPECT_EQ(runner.kills["j1"], runners::StopReason::lease_expired);
    cp.silent = false;
    co_await until([&] { return cp.event_states("j1").size() == 2 && runner.released.contains("j1"); });
    for (std::size_t i = cp.polls.size(); i-- > 0 && !cp.polls[i].running.empty();)
      ADD_FAILURE() << "the stopped attempt is still listed as running";
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(cp.event_states("j1"), (std::vector<std::string>{"running", "lost"}));
  EXPECT_EQ(cp.events.back().second.reason, protocol::EventReason::lease_expired);
  EXPECT_EQ(cp.events.back().second.seq, 2);
}

TEST_F(DaemonTest, AnExpiredLeaseTheServerAlreadyReQueuedIsDroppedOn409) {
  cp.lease_ttl_s = 6;  // window 1 s
  settings.backoff_initial = 50ms;
  settings.backoff_max = 200ms;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1 && cp.event_states("j1").size() == 1; });
    cp.silent = true;
    cp.replies.emplace_back(CallError{CallFailure::transient, "poll: connection reset"});
    cp.changed.notify();
    co_await until([&] { return runner.kills.contains("j1"); });
    cp.fenced_leases.insert("L1");  // the server re-queued the job meanwhile: the job is reported once, by it
    cp.silent = false;
    co_await until([&] { return runner.released.contains("j1"); });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(cp.event_states("j1"), (std::vector<std::string>{"running"}));
}

TEST_F(DaemonTest, QuietPollsRenewLeasesShorterThanTheHold) {
  cp.lease_ttl_s = 6;  // window 1 s: the agent holds its polls at most 333 ms
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("j1")}});
    co_await until([&] { return runner.started == 1 && cp.polls.size() >= 8; });  // several windows long
    daemon->on_signal(Signal::term);
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_FALSE(runner.kills.contains("j1"));
  EXPECT_EQ(runner.stops["j1"], runners::StopReason::shutdown);
  EXPECT_LE(cp.holds.back(), 334ms);
}

TEST_F(DaemonTest, IdleExit) {
  settings.lifecycle.idle_exit = 20ms;
  auto reason = run([&]() -> asio::awaitable<void> { co_return; });
  EXPECT_EQ(reason, ExitReason::idle);
  ASSERT_EQ(cp.exits.size(), 1u);
  EXPECT_EQ(cp.exits[0].exit_reason, protocol::ExitReason::idle);
}

}  // namespace
