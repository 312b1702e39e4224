#pragma once
// The agent's lifecycle as a sans-io state machine: registering -> serving -> draining -> exited.
// The daemon feeds it events with the current monotonic time and carries out what it answers; tests step it
// without sockets, signals or sleeps.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace nymph::agent {

using Clock = std::chrono::steady_clock;

// Why the agent exited (the protocol's exitReason).
enum class ExitReason { sigterm, sigint, killed, walltime, idle, error };

std::string_view to_string(ExitReason r);

// Process exit status for a reason: 0 for idle/killed/walltime, 143 for sigterm, 130 for sigint, 1 for error.
int exit_status(ExitReason r);

enum class Phase { registering, serving, draining, exited };

std::string_view to_string(Phase p);

// Inputs of the lifecycle.
enum class Signal { term, interrupt, usr1 };
enum class Directive { none, drain, kill };

struct LifecycleConfig {
  std::chrono::milliseconds drain_grace{60'000};   // process jobs may finish for this long after a stop
  std::optional<std::chrono::milliseconds> idle_exit;
  // Inside an allocation: when the allocation ends and how long before that to drain on our own.
  std::optional<Clock::time_point> walltime_end;
  std::chrono::milliseconds walltime_lead{120'000};
  // A1 (issue 15): from the first stop request (SIGTERM/SIGINT/SIGUSR1, the walltime lead, a kill directive) the
  // agent exits within this long, whatever the control plane answers: [worker] stop_timeout, inside an
  // allocation min(stop_timeout, KillWait - 3 s). Process jobs may finish for drain_grace, but get SIGTERM early
  // enough for kill_grace before the hard kill, which leaves delivery_reserve(stop_budget) to report them.
  std::chrono::milliseconds stop_budget{30'000};
  // The process runner's SIGTERM-to-SIGKILL grace ([runners.process] kill_grace).
  std::chrono::milliseconds kill_grace{10'000};
};

// The part of the stop budget kept for delivering final events after the hard kill: min(5 s, budget / 3).
std::chrono::milliseconds delivery_reserve(std::chrono::milliseconds stop_budget);

// What the driver must do now (several may be true at once).
struct LifecycleActions {
  bool stop_agent_bound_jobs = false;  // stop every job that stops with the agent (Runner::lifetime(): process jobs)
  bool kill_agent_bound_jobs = false;  // the budget leaves no more kill grace: SIGKILL them now (Runner::kill)
  bool report_exit = false;            // the worker is going away: report /exit now, before the jobs' final events
  bool exit_now = false;               // report exitReason and exit
};

class Lifecycle {
 public:
  Lifecycle(LifecycleConfig config, Clock::time_point now);

  Phase phase() const { return phase_; }
  // Whether a poll may ask for new jobs.
  bool accepting_jobs() const { return phase_ == Phase::serving; }
  std::optional<ExitReason> exit_reason() const { return reason_; }
  // Serving with no job held: since when (updated by on_tick); nullopt while a job is held or when not serving.
  std::optional<Clock::time_point> idle_since() const {
    return phase_ == Phase::serving && was_idle_ ? std::optional(idle_since_) : std::nullopt;
  }
  const std::string& message() const { return message_; }

  // Registration succeeded (also after a re-registration).
  void registered(Clock::time_point now);
  // A signal arrived. The first stop signal drains; a second one stops at once.
  LifecycleActions on_signal(Signal s, Clock::time_point now);
  // The control plane answered a poll with a directive.
  LifecycleActions on_directive(Directive d, Clock::time_point now);
  // A fatal error (401/403, unusable config discovered late): stop now with exitReason error.
  LifecycleActions on_fatal(std::string message);
  // The number of attempts this agent holds changed (or a timer fired): re-evaluates idle exit, drain
  // deadline and walltime. `agent_bound_jobs` counts jobs that stop with the agent (Runner::lifetime(): process
  // jobs); `all_jobs` also those that survive it (Slurm jobs).
  LifecycleActions on_tick(int agent_bound_jobs, int all_jobs, Clock::time_point now);
  // The earliest time on_tick must be called again even if nothing else happens (idle exit, drain deadline,
  // walltime lead), or nullopt.
  std::optional<Clock::time_point> next_deadline() const;
  // When the agent must have exited (the stop budget from the first stop request), or nullopt while serving,
  // after a drain directive (which lets every job finish) and after a fatal error.
  std::optional<Clock::time_point> exit_deadline() const { return exit_deadline_; }
  // Whether the worker is going away (a stop with a budget began): a process job that the agent stops, or that
  // dies of a signal, from now on is a lost attempt (reason workerStopping), not the job's failure.
  bool worker_going_away() const { return exit_deadline_.has_value(); }
  // Whether a job that stops with the agent (a process job) of `timeout` may start at `now`: outside an
  // allocation always; inside one when it finishes by the allocation's end minus the walltime lead, and a job
  // without a timeout (nullopt) while the lead has not begun.
  bool fits_before_walltime(std::optional<std::chrono::milliseconds> timeout, Clock::time_point now) const;

 private:
  LifecycleActions begin_drain(ExitReason reason, std::string message, Clock::time_point now);
  // Starts the stop budget at `now`: exit deadline, hard kill, and the drain deadline capped to fit them.
  LifecycleActions start_budget(Clock::time_point now);

  LifecycleConfig config_;
  Phase phase_ = Phase::registering;
  std::optional<ExitReason> reason_;
  std::string message_;
  Clock::time_point idle_since_;
  bool was_idle_ = true;
  std::optional<Clock::time_point> drain_deadline_;
  bool kill_sent_ = false;  // SIGTERM (stop_agent_bound_jobs) sent
  std::optional<Clock::time_point> exit_deadline_;
  std::optional<Clock::time_point> hard_kill_at_;
  bool hard_kill_sent_ = false;
  bool exit_when_idle_ = true;  // draining ends when no job of any kind remains (false: process jobs only)
};

}  // namespace nymph::agent
