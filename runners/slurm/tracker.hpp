#pragma once
// Tracking of submitted Slurm jobs as a sans-io state machine: the poll loop feeds it events (a cycle
// starts, a command finished, exit-status files were read) and performs the action it returns. One cycle is
//   [scancel of jobs to cancel] → ONE squeue for all tracked jobs (final states included: one with its exit
//   code settles the job) → [ONE sacct, bounded by submit time, for the jobs squeue no longer shows] → [read
//   their exit-status files] → done
// Rows about a tracked id that belong to another job (Slurm recycles ids) are ignored: see TrackedJob.
// Nothing here runs a process, reads a file or sleeps; tests step it with made-up command results.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/error.hpp"
#include "runners/runner.hpp"
#include "slurm/command_runner.hpp"
#include "slurm/parse.hpp"

namespace nymph::runners::slurm {

using nymph::slurm::CommandResult;
using WallClock = std::chrono::system_clock;

struct TrackerConfig {
  // A job RUNNING longer than this (since Slurm started it: squeue's start time, else the cycle that first saw
  // it running) is scancelled and ends `failed`.
  std::chrono::milliseconds max_poll_duration{std::chrono::hours(24)};
  // After such a scancel, how long Slurm may take to confirm before the job is given up as `lost`.
  std::chrono::milliseconds cancel_grace{std::chrono::minutes(5)};
  // Consecutive cycles a job may be absent from squeue without any final record (sacct, exit-status file)
  // before it is reported `lost`. Covers sacct lag and slow shared filesystems.
  int lost_after_cycles = 3;
  // A job not yet started this long after its submission is scancelled and ends `failed` ("queued longer
  // than ...").
  std::chrono::milliseconds max_queue_duration{std::chrono::hours(24 * 7)};
};

// How far a Slurm submit time may lie before our own lower bound and still be the job we submitted: clock skew
// between this host and slurmctld's (MUNGE refuses credentials beyond its 300 s TTL, so a working cluster's
// skew is smaller) plus Slurm's one-second resolution. Also what sacct's -S goes back beyond the lower bound.
inline constexpr std::chrono::minutes kSubmitTimeMargin{5};

// What the tracker's user keeps for each job (the slurm runner's attempt). The tracker holds a pointer to it with
// the job and hands it back with each report (TrackerReport::record, Tracker::record_of), so its user keeps no map
// of its own from Slurm id to record (a manager tracks ten thousand jobs). A record must outlive its job's
// tracking: until its final report, or remove().
class TrackedRecord {
 protected:
  ~TrackedRecord() = default;
};

// A job to track, with what identifies it besides its id (Slurm recycles ids after a slurmctld reset or a
// wrap-around): a row about `slurm_id` is this job's only when its name is `name` (when set), its cluster is
// `cluster` (when both are known), and its submit time is not before `submitted_at` - kSubmitTimeMargin.
struct TrackedJob {
  std::string slurm_id;
  WallClock::time_point submitted_at;  // a lower bound of Slurm's submit time (taken just before sbatch)
  std::string name;                    // the Slurm job name ("" for none: not checked)
  std::string cluster;                 // the cluster ("" for unknown: not checked)
  TrackedRecord* record = nullptr;     // handed back with its reports
};

// Why we asked Slurm to cancel a job; decides how a CANCELLED end is reported.
enum class CancelCause : std::uint8_t { user, lease_lost, max_poll_duration, max_queue_duration };

namespace tracker_event {
struct CycleStart {};                               // the poll timer fired (or a cancel asked for a cycle)
struct ScancelDone { Result<CommandResult> result; };
struct SqueueDone { Result<CommandResult> result; };
struct SacctDone { Result<CommandResult> result; };
struct ExitFilesRead {                              // slurm id → status in its exit-status file (nullopt: none)
  std::map<std::string, std::optional<int>> status;
};
}  // namespace tracker_event

using TrackerEvent = std::variant<tracker_event::CycleStart, tracker_event::ScancelDone, tracker_event::SqueueDone,
                                  tracker_event::SacctDone, tracker_event::ExitFilesRead>;

// What the driver must do next.
enum class TrackerStep {
  scancel,          // run scancel with `slurm_ids`, then resume with ScancelDone
  squeue,           // run squeue for `slurm_ids`, then resume with SqueueDone
  sacct,            // run sacct -X -S `sacct_since` for `slurm_ids`, then resume with SacctDone
  read_exit_files,  // read the exit-status file of each of `slurm_ids`, then resume with ExitFilesRead
  cycle_done,       // the cycle is over: wait for the next poll interval, then resume with CycleStart
};

// A state change of one tracked job. When `update.state` is final the job is no longer tracked.
struct TrackerReport {
  std::string slurm_id;
  JobUpdate update;
  TrackedRecord* record = nullptr;  // the job's TrackedJob::record
};

struct TrackerAction {
  TrackerStep step = TrackerStep::cycle_done;
  std::vector<std::string> slurm_ids;    // arguments of the step
  WallClock::time_point sacct_since{};   // sacct: records of jobs that existed at or after this time
  std::vector<TrackerReport> reports;    // deliver these before performing the step
  std::vector<std::string> warnings;     // for the log: failed or slow Slurm commands, give-ups
};

class Tracker {
 public:
  explicit Tracker(TrackerConfig config) : config_(config) {}

  // Starts tracking `job`. A final state in squeue (with squeue's exit code) settles it; sacct and the
  // exit-status file serve once squeue no longer shows it. A job added during a cycle joins at the next cycle's squeue (it is never taken
  // for "gone" because an earlier query did not list it). Adding a tracked id again does nothing.
  void add(TrackedJob job);

  // Stops tracking without a final report (manager shutdown: the Slurm job keeps running). Unknown ids are
  // ignored; results about a removed job that arrive later are ignored.
  void remove(std::string_view slurm_id);

  // Asks for scancel of a tracked job at the next cycle start. The job stays tracked until Slurm confirms
  // its end, which is then reported `cancelled` (user, lease_lost). Unknown ids are ignored.
  void request_cancel(std::string_view slurm_id, CancelCause cause);

  bool tracking(std::string_view slurm_id) const { return jobs_.find(slurm_id) != jobs_.end(); }
  // When Slurm started the tracked job `slurm_id`, once a cycle has seen it running (nullopt before, or unknown).
  std::optional<WallClock::time_point> started_at(std::string_view slurm_id) const;
  // The record tracked with `slurm_id` (TrackedJob::record), or null when it is not tracked.
  TrackedRecord* record_of(std::string_view slurm_id) const;
  std::size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }
  // True once sacct has said accounting storage is disabled; sacct is not run again after that.
  bool accounting_disabled() const { return accounting_disabled_; }
  // True between a CycleStart and the cycle_done action.
  bool in_cycle() const { return stage_ != Stage::idle; }

  // Advances the cycle with `ev` at wall-clock time `now` and returns what to do next. Throws
  // std::logic_error when `ev` does not answer the last action (a driver bug).
  TrackerAction resume(const TrackerEvent& ev, WallClock::time_point now);

 private:
  enum class Evidence : std::uint8_t { none, sacct_not_final, sacct_absent, sacct_unavailable, no_accounting };
  // A moment or none in one word (none is time_point::min()), where std::optional takes two: ten thousand jobs
  // keep two of them.
  class MaybeTime {
   public:
    MaybeTime& operator=(WallClock::time_point t) {
      t_ = t;
      return *this;
    }
    explicit operator bool() const { return t_ != kNone; }
    WallClock::time_point operator*() const { return t_; }

   private:
    static constexpr WallClock::time_point kNone = WallClock::time_point::min();
    WallClock::time_point t_ = kNone;
  };
  struct Job {
    WallClock::time_point submitted_at;
    // The job's name and cluster, hashed (identity_hash: 0 when not known, so not checked): ten thousand jobs keep
    // 16 bytes each instead of two strings. A row with another name of the same 64-bit hash would pass for the
    // job (odds about 2^-64, and only for a row about a recycled id); its submit time is still checked.
    std::size_t name_hash = 0, cluster_hash = 0;
    MaybeTime started_at;  // when Slurm started it, once seen running
    MaybeTime cancel_sent_at;
    // The last non-final report's state and message, hashed (dedup; never 0 once set): ten thousand jobs keep
    // 8 bytes each, not a string on the heap.
    std::size_t last_report = 0;
    TrackedRecord* record = nullptr;
    int missing_cycles = 0;
    Evidence evidence = Evidence::none;
    std::optional<CancelCause> cancel;
    bool cancel_resend = false;     // still active in squeue after a scancel: send it again
  };
  // Ten thousand of them are tracked: eight words each (64 B on x86-64), kept so.
  static_assert(sizeof(Job) <= 8 * sizeof(void*));
  enum class Stage { idle, scancel, squeue, sacct, exit_files };

  TrackerAction start_cycle(WallClock::time_point now);
  TrackerAction query_squeue(TrackerAction a);
  TrackerAction on_squeue(const Result<CommandResult>& r, TrackerAction a);
  TrackerAction after_squeue(TrackerAction a);
  TrackerAction on_sacct(const Result<CommandResult>& r, TrackerAction a);
  TrackerAction on_exit_files(const tracker_event::ExitFilesRead& ev, TrackerAction a);
  TrackerAction finish_cycle(TrackerAction a);
  // One row of this cycle's squeue: a job of ours that it shows active or ended is added to `shown` (a view of the
  // row's id) and reported or finished in `a`.
  void on_squeue_row(const nymph::slurm::SqueueJob& row, std::vector<std::string_view>& shown, TrackerAction& a);
  void report_active(const nymph::slurm::SqueueJob& row, TrackerAction& a, WallClock::time_point now);
  void finish(const std::string& id, JobUpdate u, TrackerAction& a);
  bool ours(const Job& job, std::string_view name, std::string_view cluster, std::optional<std::int64_t> submit) const;
  JobUpdate final_from_state(const std::string& id, const Job& job, const std::string& state,
                             const std::string& state_text, int exit_code, int signal) const;
  JobUpdate final_from_exit_file(const std::string& id, const Job& job, int status) const;
  JobUpdate lost(const std::string& id, const Job& job) const;

  TrackerConfig config_;
  std::map<std::string, Job, std::less<>> jobs_;
  Stage stage_ = Stage::idle;
  std::vector<std::string> cancelling_;  // ids given to scancel in this cycle
  std::vector<std::string> queried_;   // ids asked of squeue in this cycle
  std::vector<std::string> missing_;   // of those, the ones squeue no longer shows
  bool accounting_disabled_ = false;
  WallClock::time_point now_{};        // of the event being handled
};


// Base message of reports: "Slurm job N: ...".
std::string slurm_job_label(std::string_view slurm_id);

}  // namespace nymph::runners::slurm
