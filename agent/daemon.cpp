#include "agent/daemon.hpp"

#include <unistd.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agent/attempt.hpp"
#include "agent/backoff.hpp"
#include "agent/delivery.hpp"
#include "agent/job_mapping.hpp"
#include "agent/status_file.hpp"
#include "common/coroutine_warning.hpp"
#include "common/spawn.hpp"
#include "nymph/version.hpp"

namespace nymph::agent {

namespace asio = boost::asio;
using runners::JobState;
using runners::JobUpdate;

namespace {

// A job's ids go into request paths and queries (/v1/jobs/{id}/events, ?lease=): both must be protocol ids.
Result<void> check_assignment_ids(const protocol::JobAssignment& job) {
  if (auto ok = protocol::check_id("jobId", job.job_id); !ok) return ok;
  return protocol::check_id("leaseId", job.lease_id);
}

}  // namespace

struct Daemon::Impl {
  Impl(asio::any_io_executor ex, DaemonSettings s, ControlPlane& cp, std::map<std::string, runners::Runner*> r,
       std::shared_ptr<spdlog::logger> log)
      : ex(ex),
        settings(std::move(s)),
        cp(cp),
        runners(std::move(r)),
        log(std::move(log)),
        lifecycle(settings.lifecycle, Clock::now()),
        backoff({settings.backoff_initial, settings.backoff_max}),
        state_changed(ex),
        background_done(ex) {
    for (const auto& [name, runner] : runners)
      if (auto* resumable = runner->resumable())
        for (auto& left : resumable->in_flight()) adopt(name, runner, std::move(left));
  }

  // Takes in hand an attempt a previous run left running; registration lists it, and the control plane's
  // answer decides whether it is resumed or abandoned.
  void adopt(const std::string& runner_name, runners::Runner* runner, runners::InFlightAttempt left) {
    const std::string id = left.job_id;
    auto a = std::make_unique<Attempt>(ex, settings);
    a->job_id = id;
    a->lease_id = left.lease_id;
    a->number = left.attempt;
    a->runner_name = runner_name;
    a->runner = runner;
    a->left_running = std::move(left);
    a->adopted_pending = true;
    attempts.emplace(id, std::move(a));
  }

  asio::any_io_executor ex;
  DaemonSettings settings;
  ControlPlane& cp;
  std::map<std::string, runners::Runner*> runners;
  std::shared_ptr<spdlog::logger> log;
  Lifecycle lifecycle;
  Backoff backoff;  // registration and polling
  Notifier state_changed;
  Notifier background_done;
  asio::cancellation_signal poll_cancel;
  std::map<std::string, std::unique_ptr<Attempt>> attempts;  // by job id
  std::string worker_id;
  std::chrono::milliseconds poll_hold{30'000};
  int background = 0;
  bool exiting = false;
  std::string status_synced;  // state/exitReason last written to status.json with fsync
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();

  // ---- bookkeeping ---------------------------------------------------------------------------------------

  // Attempts inside their runner's run() (or resume()) that satisfy `pred`.
  template <class Pred>
  int active_runs_where(Pred pred) const {
    int n = 0;
    for (const auto& [id, a] : attempts)
      if (a->run_active && pred(*a)) ++n;
    return n;
  }
  int active_runs() const {
    return active_runs_where([](const Attempt&) { return true; });
  }
  // Counts against a runner's advertised capacity, which is keyed by its name.
  int active_runs_on(const std::string& runner_name) const {
    return active_runs_where([&](const Attempt& a) { return a.runner_name == runner_name; });
  }

  void write_status() {
    if (settings.status_file.empty()) return;
    DaemonStatus st{.pid = static_cast<int>(::getpid()),
                    .launch_id = settings.launch_id,
                    .label = settings.label,
                    .worker_id = worker_id,
                    .state = std::string(to_string(lifecycle.phase())),
                    .message = lifecycle.message(),
                    .started_at = started_at,
                    .updated_at = std::chrono::system_clock::now(),
                    .running_jobs = active_runs()};
    if (lifecycle.phase() == Phase::exited && lifecycle.exit_reason())
      st.exit_reason = std::string(to_string(*lifecycle.exit_reason()));
    // Only a change of state or exit reason is fsync'ed: the running-jobs count changes with every job.
    std::string key = st.state + "/" + st.exit_reason.value_or("");
    auto durability = key == status_synced ? StatusDurability::unsynced : StatusDurability::synced;
    if (auto ok = write_status_file(settings.status_file, st, durability); !ok)
      log->warn("cannot write status file: {}", ok.error().message);
    else if (durability == StatusDurability::synced)
      status_synced = std::move(key);
  }

  // Spawns a background coroutine; run() waits for all of them before returning.
  void spawn(asio::awaitable<void> work, std::string what) {
    ++background;
    asio::co_spawn(ex, std::move(work), [this, report = log_failure(log, std::move(what))](std::exception_ptr e) {
      report(e);
      --background;
      background_done.notify();
    });
  }

  void apply(LifecycleActions actions) {
    if (actions.stop_agent_bound_jobs) stop_attempts_that_stop_with_the_agent();
    if (actions.exit_now && !exiting) {
      exiting = true;
      log->info("exiting: {} ({})", to_string(*lifecycle.exit_reason()), lifecycle.message());
    }
    // Any change of phase re-issues the held poll, so the server learns at once that we drain.
    poll_cancel.emit(asio::cancellation_type::terminal);
    state_changed.notify();
    write_status();
  }

  // Stops (StopReason::shutdown) every running attempt whose runner's jobs end with the agent.
  void stop_attempts_that_stop_with_the_agent() {
    for (auto& [id, a] : attempts)
      if (a->run_active && a->stops_with_agent()) a->runner->stop(id, runners::StopReason::shutdown);
  }

  void fatal(const std::string& message) {
    log->error("{}", message);
    apply(lifecycle.on_fatal(message));
  }

  // ---- registration --------------------------------------------------------------------------------------

  protocol::RegisterRequest make_register_request() const {
    protocol::RegisterRequest r;
    r.launch_id = settings.launch_id;
    r.label = settings.label;
    r.hostname = settings.hostname;
    r.pid = ::getpid();
    r.version = kVersion;
    r.backend = settings.backend;
    for (const auto& [name, runner] : runners) r.runners.push_back(name);
    r.tags = settings.tags;
    r.capacity = settings.capacity;
    r.profiles = settings.profiles;
    r.slurm = settings.allocation;
    if (!settings.identity.empty()) r.identity = settings.identity;
    for (const auto& [id, a] : attempts)
      if (!a->stopped()) r.running.push_back({a->job_id, a->lease_id});
    return r;
  }

  void handle_cancel_orders(const std::vector<protocol::CancelOrder>& orders) {
    for (const auto& c : orders) {
      auto it = attempts.find(c.job_id);
      if (it == attempts.end() || it->second->lease_id != c.lease_id) continue;
      auto& a = *it->second;
      log->info("job {}: stopping attempt {} ({})", a.job_id, a.number, protocol::to_string(c.reason));
      if (a.adopted_pending) {
        a.adopted_pending = false;
        a.run_active = true;  // until abandon() has finished
        spawn(abandon_attempt(&a), "abandoning job " + a.job_id);
        continue;
      }
      if (c.reason == protocol::CancelReason::lease_lost) a.fenced = true;
      if (a.run_active) a.runner->stop(a.job_id, to_stop_reason(c.reason));
      a.wake_all();
    }
  }

  // Registers (or re-registers), retrying transient failures with backoff. False when the daemon must exit.
  asio::awaitable<bool> register_worker() {
    while (!exiting) {
      auto r = co_await cp.register_worker(make_register_request());
      if (r) {
        // The worker id goes into every later request path; the same bad id would come back on a retry.
        if (auto ok = protocol::check_id("workerId", r->worker_id); !ok) {
          fatal("registration refused: the control plane's reply is unusable: " + ok.error().message);
          co_return false;
        }
        backoff.reset();
        worker_id = r->worker_id;
        poll_hold = std::min(settings.poll_timeout,
                             std::chrono::milliseconds(static_cast<long long>(r->poll_timeout_s * 1000)));
        log->info("registered as worker {} (label {}, launch {})", worker_id, settings.label, settings.launch_id);
        handle_cancel_orders(r->cancel);
        resume_adopted(r->last_seq);
        lifecycle.registered(Clock::now());
        write_status();
        co_return true;
      }
      if (r.error().kind == CallFailure::unauthorized || r.error().kind == CallFailure::rejected) {
        fatal("registration refused: " + r.error().message);
        co_return false;
      }
      auto delay = backoff.next_delay();
      log->warn("{}; retrying in {} ms", r.error().message, delay.count());
      co_await state_changed.wait(Clock::now() + delay);
    }
    co_return false;
  }

  // Re-attaches to the attempts a previous run left running that the control plane still wants.
  // `last_seq`: the highest seq the control plane applied of each lease; the resumed attempt's events follow it.
  void resume_adopted(const std::map<std::string, std::int64_t>& last_seq) {
    std::vector<Attempt*> pending;
    for (auto& [id, a] : attempts)
      if (a->adopted_pending) pending.push_back(a.get());
    for (Attempt* a : pending) {
      a->adopted_pending = false;
      if (auto it = last_seq.find(a->lease_id); it != last_seq.end()) a->outbox.continue_after(it->second);
      a->shipper_active = true;
      a->run_active = true;
      log->info("job {}: resuming attempt {} left running by a previous run", a->job_id, a->number);
      std::string id = a->job_id;
      spawn(ship(a), "delivery for job " + id);
      spawn(run_attempt(a), "job " + id);
    }
  }

  asio::awaitable<void> abandon_attempt(Attempt* a) {
    auto r = co_await a->runner->resumable()->abandon(*a->left_running);
    if (!r) log->warn("job {}: could not give up attempt {}: {}", a->job_id, a->number, r.error().message);
    a->run_active = false;
    a->detached = true;  // nothing to report: the control plane already gave the attempt up
    finish_if_done(a);
  }

  // ---- polling -------------------------------------------------------------------------------------------

  protocol::PollRequest make_poll_request() const {
    protocol::PollRequest p;
    bool accepting = lifecycle.accepting_jobs();
    for (const auto& [name, cap] : settings.capacity) p.free[name] = accepting ? std::max(0, cap - active_runs_on(name)) : 0;
    for (const auto& [id, a] : attempts)
      if (!a->stopped()) p.running.push_back({a->job_id, a->lease_id});
    p.draining = !accepting;
    return p;
  }

  // One poll that apply() can cancel to re-issue it. nullopt when cancelled.
  asio::awaitable<std::optional<CallResult<protocol::PollResponse>>> cancellable_poll() {
    try {
      co_return co_await asio::co_spawn(ex, cp.poll(worker_id, make_poll_request(), poll_hold),
                                        asio::bind_cancellation_slot(poll_cancel.slot(), asio::use_awaitable));
    } catch (const boost::system::system_error& e) {
      if (e.code() == asio::error::operation_aborted) co_return std::nullopt;
      throw;
    }
  }

  asio::awaitable<void> poll_loop() {
    while (!exiting) {
      auto r = co_await cancellable_poll();
      if (exiting) break;
      if (!r) continue;  // re-issued after a change of phase
      if (!*r) {
        const auto& err = r->error();
        if (err.kind == CallFailure::unauthorized) {
          fatal("control plane refused the token: " + err.message);
          break;
        }
        if (err.kind == CallFailure::worker_unknown) {
          log->warn("control plane does not know worker {}; registering again", worker_id);
          bool registered = co_await register_worker();
          if (!registered) break;
          continue;
        }
        auto delay = backoff.next_delay();
        log->warn("{}; retrying in {} ms", err.message, delay.count());
        co_await state_changed.wait(Clock::now() + delay);
        continue;
      }
      backoff.reset();
      handle_poll_reply(std::move(**r));
    }
  }

  void handle_poll_reply(protocol::PollResponse reply) {
    handle_cancel_orders(reply.cancel);
    for (auto& job : reply.jobs) {
      // Nothing can be reported for such a job (its id cannot go into a path): it is dropped, and the
      // control plane gives the lease up once it expires.
      if (auto ok = check_assignment_ids(job); !ok) {
        log->error("dropped a job from the control plane's poll reply: {}", ok.error().message);
        continue;
      }
      start_attempt(std::move(job));
    }
    if (reply.directive) {
      log->info("control plane directive: {}", protocol::to_string(*reply.directive));
      apply(lifecycle.on_directive(to_directive(*reply.directive), Clock::now()));
    }
  }

  // ---- attempts ------------------------------------------------------------------------------------------

  void start_attempt(protocol::JobAssignment job) {
    if (auto it = attempts.find(job.job_id); it != attempts.end()) {
      if (it->second->lease_id != job.lease_id) log->warn("job {}: new attempt while attempt {} is in hand", job.job_id, it->second->number);
      return;  // a duplicate delivery
    }
    if (!lifecycle.accepting_jobs()) {
      log->info("job {}: not started, the agent is stopping (the control plane re-queues it)", job.job_id);
      return;
    }
    auto a = std::make_unique<Attempt>(ex, settings);
    a->job_id = job.job_id;
    a->lease_id = job.lease_id;
    a->number = job.attempt;
    a->runner_name = job.runner;
    a->spec = to_runner_spec(job);
    auto runner = runner_for(*a);
    if (runner) a->runner = *runner;
    log->info("job {}: attempt {} on runner {}", a->job_id, a->number, a->runner_name);
    Attempt* raw = a.get();
    attempts.emplace(job.job_id, std::move(a));
    // Both flags are set before either coroutine starts: co_spawn may run one inline up to its first
    // suspension, and the attempt is removed as soon as neither is active. `raw` is not used afterwards.
    raw->shipper_active = true;
    if (!runner)
      raw->outbox.push_event(JobUpdate{.state = JobState::failed, .message = runner.error().message},
                             std::chrono::system_clock::now(), Clock::now());
    else
      raw->run_active = true;
    std::string id = raw->job_id;
    spawn(ship(raw), "delivery for job " + id);
    if (runner) spawn(run_attempt(raw), "job " + id);
    state_changed.notify();
  }

  // The runner that runs `a`, or why `a` cannot start on this worker: its runner is not here, or its job
  // stops with the agent and its timeout does not fit before the allocation ends.
  Result<runners::Runner*> runner_for(const Attempt& a) const {
    auto it = runners.find(a.runner_name);
    if (it == runners.end()) return fail("runner '" + a.runner_name + "' is not available on this worker");
    std::optional<std::chrono::milliseconds> timeout;
    if (a.spec.timeout) timeout = *a.spec.timeout;
    const bool stops_with_agent = it->second->lifetime() == runners::Lifetime::stops_with_agent;
    if (stops_with_agent && !lifecycle.fits_before_walltime(timeout, Clock::now()))
      return fail("the job's timeout does not fit before this worker's allocation ends");
    return it->second;
  }

  asio::awaitable<void> run_attempt(Attempt* a) {
    JobUpdate final_update;
    try {
      if (a->left_running)
        final_update = co_await a->runner->resumable()->resume(*a->left_running, a->reporter);
      else
        final_update = co_await a->runner->run(a->spec, a->reporter);
    } catch (const std::exception& e) {
      final_update = JobUpdate{.state = JobState::failed, .message = std::string("runner error: ") + e.what()};
    }
    a->run_active = false;
    if (!a->stopped()) {
      if (!runners::is_final(final_update.state)) {
        final_update.state = JobState::failed;
        final_update.message = "runner returned without a final state";
      }
      log->info("job {}: {}{}", a->job_id, to_string(final_update.state),
                final_update.message.empty() ? "" : " (" + final_update.message + ")");
      a->outbox.push_event(std::move(final_update), std::chrono::system_clock::now(), Clock::now());
    }
    a->wake.notify();
    state_changed.notify();
    finish_if_done(a);
  }

  // Removes an attempt once neither its run nor its delivery is active. `a` is invalid afterwards.
  void finish_if_done(Attempt* a) {
    if (a->run_active || a->shipper_active) return;
    if (a->runner && !a->detached) a->runner->release(a->job_id);
    std::string id = a->job_id;
    attempts.erase(id);
    state_changed.notify();
    write_status();
  }

  // Delivers one attempt's events and logs (see deliver()), then lets the attempt go when its run is over.
  asio::awaitable<void> ship(Attempt* a) {
    DeliveryContext context{cp, {settings.backoff_initial, settings.backoff_max}, state_changed, *log};
    auto refused = co_await deliver(*a, context);
    if (refused) {
      fatal("control plane refused the token: " + *refused);
      a->abandoned = true;
    }
    a->shipper_active = false;
    a->drained.notify();
    finish_if_done(a);
  }

  // ---- lifecycle driver ----------------------------------------------------------------------------------

  asio::awaitable<void> tick_loop() {
    while (!exiting) {
      apply_tick();
      if (exiting) break;
      co_await state_changed.wait(lifecycle.next_deadline());
    }
  }

  void apply_tick() {
    auto actions = lifecycle.on_tick(active_runs_where([](const Attempt& a) { return a.stops_with_agent(); }),
                                     active_runs(), Clock::now());
    if (actions.stop_agent_bound_jobs || actions.exit_now) apply(actions);
  }

  // Leaves running every running attempt whose runner's jobs survive the agent: a manager stop never cancels
  // them (sbatch jobs), nothing more is reported, and a restarted agent resumes them.
  void detach_attempts_that_survive_the_agent() {
    for (auto& [id, a] : attempts) {
      if (a->run_active && a->survives_agent()) {
        a->detached = true;
        a->runner->stop(id, runners::StopReason::shutdown);
        a->wake_all();
      }
    }
  }

  // Stops what must stop, delivers what can be delivered within the exit budget, and reports the exit.
  asio::awaitable<void> shut_down() {
    poll_cancel.emit(asio::cancellation_type::terminal);
    std::erase_if(attempts, [](const auto& entry) { return entry.second->adopted_pending; });  // never started
    detach_attempts_that_survive_the_agent();
    auto deadline = Clock::now() + settings.exit_delivery_timeout;
    while (!attempts.empty() && Clock::now() < deadline) co_await state_changed.wait(deadline);
    for (auto& [id, a] : attempts) {
      a->abandoned = true;
      if (a->run_active && a->stops_with_agent()) a->runner->stop(id, runners::StopReason::shutdown);
      a->wake_all();
    }
    if (!worker_id.empty() && lifecycle.exit_reason() && *lifecycle.exit_reason() != ExitReason::error)
      co_await report_exit(deadline);
    else if (!worker_id.empty() && lifecycle.exit_reason())
      co_await report_exit(Clock::now() + std::chrono::seconds(5));
    write_status();
  }

  NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
  asio::awaitable<void> report_exit(Clock::time_point deadline) {
    protocol::ExitRequest x;
    x.exit_reason = to_wire_exit_reason(*lifecycle.exit_reason());
    x.message = lifecycle.message();
    Backoff retry({settings.backoff_initial, std::chrono::milliseconds(5000)});
    while (true) {
      auto r = co_await cp.report_exit(worker_id, x);
      if (r) co_return;
      if (r.error().kind != CallFailure::transient || Clock::now() >= deadline) {
        log->warn("could not report the exit: {}", r.error().message);
        co_return;
      }
      co_await state_changed.wait(std::min(deadline, Clock::now() + retry.next_delay()));
    }
  }
  NYMPH_GCC_PR109224_END

  asio::awaitable<ExitReason> run() {
    write_status();
    bool registered = co_await register_worker();
    if (registered) {
      spawn(poll_loop(), "poll loop");
      spawn(tick_loop(), "lifecycle timer");
      while (!exiting) co_await state_changed.wait();
    }
    co_await shut_down();
    while (background > 0) co_await background_done.wait();
    co_return lifecycle.exit_reason().value_or(ExitReason::error);
  }
};

Daemon::Daemon(asio::any_io_executor ex, DaemonSettings settings, ControlPlane& control_plane,
               std::map<std::string, runners::Runner*> runners, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(ex, std::move(settings), control_plane, std::move(runners), std::move(log))) {}

Daemon::~Daemon() = default;

asio::awaitable<ExitReason> Daemon::run() { return impl_->run(); }

void Daemon::on_signal(Signal s) {
  impl_->log->info("received {}", s == Signal::term ? "SIGTERM" : s == Signal::interrupt ? "SIGINT" : "SIGUSR1");
  impl_->apply(impl_->lifecycle.on_signal(s, Clock::now()));
}

std::string Daemon::exit_message() const { return impl_->lifecycle.message(); }

}  // namespace nymph::agent
