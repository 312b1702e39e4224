#pragma once
// Tracking of submitted Slurm jobs as a sans-io state machine: the poll loop feeds it events (a cycle
// starts, a command finished, exit-status files were read) and performs the action it returns. One cycle is
//   [scancel of jobs to cancel] → ONE squeue for all tracked jobs → [ONE sacct for the jobs squeue no longer
//   shows] → [read their exit-status files] → done
// Nothing here runs a process, reads a file or sleeps; tests step it with made-up command results.
#include <chrono>
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
using nymph::slurm::SacctRow;
using nymph::slurm::SqueueRow;
using WallClock = std::chrono::system_clock;

struct TrackerConfig {
  // A job tracked longer than this (since submission) is scancelled and ends `failed`.
  std::chrono::milliseconds max_poll_duration{std::chrono::hours(24)};
  // After that scancel, how long Slurm may take to confirm before the job is given up as `lost`.
  std::chrono::milliseconds cancel_grace{std::chrono::minutes(5)};
  // Consecutive cycles a job may be absent from squeue without any final record (sacct, exit-status file)
  // before it is reported `lost`. Covers sacct lag and slow shared filesystems.
  int lost_after_cycles = 3;
};

// A job to track.
struct TrackedJob {
  std::string slurm_id;
  WallClock::time_point submitted_at;
};

// Why we asked Slurm to cancel a job; decides how a CANCELLED end is reported.
enum class CancelCause { user, lease_lost, max_poll_duration };

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
  sacct,            // run sacct -X for `slurm_ids`, then resume with SacctDone
  read_exit_files,  // read the exit-status file of each of `slurm_ids`, then resume with ExitFilesRead
  cycle_done,       // the cycle is over: wait for the next poll interval, then resume with CycleStart
};

// A state change of one tracked job. When `update.state` is final the job is no longer tracked.
struct TrackerReport {
  std::string slurm_id;
  JobUpdate update;
};

struct TrackerAction {
  TrackerStep step = TrackerStep::cycle_done;
  std::vector<std::string> slurm_ids;    // arguments of the step
  std::vector<TrackerReport> reports;    // deliver these before performing the step
  std::vector<std::string> warnings;     // for the log: failed or slow Slurm commands, give-ups
};

class Tracker {
 public:
  explicit Tracker(TrackerConfig config) : config_(config) {}

  // Starts tracking `job`. A job added during a cycle joins at the next cycle's squeue (it is never taken
  // for "gone" because an earlier query did not list it). Adding a tracked id again does nothing.
  void add(TrackedJob job);

  // Stops tracking without a final report (manager shutdown: the Slurm job keeps running). Unknown ids are
  // ignored; results about a removed job that arrive later are ignored.
  void remove(std::string_view slurm_id);

  // Asks for scancel of a tracked job at the next cycle start. The job stays tracked until Slurm confirms
  // its end, which is then reported `cancelled` (user, lease_lost). Unknown ids are ignored.
  void request_cancel(std::string_view slurm_id, CancelCause cause);

  bool tracking(std::string_view slurm_id) const { return jobs_.find(slurm_id) != jobs_.end(); }
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
  enum class Evidence { none, sacct_not_final, sacct_absent, sacct_unavailable, no_accounting };
  struct Job {
    WallClock::time_point submitted_at;
    std::optional<CancelCause> cancel;
    std::optional<WallClock::time_point> cancel_sent_at;
    bool cancel_resend = false;     // still active in squeue after a scancel: send it again
    std::string last_report;        // state+message of the last non-final report (dedup)
    int missing_cycles = 0;
    Evidence evidence = Evidence::none;
  };
  enum class Stage { idle, scancel, squeue, sacct, exit_files };

  TrackerAction start_cycle(WallClock::time_point now);
  TrackerAction query_squeue(TrackerAction a);
  TrackerAction on_squeue(const Result<CommandResult>& r, TrackerAction a);
  TrackerAction after_squeue(TrackerAction a);
  TrackerAction on_sacct(const Result<CommandResult>& r, TrackerAction a);
  TrackerAction on_exit_files(const tracker_event::ExitFilesRead& ev, TrackerAction a);
  TrackerAction finish_cycle(TrackerAction a);
  void report_active(const SqueueRow& row, TrackerAction& a);
  void finish(const std::string& id, JobUpdate u, TrackerAction& a);
  JobUpdate final_from_sacct(const std::string& id, const Job& job, const SacctRow& row) const;
  JobUpdate final_from_exit_file(const std::string& id, const Job& job, int status) const;
  JobUpdate lost(const std::string& id, const Job& job) const;

  TrackerConfig config_;
  std::map<std::string, Job, std::less<>> jobs_;
  Stage stage_ = Stage::idle;
  std::vector<std::string> cancelling_;  // ids given to scancel in this cycle
  std::vector<std::string> queried_;   // ids asked of squeue in this cycle
  std::vector<std::string> missing_;   // of those, the ones squeue no longer shows
  bool accounting_disabled_ = false;
};

// Base message of reports: "Slurm job N: ...".
std::string slurm_job_label(std::string_view slurm_id);

}  // namespace nymph::runners::slurm
