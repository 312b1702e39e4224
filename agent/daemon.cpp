#include "agent/daemon.hpp"

#include <unistd.h>

#include <deque>
#include <map>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agent/attempt.hpp"
#include "agent/backoff.hpp"
#include "agent/deadline.hpp"
#include "agent/delivery.hpp"
#include "agent/job_mapping.hpp"
#include "agent/lease_clock.hpp"
#include "agent/slot_offer.hpp"
#include "agent/status_file.hpp"
#include "agent/status_pacer.hpp"
#include "protocol/poll_text.hpp"
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

struct Daemon::Impl final : ShipperStarter {
  Impl(asio::any_io_executor ex, DaemonSettings s, ControlPlane& cp, std::map<std::string, runners::Runner*> r,
       std::shared_ptr<spdlog::logger> log)
      : ex(ex),
        settings(std::move(s)),
        cp(cp),
        runners(std::move(r)),
        log(std::move(log)),
        lifecycle(settings.lifecycle, Clock::now()),
        backoff({settings.backoff_initial, settings.backoff_max}),
        upload_slots(settings.max_concurrent_uploads),
        status_timer(ex) {
    for (const auto& [name, runner] : runners)
      if (auto* resumable = runner->resumable())
        for (auto& left : resumable->in_flight()) adopt(name, runner, std::move(left));
    // A runner's trouble (a slurmctld being backed off from) shows in status.json as soon as it changes. The
    // callback does nothing once this daemon is gone (a runner may outlive it).
    for (const auto& [name, runner] : runners)
      runner->on_trouble_change([this, alive = std::weak_ptr<int>(alive)] {
        if (alive.lock()) write_status();
      });
  }

  // Takes in hand an attempt a previous run left running; registration lists it, and the control plane's
  // answer decides whether it is resumed or abandoned.
  void adopt(const std::string& runner_name, runners::Runner* runner, runners::InFlightAttempt left) {
    const std::string id = left.job_id;
    auto a = std::make_unique<Attempt>(settings, *this);
    a->job_id = id;
    a->lease_id = left.lease_id;
    a->number = left.attempt;
    a->runner_name = runner_name;
    a->runner = runner;
    a->left_running = std::make_unique<runners::InFlightAttempt>(std::move(left));
    a->adopted_pending = true;
    keep(std::move(a));
  }

  // Keeps `a` in `attempts`, keyed by its job id (which never changes afterwards); returns it.
  Attempt& keep(std::unique_ptr<Attempt> a) {
    Attempt& kept = *a;
    attempts.emplace(kept.job_id, std::move(a));
    return kept;
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
  // A poll on the wire (poll_loop, fly): the loop's newest, or one a newer poll superseded.
  struct PollFlight {
    asio::cancellation_signal cancel;  // emitted when the worker stops polling
    bool ended = false;
    bool superseded = false;           // a newer poll was sent; fly() removes this one when it ends
    std::optional<CallResult<protocol::PollResponse>> outcome;  // once ended and not superseded (nullopt: cancelled)
  };
  std::vector<std::unique_ptr<PollFlight>> polls_in_flight;
  Notifier poll_changed;      // the newest poll ended, or a new one was asked for
  bool poll_anew_asked = false;
  ConcurrencyLimit upload_slots;  // settings.max_concurrent_uploads (DeliveryContext::upload_slots)
  // Attempts with something to send, waiting for a delivery coroutine (ship()) to take them, oldest first: a burst's
  // ten thousand deliveries wait as a pointer each, not as a coroutine frame each.
  std::deque<Attempt*> waiting_turns;
  std::size_t deliverers = 0;  // ship() coroutines running: at most settings.max_active_deliveries
  // By job id: each key views its attempt's job_id (a manager keeps ten thousand; no copy of each id). Added by
  // keep() only.
  std::map<std::string_view, std::unique_ptr<Attempt>> attempts;
  std::string worker_id;
  std::chrono::milliseconds poll_hold{30'000};
  std::uint64_t polls_sent = 0;                       // polls sent so far (see Attempt::offered_at_poll)
  std::uint64_t polls_made = 0;                       // poll requests made so far (see Attempt::listed_in)
  std::chrono::milliseconds poll_hold_sent{0};        // the hold of the poll in flight
  std::chrono::milliseconds lease_ttl{90'000};        // registration's leaseTtlS
  std::map<std::string, std::chrono::milliseconds> runner_lease_ttl;  // registration's runnerLeaseTtlS
  int background = 0;
  bool exiting = false;
  bool polling_stopped = false;  // /exit is being reported: no more polls (the server would not know us)
  bool exit_reported = false;    // the control plane acknowledged /exit
  bool exit_report_active = false;
  std::optional<Clock::time_point> delivery_deadline;  // A2: no delivery waits past this (set when stopping)
  std::string status_synced;  // state/exitReason last written to status.json with fsync
  StatusPacer status_pacer{std::chrono::seconds(1)};  // a finished job's count update: at most one write a second
  asio::steady_timer status_timer;                    // armed while a paced update is pending
  std::shared_ptr<int> alive = std::make_shared<int>(0);  // expires with the daemon: see on_trouble_change
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
  std::optional<ChainStatus> chain_status;  // a kept launch's, for status.json

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
  // The slots of a runner (its advertised capacity is keyed by its name) that are busy: attempts inside their
  // run, and ended ones whose final event still offers the slot (takeNext) and is not answered yet.
  int busy_slots_on(const std::string& runner_name) const {
    int n = 0;
    for (const auto& [id, a] : attempts)
      if ((a->run_active || a->offers_slot) && a->runner_name == runner_name) ++n;
    return n;
  }

  // Rewrites status.json now, unless `paced` (only the running-jobs count changed) and the last write is less
  // than the pacer's gap old: then once at the end of that gap, with whatever is current then.
  void write_status(bool paced = false) {
    if (settings.status_file.empty()) return;
    const auto now = Clock::now();
    // Once exited nothing is paced: no timer may hold the io_context open after the daemon's end.
    if (paced && lifecycle.phase() != Phase::exited && !status_pacer.change(now)) {
      if (auto due = status_pacer.deferred(); due && status_timer.expiry() != *due) {
        status_timer.expires_at(*due);
        status_timer.async_wait([this, alive = std::weak_ptr<int>(alive)](boost::system::error_code ec) {
          if (!ec && alive.lock() && status_pacer.deferred()) write_status();
        });
      }
      return;
    }
    status_pacer.wrote(now);
    status_timer.cancel();  // this write carries the pending update, if any: no timer outlives the daemon's end
    DaemonStatus st{.pid = static_cast<int>(::getpid()),
                    .launch_id = settings.launch_id,
                    .label = settings.label,
                    .worker_id = worker_id,
                    .state = std::string(to_string(lifecycle.phase())),
                    .message = lifecycle.message(),
                    .started_at = started_at,
                    .updated_at = std::chrono::system_clock::now(),
                    .running_jobs = active_runs(),
                    .chain = chain_status};
    for (const auto& [name, runner] : runners)
      if (auto trouble = runner->trouble(); !trouble.empty()) st.runner_trouble[name] = std::move(trouble);
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
    if (auto deadline = lifecycle.exit_deadline()) delivery_deadline = *deadline;
    if (actions.report_exit && !polling_stopped) {
      // A1: the server learns first that this worker is going away (one bounded try; shut_down() tries again).
      polling_stopped = true;
      log->info("the worker is going away: exiting within {} ms", settings.lifecycle.stop_budget.count());
      spawn(report_exit(Clock::now() + first_exit_report_bound(), false), "exit report");
    }
    if (actions.stop_agent_bound_jobs) stop_attempts_that_stop_with_the_agent();
    if (actions.kill_agent_bound_jobs) kill_attempts_that_stop_with_the_agent();
    if (actions.exit_now && !exiting) {
      exiting = true;
      log->info("exiting: {} ({})", to_string(*lifecycle.exit_reason()), lifecycle.message());
    }
    // A worker that takes no more jobs offers no slot with its final events from now on.
    if (!lifecycle.accepting_jobs())
      for (auto& [id, a] : attempts) a->offers_slot = false;
    // Any change of phase re-issues the held poll, so the server learns at once that we drain; a worker that
    // stops polling ends its polls.
    if (exiting || polling_stopped)
      cancel_polls();
    else
      poll_anew();
    state_changed.notify();
    write_status();
  }

  // Stops (StopReason::shutdown) every running attempt whose runner's jobs end with the agent.
  void stop_attempts_that_stop_with_the_agent() {
    for (auto& [id, a] : attempts) {
      if (a->run_active && a->stops_with_agent()) {
        a->stopped_for_exit = true;
        a->runner->stop(a->job_id, runners::StopReason::shutdown);
      }
    }
  }

  // The stop budget leaves no more kill grace: SIGKILL to every process job still running.
  void kill_attempts_that_stop_with_the_agent() {
    for (auto& [id, a] : attempts) {
      if (a->run_active && a->stops_with_agent()) {
        log->warn("job {}: still running at the exit budget's hard kill; killing it", id);
        a->stopped_for_exit = true;
        a->runner->kill(a->job_id, runners::StopReason::shutdown);
      }
    }
  }

  // How long the first /exit report may take: a share of the budget, the rest is for the jobs.
  std::chrono::milliseconds first_exit_report_bound() const {
    return std::min<std::chrono::milliseconds>(std::chrono::seconds(5), settings.lifecycle.stop_budget / 4);
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
    r.generation = settings.generation;
    for (const auto& [id, a] : attempts)
      if (a->listed()) r.running.push_back({a->job_id, a->lease_id});
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
  NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
  asio::awaitable<bool> register_worker() {
    while (!exiting) {
      auto request = make_register_request();
      const auto sent = Clock::now();
      auto r = co_await cp.register_worker(request);
      if (r) {
        // The worker id goes into every later request path; the same bad id would come back on a retry.
        if (auto ok = protocol::check_id("workerId", r->worker_id); !ok) {
          fatal("registration refused: the control plane's reply is unusable: " + ok.error().message);
          co_return false;
        }
        if (backoff.failures() > 0) state_changed.notify();
        backoff.reset();
        worker_id = r->worker_id;
        poll_hold = std::min(settings.poll_timeout,
                             std::chrono::milliseconds(static_cast<long long>(r->poll_timeout_s * 1000)));
        log->info("registered as worker {} (label {}, launch {})", worker_id, settings.label, settings.launch_id);
        lease_ttl = seconds_to_ms(r->lease_ttl_s, lease_ttl);
        runner_lease_ttl.clear();
        for (const auto& [runner, ttl] : r->runner_lease_ttl_s) runner_lease_ttl[runner] = seconds_to_ms(ttl, lease_ttl);
        renew(request.running, sent);
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
  NYMPH_GCC_PR109224_END

  static std::chrono::milliseconds seconds_to_ms(double s, std::chrono::milliseconds fallback) {
    if (!(s > 0) || s > 1e9) return fallback;
    return std::chrono::milliseconds(static_cast<long long>(s * 1000));
  }

  // The TTL of an attempt's lease: its assignment's leaseTtlS, else its runner's, else the registration's.
  std::chrono::milliseconds ttl_for(const std::string& runner, std::optional<double> assigned) const {
    auto it = runner_lease_ttl.find(runner);
    auto fallback = it != runner_lease_ttl.end() ? it->second : lease_ttl;
    return assigned ? seconds_to_ms(*assigned, fallback) : fallback;
  }

  // A successful poll or registration reply renewed the leases its request listed. The agent's clock restarts
  // at `sent`, when that request left: the server restarts its own no earlier (when the request arrived, or
  // when a held poll ends), so the agent's window always closes first, however late the reply came.
  void renew(const std::vector<protocol::AttemptRef>& listed, Clock::time_point sent) {
    for (const auto& ref : listed)
      if (auto it = attempts.find(ref.job_id); it != attempts.end() && it->second->lease_id == ref.lease_id)
        it->second->lease.renewed(sent);
  }

  // D4: stops every attempt whose lease the agent could not renew in time, before the server re-queues its job:
  // a process job is killed, a Slurm job scancelled; its final event is lost/leaseExpired, delivered when contact
  // returns (or dropped on 409 leaseLost, when the server re-queued it first).
  void expire_leases() {
    const auto now = Clock::now();
    std::vector<std::string> expired;  // stopping one may end another's run: each is looked up again
    for (const auto& [id, a] : attempts)
      if (a->lease.expired(now)) expired.emplace_back(id);
    for (const auto& id : expired) {
      auto it = attempts.find(id);
      if (it == attempts.end()) continue;
      Attempt& a = *it->second;
      a.lease.stop();  // expires once
      if (!a.run_active || a.stopped()) continue;
      log->warn("job {}: lease {} not renewed for {} s (the control plane cannot be reached); stopping attempt {} "
                "before the control plane re-queues the job",
                id, a.lease_id, std::chrono::duration_cast<std::chrono::seconds>(a.lease.window()).count(), a.number);
      a.lease_expired = true;
      a.given_up = true;
      if (a.stops_with_agent())
        a.runner->kill(id, runners::StopReason::lease_expired);
      else
        a.runner->stop(id, runners::StopReason::lease_expired);
      a.wake_all();
    }
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
      a->run_active = true;
      a->lease.start(ttl_for(a->runner_name, std::nullopt), Clock::now());
      log->info("job {}: resuming attempt {} left running by a previous run", a->job_id, a->number);
      start_run(a);  // its delivery starts with its first update
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

  // The next poll's request (a PollRequest's JSON text), numbered `serial` (polls_made): each attempt it lists
  // records that it was listed in it (Attempt::listed_in), which is how that poll's reply knows whose leases it
  // renewed. Written straight from the attempts: at ten thousand of them a PollRequest and its json::value were the
  // agent's peak memory.
  std::string make_poll_request(std::uint64_t serial) {
    const bool accepting = lifecycle.accepting_jobs();
    std::map<std::string, int> free;
    for (const auto& [name, cap] : settings.capacity) free[name] = accepting ? std::max(0, cap - busy_slots_on(name)) : 0;
    for (const auto& [id, a] : attempts) {
      if (!a->listed()) continue;
      if (a->listed_in.first == 0) a->listed_in.first = serial;
      a->listed_in.last = serial;
    }
    return protocol::poll_request_text(free, !accepting, [&](const auto& emit) {
      for (const auto& [id, a] : attempts)
        if (a->listed_in.last == serial) emit(a->job_id, a->lease_id);
    });
  }

  // The reply to poll `serial`, sent at `sent`, renewed the lease of every attempt that poll listed.
  void renew_listed_in(std::uint64_t serial, Clock::time_point sent) {
    for (const auto& [id, a] : attempts)
      if (a->listed_in.contains(serial)) a->lease.renewed(sent);
  }

  // When the first running lease clock expires (expire_leases() has work), or nullopt when none runs.
  std::optional<Clock::time_point> next_lease_expiry() const {
    std::optional<Clock::time_point> next;
    for (const auto& [id, a] : attempts)
      if (auto e = a->lease.expiry(); e && (!next || *e < *next)) next = e;
    return next;
  }

  // The shortest window among the running lease clocks (a held poll must end well within it), or nullopt.
  std::optional<std::chrono::milliseconds> shortest_lease_window() const {
    std::optional<std::chrono::milliseconds> shortest;
    for (const auto& [id, a] : attempts)
      if (a->lease.running() && (!shortest || a->lease.window() < *shortest)) shortest = a->lease.window();
    return shortest;
  }

  // How long a poll may be held so that the leases in hand are renewed in time. D4: a held poll ends within a
  // third of the shortest lease window. A reply renews from when its poll was sent, so two holds in a row (this
  // one and the next, whose reply renews from this one's end) must fit in the window with room to spare.
  std::chrono::milliseconds hold_for_leases() const {
    auto hold = poll_hold;
    if (auto w = shortest_lease_window())
      hold = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(100), std::min(hold, *w / 3));
    return hold;
  }

  // Asks the poll loop for a new poll now, with the free slots, leases and draining flag of now. The poll in
  // flight is not cancelled (its reply may already carry jobs): the control plane answers it at once, empty,
  // when the new one arrives, and its reply is applied as any other.
  void poll_anew() {
    poll_anew_asked = true;
    poll_changed.notify();
  }

  // Ends every poll in flight (the worker stops polling). Their replies are not applied.
  void cancel_polls() {
    for (auto& f : polls_in_flight) f->cancel.emit(asio::cancellation_type::terminal);
  }

  // Sends one poll and applies its reply; a failure (or a cancellation: nullopt) is left in `f` for the loop
  // unless a newer poll superseded this one. Removes `f` from polls_in_flight once the loop is done with it.
  NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
  asio::awaitable<void> fly(PollFlight* f, std::string request, std::uint64_t serial) {
    const auto sent = Clock::now();
    const auto hold = hold_for_leases();
    ++polls_sent;
    poll_hold_sent = hold;
    std::optional<CallResult<protocol::PollResponse>> r;
    try {
      r = co_await asio::co_spawn(ex, cp.poll(worker_id, std::move(request), hold),
                                  asio::bind_cancellation_slot(f->cancel.slot(), asio::use_awaitable));
    } catch (const boost::system::system_error& e) {
      if (e.code() != asio::error::operation_aborted) throw;
    }
    if (r && *r && !exiting && !polling_stopped) {
      // A4: the control plane answers again: every delivery waiting out a backoff retries now.
      if (backoff.failures() > 0) state_changed.notify();
      backoff.reset();
      renew_listed_in(serial, sent);
      handle_poll_reply(std::move(**r));
    }
    f->ended = true;
    if (f->superseded) {
      std::erase_if(polls_in_flight, [f](const auto& p) { return p.get() == f; });
    } else {
      f->outcome = std::move(r);
      poll_changed.notify();
    }
  }
  NYMPH_GCC_PR109224_END

  asio::awaitable<void> poll_loop() {
    while (!exiting && !polling_stopped) {
      auto* f = polls_in_flight.emplace_back(std::make_unique<PollFlight>()).get();
      poll_anew_asked = false;
      const auto serial = ++polls_made;
      spawn(fly(f, make_poll_request(serial), serial), "poll");
      while (!f->ended && !poll_anew_asked && !exiting && !polling_stopped) co_await poll_changed.wait();
      if (!f->ended) {
        f->superseded = true;  // fly() removes it when it ends
        continue;
      }
      auto r = std::move(f->outcome);
      std::erase_if(polls_in_flight, [f](const auto& p) { return p.get() == f; });
      if (exiting || polling_stopped) break;
      if (!r || *r) continue;  // cancelled, or answered (and applied)
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
    }
  }

  void handle_poll_reply(protocol::PollResponse reply) {
    handle_cancel_orders(reply.cancel);
    start_assigned(std::move(reply.jobs), "poll reply");
    if (reply.directive) {
      log->info("control plane directive: {}", protocol::to_string(*reply.directive));
      apply(lifecycle.on_directive(to_directive(*reply.directive), Clock::now()));
    }
  }

  // ---- attempts ------------------------------------------------------------------------------------------

  // Starts the jobs a poll reply or an event reply (`source`) leased to this worker.
  void start_assigned(std::vector<protocol::JobAssignment> jobs, std::string_view source) {
    for (auto& job : jobs) {
      // Nothing can be reported for such a job (its id cannot go into a path): it is dropped, and the
      // control plane gives the lease up once it expires.
      if (auto ok = check_assignment_ids(job); !ok) {
        log->error("dropped a job from the control plane's {}: {}", source, ok.error().message);
        continue;
      }
      start_attempt(std::move(job));
    }
  }

  // Once `a`'s delivery ended: the jobs its event replies leased start (takeNext, or a repeated event's), and a
  // slot its final event offered that no poll counts now (no job took it, and the held poll did not, or was
  // replaced while the event was on its way) is offered by a new poll. So is a leased job whose lease must be
  // renewed before the poll in flight returns.
  void settle_event_replies(Attempt& a) {
    const bool offered = std::exchange(a.offers_slot, false);
    std::vector<protocol::JobAssignment> handed;
    if (a.handed) handed = std::move(*std::exchange(a.handed, nullptr));
    const bool new_poll =
        offered && offered_slot_needs_new_poll(!handed.empty(), a.slot_held, polls_sent != a.offered_at_poll);
    start_assigned(std::move(handed), "event reply");
    if (new_poll || hold_for_leases() < poll_hold_sent) poll_anew();
  }

  void start_attempt(protocol::JobAssignment job) {
    if (auto it = attempts.find(job.job_id); it != attempts.end()) {
      if (it->second->lease_id != job.lease_id) log->warn("job {}: new attempt while attempt {} is in hand", job.job_id, it->second->number);
      return;  // a duplicate delivery
    }
    if (!lifecycle.accepting_jobs()) {
      // Leased in a reply that crossed the agent's stop (a poll's, or a final event's takeNext): handed back
      // at once, unstarted, rather than left to its lease's expiry.
      refuse(std::move(job), "refused: the worker is stopping and takes no new jobs");
      return;
    }
    if (auto cap = settings.capacity.find(job.runner);
        cap != settings.capacity.end() && busy_slots_on(job.runner) >= cap->second) {
      refuse(std::move(job), "refused: worker at capacity (" + std::to_string(cap->second) + " of " +
                                 std::to_string(cap->second) + " slots busy)");
      return;
    }
    if (auto why = does_not_fit(job)) {
      refuse(std::move(job), "refused: " + *why);
      return;
    }
    auto a = std::make_unique<Attempt>(settings, *this);
    a->job_id = job.job_id;
    a->lease_id = job.lease_id;
    a->number = job.attempt;
    a->runner_name = job.runner;
    a->spec = std::make_unique<runners::JobSpec>(to_runner_spec(job));
    auto runner = runner_for(*a);
    if (runner) a->runner = *runner;
    log->info("job {}: attempt {} on runner {}", a->job_id, a->number, a->runner_name);
    Attempt* raw = &keep(std::move(a));
    // The flag is set before the runner takes the attempt: it may report (and queue) before launch() returns, and
    // the attempt is removed as soon as neither its run nor its delivery is active. Its delivery starts with
    // the first thing it queues (Attempt::queued). `raw` is not used afterwards.
    if (!runner) {
      raw->outbox.push_event(JobUpdate{.state = JobState::failed, .message = runner.error().message},
                             std::chrono::system_clock::now(), Clock::now());
      raw->queued();
    } else {
      raw->run_active = true;
      const auto ttl = ttl_for(job.runner, job.lease_ttl_s);
      raw->lease.start(ttl, Clock::now());
      start_run(raw);
    }
    state_changed.notify();
  }

  // A3: an assignment beyond the runner's advertised capacity (a control plane that sends more than `free`), one
  // that does not fit before this worker's allocation ends (does_not_fit), or one that arrives once the worker
  // takes no new jobs, is never started: its only event is `lost` (seq 1, reason overCapacity) saying `message`,
  // sent at once, so the control plane re-queues it without counting an attempt. It is not listed as running.
  void refuse(protocol::JobAssignment job, const std::string& message) {
    auto a = std::make_unique<Attempt>(settings, *this);
    a->job_id = job.job_id;
    a->lease_id = job.lease_id;
    a->number = job.attempt;
    a->runner_name = job.runner;
    a->given_up = true;
    log->warn("job {}: attempt {} {}", a->job_id, a->number, message);
    a->outbox.push_event(JobUpdate{.state = JobState::lost, .message = message, .reason = runners::LostReason::over_capacity},
                         std::chrono::system_clock::now(), Clock::now());
    Attempt* raw = &keep(std::move(a));
    raw->queued();
  }

  // The runner that runs `a`, or why `a` cannot start on this worker: its runner is not here.
  Result<runners::Runner*> runner_for(const Attempt& a) const {
    auto it = runners.find(a.runner_name);
    if (it == runners.end()) return fail("runner '" + a.runner_name + "' is not available on this worker");
    return it->second;
  }

  // Why `job` must not start here, if it must not: it would stop with the agent (its runner's lifetime) and
  // its timeout does not fit before the allocation ends minus the walltime lead (the control plane's placement
  // rule, docs/protocol.md; met here when a clock is off or an older control plane sent it).
  std::optional<std::string> does_not_fit(const protocol::JobAssignment& job) const {
    auto it = runners.find(job.runner);
    if (it == runners.end() || it->second->lifetime() != runners::Lifetime::stops_with_agent) return std::nullopt;
    std::optional<std::chrono::milliseconds> timeout;
    if (auto t = timeout_of(job.spec)) timeout = *t;
    if (lifecycle.fits_before_walltime(timeout, Clock::now())) return std::nullopt;
    return timeout ? "the job's timeout does not fit before this worker's allocation ends (minus its walltime lead)"
                   : "this worker's allocation ends within its walltime lead";
  }

  // Hands `a` to its runner (its spec, or the record of an attempt left running) without a coroutine of the
  // agent's: the runner calls attempt_ended() with the final update. The attempt counts as background work
  // (run() waits for it) until then. An attempt waiting in Slurm's queue then holds no coroutine frame at all.
  void start_run(Attempt* a) {
    ++background;
    auto ended = [this, a](JobUpdate u) {
      attempt_ended(a, std::move(u));
      --background;
      background_done.notify();
    };
    if (a->left_running) {
      const std::unique_ptr<runners::InFlightAttempt> left = std::move(a->left_running);
      a->runner->resumable()->relaunch(ex, std::move(*left), a->reporter, std::move(ended));
      return;
    }
    const std::unique_ptr<runners::JobSpec> spec = std::move(a->spec);
    a->runner->launch(ex, std::move(*spec), a->reporter, std::move(ended));
  }

  // The runner's final update for `a`. Inside an allocation, a process job that died of a signal first waits
  // for the agent's own stop signal (await_own_stop_signal), in a coroutine of its own.
  void attempt_ended(Attempt* a, JobUpdate final_update) {
    a->run_active = false;
    a->lease.stop();
    if (!a->stopped() && a->stops_with_agent() && final_update.signal && !a->stopped_for_exit &&
        !lifecycle.worker_going_away() && settings.allocation) {
      spawn(settle_after_own_stop_signal(a, std::move(final_update)), "job " + a->job_id);
      return;
    }
    settle(a, std::move(final_update));
  }

  asio::awaitable<void> settle_after_own_stop_signal(Attempt* a, JobUpdate final_update) {
    co_await await_own_stop_signal();
    settle(a, std::move(final_update));
  }

  // Queues `a`'s final event (unless it was stopped: then nothing is reported) and lets the attempt go once
  // its delivery is over too.
  void settle(Attempt* a, JobUpdate final_update) {
    if (!a->stopped()) {
      if (!runners::is_final(final_update.state)) {
        final_update.state = JobState::failed;
        final_update.message = "runner returned without a final state";
      }
      if (a->lease_expired) {
        final_update.state = JobState::lost;
        final_update.reason = runners::LostReason::lease_expired;
        final_update.message = "the worker could not renew the lease for " +
                               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(a->lease.window()).count()) +
                               " s and stopped the attempt (" + final_update.message + ")";
      } else {
        classify_worker_stopping(*a, final_update);
      }
      log->info("job {}: {}{}", a->job_id, to_string(final_update.state),
                final_update.message.empty() ? "" : " (" + final_update.message + ")");
      a->offers_slot = lifecycle.accepting_jobs() && !a->lease_expired;
      a->outbox.push_event(std::move(final_update), std::chrono::system_clock::now(), Clock::now());
      a->queued();
    }
    a->wake.notify();
    state_changed.notify();
    finish_if_done(a);
  }

  // A1: a process job that the agent stopped because the worker is going away, or that died of a signal
  // while it is (scancel signals the whole allocation), is a lost attempt (reason workerStopping): the control
  // plane re-queues it while its attempts allow. A job that exited on its own (any exit code) keeps its outcome.
  void classify_worker_stopping(const Attempt& a, JobUpdate& u) const {
    if (u.state == JobState::succeeded || u.state == JobState::lost || !a.stops_with_agent()) return;
    const bool stopped_by_us = a.stopped_for_exit && u.state == JobState::cancelled;
    const bool signalled_meanwhile = lifecycle.worker_going_away() && u.signal.has_value() && u.state == JobState::failed;
    if (!stopped_by_us && !signalled_meanwhile) return;
    u.state = JobState::lost;
    u.reason = runners::LostReason::worker_stopping;
    u.message = "the worker is going away (" + lifecycle.message() + "); the process " +
                (u.signal ? "was killed by signal " + std::to_string(*u.signal) : std::string("was stopped"));
  }

  // Inside an allocation, a scancel's SIGTERM reaches the jobs and the agent at the same moment: a job that
  // died of a signal waits (at most 2 s) for the agent to see its own stop signal before its outcome is fixed.
  asio::awaitable<void> await_own_stop_signal() {
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (!lifecycle.worker_going_away() && !exiting && Clock::now() < until) co_await state_changed.wait(until);
  }

  // Removes an attempt once neither its run nor its delivery is active. `a` is invalid afterwards.
  void finish_if_done(Attempt* a) {
    if (a->run_active || a->shipper_active) return;
    if (a->runner && !a->detached) a->runner->release(a->job_id);
    std::string id = a->job_id;
    attempts.erase(id);
    state_changed.notify();
    write_status(/*paced=*/true);
  }

  // ShipperStarter: `a` queued something and has no delivery running. It gets a delivery coroutine when fewer than
  // max_active_deliveries run, else it waits for its turn in line (waiting_turns).
  void start_shipper(Attempt& a) override {
    a.shipper_active = true;
    if (deliverers < std::max<std::size_t>(settings.max_active_deliveries, 1)) {
      ++deliverers;
      spawn(ship(&a), "delivery");
    } else {
      waiting_turns.push_back(&a);
    }
  }

  // One delivery coroutine: delivers `a`'s events and logs (see deliver()), then those of each attempt waiting
  // for its turn, oldest first, until none waits. An attempt that handed its turn on goes to the back of the line.
  asio::awaitable<void> ship(Attempt* a) {
    struct Count {
      std::size_t& deliverers;
      ~Count() { --deliverers; }
    } count{deliverers};
    DeliveryContext context{cp,         {settings.backoff_initial, settings.backoff_max},
                            state_changed, delivery_deadline,
                            *log,       polls_sent,
                            upload_slots, waiting_turns};
    while (a != nullptr) {
      auto end = co_await deliver(*a, context);
      if (end.kind == DeliveryEnd::Kind::turn_over)
        waiting_turns.push_back(a);
      else
        delivery_ended(*a, end);
      a = nullptr;
      if (!waiting_turns.empty()) {
        a = waiting_turns.front();
        waiting_turns.pop_front();
      }
    }
  }

  // `a`'s delivery ended (not handed on): what its event replies handed over is settled, and the attempt goes
  // when its run is over too. `a` may be invalid afterwards.
  void delivery_ended(Attempt& a, const DeliveryEnd& end) {
    if (end.kind == DeliveryEnd::Kind::token_refused) {
      fatal("control plane refused the token: " + end.message);
      a.abandoned = true;
    }
    if (a.offers_slot || a.handed) settle_event_replies(a);
    a.shipper_active = false;
    a.drained.notify();
    finish_if_done(&a);
  }

  // ---- lifecycle driver ----------------------------------------------------------------------------------

  asio::awaitable<void> tick_loop() {
    while (!exiting) {
      expire_leases();
      apply_tick();
      if (exiting) break;
      auto next = lifecycle.next_deadline();
      if (auto e = next_lease_expiry(); e && (!next || *e < *next)) next = e;
      co_await state_changed.wait(next);
    }
  }

  void apply_tick() {
    auto actions = lifecycle.on_tick(active_runs_where([](const Attempt& a) { return a.stops_with_agent(); }),
                                     active_runs(), Clock::now());
    if (actions.stop_agent_bound_jobs || actions.kill_agent_bound_jobs || actions.report_exit || actions.exit_now)
      apply(actions);
  }

  // Leaves running every running attempt whose runner's jobs survive the agent: a manager stop never cancels
  // them (sbatch jobs), nothing more is reported, and a restarted agent resumes them.
  void detach_attempts_that_survive_the_agent() {
    for (auto& [id, a] : attempts) {
      if (a->run_active && a->survives_agent()) {
        a->detached = true;
        a->runner->stop(a->job_id, runners::StopReason::shutdown);
        a->wake_all();
      }
    }
  }

  // Stops what must stop, delivers what can be delivered within the exit budget, and reports the exit.
  asio::awaitable<void> shut_down() {
    cancel_polls();
    std::erase_if(attempts, [](const auto& entry) { return entry.second->adopted_pending; });  // never started
    detach_attempts_that_survive_the_agent();
    // A1: within the stop budget whatever the control plane answers; an exit without one (idle, drain
    // directive, fatal error) delivers for exit_delivery_timeout.
    auto deadline = lifecycle.exit_deadline().value_or(Clock::now() + settings.exit_delivery_timeout);
    // While /exit is not acknowledged, the end of the budget is kept for one more try at it.
    const auto exit_report_reserve = std::min<std::chrono::milliseconds>(std::chrono::seconds(1),
                                                                         settings.lifecycle.stop_budget / 10);
    auto deliver_until = [&] { return exit_reported ? deadline : deadline - exit_report_reserve; };
    delivery_deadline = deliver_until();
    state_changed.notify();  // deliveries waiting out a backoff re-check the deadline
    while (!attempts.empty() && Clock::now() < deliver_until()) co_await state_changed.wait(deliver_until());
    for (auto& [id, a] : attempts) {
      if (!a->stopped() && !a->outbox.finished())
        log->warn("job {}: attempt {} (lease {}): {} not delivered before the exit deadline; the control plane "
                  "re-queues it when the lease expires",
                  id, a->number, a->lease_id, a->outbox.has_final() ? "its final event was" : "its outcome is");
      a->abandoned = true;
      a->cancel_upload.emit(asio::cancellation_type::terminal);
      if (a->run_active && a->stops_with_agent()) {
        a->stopped_for_exit = true;
        a->runner->kill(a->job_id, runners::StopReason::shutdown);
      }
      a->wake_all();
    }
    while (exit_report_active) co_await state_changed.wait();  // the early report, bounded by its own deadline
    if (!worker_id.empty() && lifecycle.exit_reason() && !exit_reported) {
      // The last try: what is left of the budget (the reserve kept above).
      auto until = deadline;
      if (*lifecycle.exit_reason() == ExitReason::error) until = Clock::now() + std::chrono::seconds(5);
      co_await report_exit(until, true);
    }
    write_status();
  }

  NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
  // Reports /exit until acknowledged or `deadline` (each request is cut off there too). `last`: the final try
  // at shut-down (a failure is logged); otherwise the early report, which shut_down() repeats if it failed.
  asio::awaitable<void> report_exit(Clock::time_point deadline, bool last) {
    protocol::ExitRequest x;
    x.exit_reason = to_wire_exit_reason(*lifecycle.exit_reason());
    x.message = lifecycle.message();
    Backoff retry({settings.backoff_initial, std::chrono::milliseconds(5000)});
    exit_report_active = true;
    struct Done {
      Impl& d;
      ~Done() {
        d.exit_report_active = false;
        d.state_changed.notify();
      }
    } done{*this};
    while (!exit_reported) {
      auto r = co_await until_deadline(ex, cp.report_exit(worker_id, x), deadline);
      if (r && *r) {
        exit_reported = true;
        co_return;
      }
      std::string why = r ? r->error().message : std::string("no answer in time");
      if (!r || r->error().kind != CallFailure::transient || Clock::now() >= deadline) {
        if (last) log->warn("could not report the exit: {}", why);
        else log->warn("could not report the exit yet ({}); trying again before exiting", why);
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

std::optional<Clock::time_point> Daemon::idle_since() const { return impl_->lifecycle.idle_since(); }

Daemon::AttemptCounts Daemon::attempt_counts() const {
  AttemptCounts n;
  for (const auto& [id, a] : impl_->attempts) {
    ++n.attempts;
    if (a->shipper_active) ++n.delivering;
  }
  n.waiting_for_upload = impl_->upload_slots.waiting();
  n.waiting_for_delivery = impl_->waiting_turns.size();
  return n;
}

std::optional<ExitReason> Daemon::stop_reason() const { return impl_->lifecycle.exit_reason(); }

void Daemon::set_chain_status(std::string state, std::string reason, std::string successor_job_id) {
  impl_->chain_status = ChainStatus{.generation = impl_->settings.generation,
                                    .state = std::move(state),
                                    .reason = std::move(reason),
                                    .successor_job_id = std::move(successor_job_id)};
  impl_->status_synced.clear();  // a change of the chain's state is fsync'ed like a change of the daemon's
  impl_->write_status();
}

}  // namespace nymph::agent
