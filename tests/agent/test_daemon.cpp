// The daemon's policy, driven through an in-memory control plane and runner: registration, dispatch, ordered
// delivery, retries without loss, fencing, cancel, re-registration, directives and stops. No sockets, no
// child processes; each test runs under the run_coro hang guard.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <set>
#include <filesystem>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include "agent/daemon.hpp"
#include "common/notifier.hpp"
#include "agent/status_file.hpp"
#include "common/logging.hpp"
#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
using namespace nymph;
using namespace nymph::agent;
using namespace std::chrono_literals;

namespace {

// A control plane in memory. Polls are answered from `replies` or held until the test adds one.
class FakeControlPlane final : public ControlPlane {
 public:
  explicit FakeControlPlane(asio::any_io_executor ex) : changed(ex) {}

  std::vector<protocol::RegisterRequest> registrations;
  std::vector<protocol::PollRequest> polls;
  std::deque<CallResult<protocol::PollResponse>> replies;
  std::vector<std::pair<std::string, protocol::EventRequest>> events;
  std::map<std::string, std::string> logs;  // "job/stream" -> bytes
  std::vector<protocol::ExitRequest> exits;
  int fail_next_uploads = 0;                // transient failures before uploads succeed
  std::set<std::string> fenced_leases;
  bool unauthorized = false;
  std::vector<protocol::CancelOrder> cancel_at_registration;
  Notifier changed;                         // notified on every call

  void reply(protocol::PollResponse r) {
    replies.push_back(std::move(r));
    changed.notify();
  }

  asio::awaitable<CallResult<protocol::RegisterResponse>> register_worker(protocol::RegisterRequest r) override {
    registrations.push_back(r);
    changed.notify();
    if (unauthorized) co_return CallError{CallFailure::unauthorized, "HTTP 401"};
    protocol::RegisterResponse resp;
    resp.worker_id = "w1";
    resp.cancel = cancel_at_registration;
    co_return resp;
  }

  asio::awaitable<CallResult<protocol::PollResponse>> poll(std::string, protocol::PollRequest r,
                                                           std::chrono::milliseconds) override {
    polls.push_back(r);
    changed.notify();
    while (replies.empty()) co_await changed.wait();
    auto next = std::move(replies.front());
    replies.pop_front();
    co_return next;
  }

  asio::awaitable<CallResult<protocol::EventResponse>> send_event(std::string job, protocol::EventRequest e) override {
    changed.notify();
    if (auto f = upload_failure(e.lease_id)) co_return *f;
    events.emplace_back(job, e);
    co_return protocol::EventResponse{};
  }

  asio::awaitable<CallResult<std::uint64_t>> put_log(std::string job, std::string stream, std::uint64_t offset,
                                                     std::string lease, std::string bytes) override {
    changed.notify();
    if (auto f = upload_failure(lease)) co_return *f;
    auto& stored = logs[job + "/" + stream];
    EXPECT_LE(offset, stored.size());
    stored.resize(offset);
    stored += bytes;
    co_return stored.size();
  }

  asio::awaitable<CallResult<void>> report_exit(std::string, protocol::ExitRequest r) override {
    exits.push_back(r);
    changed.notify();
    co_return CallResult<void>{};
  }

  std::vector<std::string> event_states(const std::string& job) const {
    std::vector<std::string> out;
    for (const auto& [j, e] : events)
      if (j == job) out.emplace_back(protocol::to_string(e.state));
    return out;
  }

 private:
  std::optional<CallError> upload_failure(const std::string& lease) {
    if (unauthorized) return CallError{CallFailure::unauthorized, "HTTP 401"};
    if (fenced_leases.contains(lease)) return CallError{CallFailure::fenced, "HTTP 409 leaseLost"};
    if (fail_next_uploads > 0) {
      --fail_next_uploads;
      return CallError{CallFailure::transient, "connection refused"};
    }
    return std::nullopt;
  }
};

// A runner whose jobs print what the test says and finish when the test says (or when stopped).
class FakeRunner final : public runners::Runner {
 public:
  explicit FakeRunner(asio::any_io_executor ex, std::string name = "process") : changed(ex), name_(std::move(name)) {}

  std::map<std::string, runners::StopReason> stops;
  std::set<std::string> released;
  std::set<std::string> finish;  // job ids allowed to finish (exit 0)
  std::string output = "hello\n";
  int started = 0;
  Notifier changed;

  std::string_view name() const override { return name_; }

  asio::awaitable<runners::JobUpdate> run(runners::JobSpec spec, runners::JobReporter& reporter) override {
    ++started;
    reporter.update({.state = runners::JobState::running});
    co_await reporter.output(runners::Stream::out, 0, output);
    changed.notify();
    for (;;) {
      if (auto s = stops.find(spec.job_id); s != stops.end())
        co_return runners::JobUpdate{.state = runners::JobState::cancelled, .signal = 15, .message = "stopped"};
      if (finish.contains(spec.job_id)) co_return runners::JobUpdate{.state = runners::JobState::succeeded, .exit_code = 0};
      co_await changed.wait();
    }
  }
  void stop(const std::string& job_id, runners::StopReason why) override {
    stops[job_id] = why;
    changed.notify();
  }
  void release(const std::string& job_id) override {
    released.insert(job_id);
    changed.notify();
  }

 private:
  std::string name_;
};

protocol::JobAssignment job(const std::string& id, const std::string& lease = "L1", const std::string& runner = "process") {
  protocol::JobAssignment j;
  j.job_id = id;
  j.lease_id = lease;
  j.runner = runner;
  j.spec.argv = std::vector<std::string>{"true"};
  return j;
}

class DaemonTest : public ::testing::Test {
 protected:
  asio::io_context ioc;
  FakeControlPlane cp{ioc.get_executor()};
  FakeRunner runner{ioc.get_executor()};
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("nymph-daemon-" + std::to_string(::getpid()));
  DaemonSettings settings;
  std::unique_ptr<Daemon> daemon;

  void SetUp() override {
    std::filesystem::create_directories(dir);
    settings.launch_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    settings.label = "test";
    settings.capacity = {{"process", 2}};
    settings.backoff_initial = 1ms;
    settings.backoff_max = 5ms;
    settings.lifecycle.drain_grace = 60s;
    settings.status_file = dir / "status.json";
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::vector<AdoptedAttempt> adopted;

  Daemon& make() {
    daemon = std::make_unique<Daemon>(ioc.get_executor(), settings, cp,
                                      std::map<std::string, runners::Runner*>{{"process", &runner}}, null_logger(),
                                      std::move(adopted));
    return *daemon;
  }

  // Runs the daemon and `script` side by side; returns the daemon's exit reason.
  ExitReason run(std::function<asio::awaitable<void>()> script) {
    auto& d = make();
    asio::co_spawn(ioc, script(), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    return test::run_coro(ioc, d.run(), 20s);
  }

  // Waits until `pred` holds, re-checking whenever the fake control plane or runner is used.
  asio::awaitable<void> until(std::function<bool()> pred) {
    while (!pred()) {
      using namespace asio::experimental::awaitable_operators;
      co_await (cp.changed.wait() || runner.changed.wait());
    }
  }
};

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
    cp.replies.push_back(CallError{CallFailure::worker_unknown, "HTTP 404 unknownWorker"});
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
  EXPECT_EQ(cp.event_states("j1").back(), "cancelled");
}

TEST_F(DaemonTest, IdleExit) {
  settings.lifecycle.idle_exit = 20ms;
  auto reason = run([&]() -> asio::awaitable<void> { co_return; });
  EXPECT_EQ(reason, ExitReason::idle);
  ASSERT_EQ(cp.exits.size(), 1u);
  EXPECT_EQ(cp.exits[0].exit_reason, protocol::ExitReason::idle);
}

TEST_F(DaemonTest, AdoptedAttemptsAreListedThenResumedOrAbandoned) {
  int resumed = 0, abandoned = 0;
  auto resume = [&](runners::JobReporter& reporter) -> asio::awaitable<runners::JobUpdate> {
    ++resumed;
    co_await reporter.output(runners::Stream::out, 0, "from slurm\n");
    co_return runners::JobUpdate{.state = runners::JobState::succeeded, .exit_code = 0, .slurm_job_id = "77"};
  };
  auto abandon = [&]() -> asio::awaitable<void> {
    ++abandoned;
    co_return;
  };
  adopted.push_back({.job_id = "keep", .lease_id = "Lk", .attempt = 1, .runner = "process", .resume = resume, .abandon = abandon});
  adopted.push_back({.job_id = "drop", .lease_id = "Ld", .attempt = 1, .runner = "process", .resume = resume, .abandon = abandon});
  cp.cancel_at_registration = {{"drop", "Ld", protocol::CancelReason::lease_lost}};
  run([&]() -> asio::awaitable<void> {
    co_await until([&] { return cp.event_states("keep").size() == 1 && !cp.polls.empty(); });
    daemon->on_signal(Signal::term);
  });
  ASSERT_EQ(cp.registrations.size(), 1u);
  ASSERT_EQ(cp.registrations[0].running.size(), 2u);
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(abandoned, 1);
  EXPECT_EQ(cp.event_states("keep"), (std::vector<std::string>{"succeeded"}));
  EXPECT_EQ(cp.logs["keep/stdout"], "from slurm\n");
  EXPECT_TRUE(cp.event_states("drop").empty());
}

}  // namespace
