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
};

// What the driver must do now (several may be true at once).
struct LifecycleActions {
  bool stop_agent_bound_jobs = false;  // stop every job that stops with the agent (Runner::lifetime(): process jobs)
  bool exit_now = false;               // report exitReason and exit
};

class Lifecycle {
 public:
  Lifecycle(LifecycleConfig config, Clock::time_point now);

  Phase phase() const { return phase_; }
  // Whether a poll may ask for new jobs.
  bool accepting_jobs() const { return phase_ == Phase::serving; }
  std::optional<ExitReason> exit_reason() const { return reason_; }
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
  // Whether a job that stops with the agent (a process job) of `timeout` started now could finish before the
  // allocation ends.
  bool fits_before_walltime(std::optional<std::chrono::milliseconds> timeout, Clock::time_point now) const;

 private:
  LifecycleActions begin_drain(ExitReason reason, std::string message, Clock::time_point now);

  LifecycleConfig config_;
  Phase phase_ = Phase::registering;
  std::optional<ExitReason> reason_;
  std::string message_;
  Clock::time_point idle_since_;
  bool was_idle_ = true;
  std::optional<Clock::time_point> drain_deadline_;
  bool kill_sent_ = false;
  bool exit_when_idle_ = true;  // draining ends when no job of any kind remains (false: process jobs only)
};

}  // namespace nymph::agent
