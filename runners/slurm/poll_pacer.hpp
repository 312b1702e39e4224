#pragma once
// When the Slurm runner may next ask slurmctld anything, as a sans-io state machine: the runner tells it what
// happened (a submission, a cycle and what it found, an RPC it is about to make) and asks it how long to wait.
//   - Adaptive cycle: the next squeue comes `quick` after a submission, a cancel, a cycle that saw a change, or a
//     job's expected end; each cycle that saw nothing new doubles the wait, up to `ceiling`.
//   - Controller trouble (squeue or scancel refused, timed out, rate limited): the next cycle waits a backoff
//     that doubles per failed cycle from `quick` up to kMaxControllerBackoff, with jitter, and the pacer says why
//     (trouble()) until a cycle succeeds.
//   - RPC budget: at most `rpc_budget_per_minute` slurmctld RPCs in any 60 s window (rpc_window), spread out: a
//     bucket of half the budget, refilled at half the budget per window, so a burst of calls takes at most half
//     the budget at once and the rest follow at a steady pace (one every 2 s at the default 60) instead of
//     waiting for the window to empty. A bucket of C refilled at C per window never lets more than 2C through in
//     any window; the window itself is counted too, for calls larger than the bucket. rpc_delay says how long the
//     next RPCs must wait. sacct talks to slurmdbd, not slurmctld: it is not counted.
// Nothing here sleeps or reads a clock: every call takes `now`, and the jitter comes from a seeded generator.
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace nymph::runners::slurm {

using PacerClock = std::chrono::steady_clock;

// The longest wait between cycles while slurmctld keeps failing.
inline constexpr std::chrono::milliseconds kMaxControllerBackoff{std::chrono::minutes(5)};

// [runners.slurm] poll_interval, poll_interval_max, poll_jitter, rpc_budget_per_minute, as a value.
struct PollPacerConfig {
  std::chrono::milliseconds quick{10'000};    // the wait after anything that can have changed a job
  std::chrono::milliseconds ceiling{60'000};  // the longest wait while nothing moves (≥ quick)
  double jitter = 0.2;                        // each wait is scaled by a factor in [1 - jitter, 1 + jitter]
  int rpc_budget_per_minute = 60;             // slurmctld RPCs in any window of rpc_window; 0: no budget
  std::chrono::milliseconds rpc_window{60'000};  // a minute; tests shorten it
  std::uint64_t seed = 0;                     // of the jitter's generator
};

// What a poll cycle found.
enum class CycleOutcome {
  quiet,               // every command answered, no tracked job changed
  changed,             // some job changed state (or a report was made)
  controller_trouble,  // squeue or scancel failed: slurmctld refused, timed out or could not be reached
};

class PollPacer {
 public:
  explicit PollPacer(PollPacerConfig config);

  // Something that can change a job soon happened at `now` (a submission, a cancel, an exit record): the next
  // cycle is due by now + quick, unless the controller is backing off (its backoff stands).
  void hurry(PacerClock::time_point now);

  // The next cycle is due by now + `within` (a job known to be ending), unless the controller is backing off.
  void due_within(PacerClock::time_point now, std::chrono::milliseconds within);

  // A cycle ended at `now` with `outcome`; `until_expected_end` is how long until the soonest expected end of a
  // running job (start + time limit), if any. Sets the next cycle's due time.
  void cycle_done(PacerClock::time_point now, CycleOutcome outcome, std::string trouble = {},
                  std::optional<std::chrono::milliseconds> until_expected_end = std::nullopt);

  // When the next cycle is due: never (time_point::max()) before the first hurry() or cycle_done().
  PacerClock::time_point next_cycle() const { return next_cycle_; }

  // How long `rpcs` more slurmctld RPCs must wait from `now` to stay within the budget (zero: they fit now): for
  // the bucket to hold them and the window to have room. A count larger than the bucket waits for a full bucket
  // (and leaves it in debt); one larger than the whole budget waits for an empty window and is then let through.
  std::chrono::milliseconds rpc_delay(PacerClock::time_point now, int rpcs);

  // Records `rpcs` slurmctld RPCs made at `now` (taken from the bucket, which may go into debt of at most a
  // bucket's worth).
  void spend(PacerClock::time_point now, int rpcs);

  // RPCs made in the rpc_window before `now`.
  int rpcs_in_window(PacerClock::time_point now);

  // Why slurmctld is being backed off from ("" when it is not): the last failure's message.
  const std::string& trouble() const { return trouble_; }
  // Consecutive failed cycles.
  int failures() const { return failures_; }

 private:
  std::chrono::milliseconds jittered(std::chrono::milliseconds d);
  void forget_before(PacerClock::time_point now);
  void refill(PacerClock::time_point now);
  std::chrono::milliseconds bucket_delay(double rpcs) const;  // until the bucket holds `rpcs` (refilled first)

  PollPacerConfig config_;
  std::chrono::milliseconds interval_;  // the wait the next quiet cycle starts from
  PacerClock::time_point next_cycle_ = PacerClock::time_point::max();
  int failures_ = 0;
  std::string trouble_;
  std::deque<PacerClock::time_point> spent_;  // one entry per RPC in the window, oldest first
  double bucket_capacity_ = 0;                 // half the budget (at least 1)
  double tokens_ = 0;                          // RPCs the bucket lets through now (full at first); < 0: in debt
  std::optional<PacerClock::time_point> refilled_at_;  // tokens_ was brought up to date then (none: never used)
  std::mt19937_64 random_;
};

// The wait after `failures` consecutive failures (≥ 1): `base` doubled per failure up to kMaxControllerBackoff
// (or `base`, if larger), scaled by `share` (in [0.5, 1]: the caller's jitter).
std::chrono::milliseconds controller_backoff(int failures, std::chrono::milliseconds base, double share);

// True when `text` (a failed Slurm command's stderr or error message) says slurmctld refused, timed out or could
// not be reached, as opposed to refusing this one request (a bad option, an unknown job).
bool is_controller_trouble(std::string_view text);

// True when sbatch's stderr `err` says slurmctld refused the submission before taking it (rate limit,
// unreachable): trying again cannot run the job twice. "Socket timed out" is not such a refusal: the job may have
// been queued.
bool is_submission_refused(std::string_view err);

}  // namespace nymph::runners::slurm
