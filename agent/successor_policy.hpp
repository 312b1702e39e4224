#pragma once
// When the running generation of a kept launch (`nymph install --slurm --keep`) submits its successor, as a
// sans-io state machine: the driver feeds it the time, whether the worker is idle or stopping, and the outcome of
// each submission; it answers what to do next. Tests step it without Slurm, timers or sleeps.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nymph::agent {

// The chain's rules ([chain] in docs/config.md).
struct SuccessorConfig {
  int min_generations = 1;                          // generations the chain runs whatever the demand
  int max_generations = 0;                          // the chain ends after this generation; 0: no limit
  std::chrono::milliseconds idle_end{30 * 60'000};  // past min_generations: no successor after this long idle
  // The successor is submitted this long before the serving end: twice the longest queue wait measured in the
  // last three generations, never less than `floor`, never more than `ceiling`, and never before half of this
  // generation's serving time has passed (so at most two generations of a chain overlap).
  std::chrono::milliseconds floor{5 * 60'000};
  std::chrono::milliseconds ceiling{2 * 3'600'000};
  // The waits after the 1st, 2nd... failed submission (the last one repeats); `pause_after` failures in a row
  // pause the chain.
  std::vector<std::chrono::milliseconds> backoff{std::chrono::minutes(1), std::chrono::minutes(5),
                                                 std::chrono::minutes(15), std::chrono::minutes(60)};
  int pause_after = 4;
};

// Where the chain stands, as this generation sees it.
enum class ChainPhase {
  waiting,    // the successor is not due yet
  due,        // submit the successor now
  retrying,   // a submission failed; the next one is due at retry_at()
  submitted,  // the successor is queued: this generation's part is done
  paused,     // submissions failed pause_after times in a row: the chain stops renewing, says why
  ended,      // no successor by rule: max_generations reached, idle, or the launch was stopped
  manager,    // this generation cannot submit (no sbatch on its node): the login-node manager submits instead
};

// "waiting", "due", "retrying", "submitted", "paused", "ended", "manager".
std::string_view to_string(ChainPhase p);

class SuccessorPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // `generation` is the running one (1 for the first allocation); it serves from `started` until `serving_end` (its
  // allocation's end minus the walltime lead); `queue_waits` are the measured waits (submission to start) of the
  // earlier generations, oldest first.
  SuccessorPolicy(SuccessorConfig config, int generation, Clock::time_point started, Clock::time_point serving_end,
                  std::vector<std::chrono::seconds> queue_waits);

  // When the successor is due: serving_end minus the submission lead (see SuccessorConfig::floor).
  Clock::time_point submit_at() const { return submit_at_; }
  // How long before serving_end the successor is submitted.
  std::chrono::milliseconds submission_lead() const { return lead_; }

  // Re-evaluates at `now`. `idle_since` is when the worker last held no job (nullopt: it holds one);
  // `stop_requested` is true when the launch is being stopped (nymph kill, SIGTERM, a kill directive);
  // `draining_for_walltime` when the worker already drains for its walltime (a successor still not submitted is
  // due at once). Moves waiting/retrying to due, or to ended; returns the phase.
  ChainPhase advance(Clock::time_point now, std::optional<Clock::time_point> idle_since, bool stop_requested,
                     bool draining_for_walltime = false);

  // This generation cannot submit its successor (no sbatch where it runs): the chain is the manager's now (any
  // phase but ended -> manager; advance() keeps it there).
  void hand_over(std::string why);

  // The driver submitted the successor (due -> submitted).
  void submission_succeeded();
  // A submission failed with `error` (due -> retrying, or paused after pause_after failures in a row).
  void submission_failed(Clock::time_point now, std::string error);

  ChainPhase phase() const { return phase_; }
  // When the driver must call advance() again (submit_at or retry_at), or nullopt when nothing is due by time
  // (submitted, paused, ended, due).
  std::optional<Clock::time_point> next_deadline() const;
  Clock::time_point retry_at() const { return retry_at_; }
  int failures() const { return failures_; }
  // Why the chain is paused or ended, or the last submission error while retrying; empty otherwise.
  const std::string& reason() const { return reason_; }

 private:
  void end(std::string why);

  SuccessorConfig config_;
  int generation_;
  std::chrono::milliseconds lead_;
  Clock::time_point submit_at_;
  Clock::time_point retry_at_{};
  ChainPhase phase_ = ChainPhase::waiting;
  int failures_ = 0;
  std::string reason_;
};

}  // namespace nymph::agent
