#pragma once
// The daemon under test with an in-memory control plane and runner: no sockets, no child processes; each
// test runs the daemon beside a script under the run_coro hang guard.
#include <gtest/gtest.h>

#include <any>
#include <deque>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include "agent/daemon.hpp"
#include "common/notifier.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::agent::daemon_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A control plane in memory. Polls are answered from `replies` or held until the test adds one.
class FakeControlPlane final : public ControlPlane {
 public:

  std::vector<protocol::RegisterRequest> registrations;
  std::vector<protocol::PollRequest> polls;
  std::deque<CallResult<protocol::PollResponse>> replies;
  std::vector<std::pair<std::string, protocol::EventRequest>> events;
  std::map<std::string, std::string> logs;  // "job/stream" -> bytes
  std::vector<protocol::ExitRequest> exits;
  int fail_next_uploads = 0;                // transient failures before uploads succeed
  std::size_t log_cap = SIZE_MAX;           // bytes per stream; an upload past it is refused (413 logCapReached)
  int log_refusals = 0;
  std::set<std::string> fenced_leases;
  std::set<std::string> unavailable_leases;  // uploads of these leases always get 503
  // "exit", "event <job> <state>", "log <job> <stream>" in the order they were accepted
  std::vector<std::string> calls;
  bool unauthorized = false;
  std::string worker_id = "w1";             // what registration answers
  std::vector<protocol::CancelOrder> cancel_at_registration;
  double lease_ttl_s = 90;                  // what registration answers
  bool silent = false;                      // an outage: every call fails at once (connection refused)
  std::vector<std::chrono::milliseconds> holds;  // the hold of each poll
  // The reply to a job's event that offers its slot (takeNext), by job id, used once; without one the reply
  // hands no job and says slotHeld when a poll is held (as nymph-control with nothing queued).
  std::map<std::string, protocol::EventResponse> take_next_replies;
  std::set<std::string> held_events;        // jobs whose events wait until the test erases them
  int polls_held = 0;                       // polls waiting for a reply now
  int events_held = 0;                      // events waiting in held_events now
  Notifier changed;                         // notified on every call

  void reply(protocol::PollResponse r) {
    replies.emplace_back(std::move(r));
    changed.notify();
  }

  asio::awaitable<CallResult<protocol::RegisterResponse>> register_worker(protocol::RegisterRequest r) override {
    registrations.push_back(r);
    changed.notify();
    if (silent) co_return CallError{CallFailure::transient, "register: connection refused"};
    if (unauthorized) co_return CallError{CallFailure::unauthorized, "HTTP 401"};
    protocol::RegisterResponse resp;
    resp.worker_id = worker_id;
    resp.cancel = cancel_at_registration;
    resp.lease_ttl_s = lease_ttl_s;
    co_return resp;
  }

  asio::awaitable<CallResult<protocol::PollResponse>> poll(std::string, std::string request,
                                                           std::chrono::milliseconds hold) override {
    auto r = protocol::parse_as<protocol::PollRequest>(request);
    if (!r) throw std::logic_error("the agent sent a poll that does not parse: " + r.error().message);
    polls.push_back(std::move(*r));
    holds.push_back(hold);
    changed.notify();
    if (silent) co_return CallError{CallFailure::transient, "poll: connection refused"};
    // Held like the server holds it: a reply the test queues, or an empty one when the hold is over or a newer
    // poll supersedes this one.
    const auto mine = polls.size();
    const auto until = std::chrono::steady_clock::now() + hold;
    ++polls_held;
    while (replies.empty() && std::chrono::steady_clock::now() < until && polls.size() == mine)
      co_await changed.wait(until);
    --polls_held;
    if (replies.empty() || polls.size() != mine) co_return protocol::PollResponse{};
    auto next = std::move(replies.front());
    replies.pop_front();
    co_return next;
  }

  asio::awaitable<CallResult<protocol::EventResponse>> send_event(std::string job, protocol::EventRequest e) override {
    changed.notify();
    if (auto f = upload_failure(e.lease_id)) co_return *f;
    if (held_events.contains(job)) {
      ++events_held;
      changed.notify();
      while (held_events.contains(job)) co_await changed.wait();
      --events_held;
    }
    calls.push_back("event " + job + " " + std::string(protocol::to_string(e.state)));
    events.emplace_back(job, e);
    changed.notify();
    if (!e.take_next) co_return protocol::EventResponse{};
    if (auto it = take_next_replies.find(job); it != take_next_replies.end()) {
      auto r = std::move(it->second);
      take_next_replies.erase(it);
      co_return r;
    }
    protocol::EventResponse r;
    r.slot_held = polls_held > 0;
    co_return r;
  }

  asio::awaitable<CallResult<std::uint64_t>> put_log(std::string job, protocol::LogStream stream, std::uint64_t offset,
                                                     std::string lease, std::string bytes) override {
    changed.notify();
    if (auto f = upload_failure(lease)) co_return *f;
    auto& stored = logs[job + "/" + std::string(protocol::to_string(stream))];
    EXPECT_LE(offset, stored.size());
    if (offset + bytes.size() > log_cap) {
      ++log_refusals;
      co_return CallError{CallFailure::closed, "log upload: HTTP 413: past the cap"};
    }
    stored.resize(offset);
    stored += bytes;
    calls.push_back("log " + job + " " + std::string(protocol::to_string(stream)));
    co_return stored.size();
  }

  asio::awaitable<CallResult<void>> report_exit(std::string, protocol::ExitRequest r) override {
    if (silent) co_return CallError{CallFailure::transient, "exit report: connection refused"};
    exits.push_back(r);
    calls.emplace_back("exit");
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
    if (silent) return CallError{CallFailure::transient, "connection refused"};
    if (fenced_leases.contains(lease)) return CallError{CallFailure::fenced, "HTTP 409 leaseLost"};
    if (unavailable_leases.contains(lease)) return CallError{CallFailure::transient, "event: HTTP 503: unavailable"};
    if (fail_next_uploads > 0) {
      --fail_next_uploads;
      return CallError{CallFailure::transient, "connection refused"};
    }
    return std::nullopt;
  }
};

// A runner whose jobs print what the test says and finish when the test says (or when stopped). Its name
// and lifetime are the test's choice; with `resumable_part` it also lists `left_running` as in flight and
// records the opaque runner_data (a string) of each attempt it resumes or abandons.
class FakeRunner final : public runners::Runner, public runners::ResumableRunner {
 public:
  explicit FakeRunner(std::string name = "process",
                      runners::Lifetime lifetime = runners::Lifetime::stops_with_agent)
      : name_(std::move(name)), lifetime_(lifetime) {}

  std::map<std::string, runners::StopReason> stops;
  std::map<std::string, runners::StopReason> kills;
  std::set<std::string> ignore_stop;  // jobs that ignore stop() (SIGTERM); kill() still ends them
  std::set<std::string> released;
  std::set<std::string> finish;  // job ids allowed to finish (exit 0)
  std::string output = "hello\n";
  int started = 0;
  Notifier changed;
  bool resumable_part = false;
  std::vector<runners::InFlightAttempt> left_running;
  std::vector<std::string> resumed, abandoned;  // runner_data of the records handed back

  std::string_view name() const override { return name_; }
  runners::Lifetime lifetime() const override { return lifetime_; }
  runners::ResumableRunner* resumable() override { return resumable_part ? this : nullptr; }

  asio::awaitable<runners::JobUpdate> run(runners::JobSpec spec, runners::JobReporter& reporter) override {
    ++started;
    reporter.update({.state = runners::JobState::running});
    co_await reporter.output(runners::Stream::out, 0, output);
    changed.notify();
    for (;;) {
      if (kills.contains(spec.job_id))
        co_return runners::JobUpdate{.state = runners::JobState::cancelled, .signal = 9, .message = "killed"};
      if (auto s = stops.find(spec.job_id); s != stops.end() && !ignore_stop.contains(spec.job_id))
        co_return runners::JobUpdate{.state = runners::JobState::cancelled, .signal = 15, .message = "stopped"};
      if (finish.contains(spec.job_id)) co_return runners::JobUpdate{.state = runners::JobState::succeeded, .exit_code = 0};
      co_await changed.wait();
    }
  }
  void stop(const std::string& job_id, runners::StopReason why) override {
    stops[job_id] = why;
    changed.notify();
  }
  void kill(const std::string& job_id, runners::StopReason why) override {
    stops.emplace(job_id, why);
    kills[job_id] = why;
    changed.notify();
  }
  void release(const std::string& job_id) override {
    released.insert(job_id);
    changed.notify();
  }

  std::vector<runners::InFlightAttempt> in_flight() const override { return left_running; }
  asio::awaitable<runners::JobUpdate> resume(runners::InFlightAttempt attempt, runners::JobReporter& reporter) override {
    resumed.push_back(std::any_cast<std::string>(attempt.runner_data));
    co_await reporter.output(runners::Stream::out, 0, "from slurm\n");
    co_return runners::JobUpdate{.state = runners::JobState::succeeded, .exit_code = 0, .slurm_job_id = "77"};
  }
  asio::awaitable<Result<void>> abandon(runners::InFlightAttempt attempt) override {
    abandoned.push_back(std::any_cast<std::string>(attempt.runner_data));
    changed.notify();
    co_return Result<void>{};
  }

 private:
  std::string name_;
  runners::Lifetime lifetime_;
};

inline protocol::JobAssignment job(const std::string& id, const std::string& lease = "L1", const std::string& runner = "process") {
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
  FakeControlPlane cp;
  FakeRunner runner;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("nymph-daemon-" + std::to_string(::getpid()));
  DaemonSettings settings;
  std::unique_ptr<Daemon> daemon;
  std::ostringstream log_text;  // what the daemon logged, one line per message

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
  void TearDown() override { if (HasFailure()) std::cerr << log_text.str(); std::filesystem::remove_all(dir); }

  std::map<std::string, runners::Runner*> runner_map{{"process", &runner}};  // what the daemon gets

  Daemon& make() {
    auto log = std::make_shared<spdlog::logger>("daemon", std::make_shared<spdlog::sinks::ostream_sink_st>(log_text));
    daemon = std::make_unique<Daemon>(ioc.get_executor(), settings, cp, runner_map, log);
    return *daemon;
  }

  // Runs the daemon and `script` side by side; returns the daemon's exit reason.
  ExitReason run(std::function<asio::awaitable<void>()> script) {
    auto& d = make();
    asio::co_spawn(ioc, script(), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    return nymph::test::run_coro(ioc, d.run(), 20s);
  }

  // Waits until `pred` holds, re-checking whenever the fake control plane or `r` (the default runner) is used.
  asio::awaitable<void> until(std::function<bool()> pred, FakeRunner* r = nullptr) {
    if (!r) r = &runner;
    while (!pred()) {
      using namespace asio::experimental::awaitable_operators;
      co_await (cp.changed.wait() || r->changed.wait());
    }
  }
};

}  // namespace nymph::agent::daemon_test
