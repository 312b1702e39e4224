#pragma once
// Parsers for what sbatch, squeue, sacct and sacctmgr print (the command lines are in slurm/commands.hpp), and
// the meaning of Slurm job states.
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "slurm/text.hpp"

namespace nymph::slurm {

// True when `id` can be a job id as squeue and sacct print it ("42", "42_3", "42_[1-5%2]", "42+1", "42.batch"):
// 1 to 64 printable ASCII characters, no space. Rows whose id is not are refused by the parsers below (an id is
// a map key and an scancel/squeue argument: a blank or control character would make it another job's).
bool is_job_id(std::string_view id);

// Parses sbatch's standard output: `N`, `N;cluster` (--parsable) or `Submitted batch job N[ on cluster C]`.
// Surrounding whitespace and blank lines are ignored; the last non-empty line counts. Returns the job id
// ("N"), or an Error quoting the output.
Result<std::string> parse_sbatch_output(std::string_view out);

// The cluster in sbatch's `N;cluster` answer (--parsable on a multi-cluster setup), or "" when it names none.
std::string parse_sbatch_cluster(std::string_view out);

// One line of squeue in kSqueueFormat (`squeue --noheader -o "%i|%T|%r"`).
struct SqueueRow {
  std::string job_id;
  std::string state;   // e.g. PENDING, RUNNING, COMPLETING
  std::string reason;  // e.g. Resources, JobHeldUser, None
};

// The squeue format string that parse_squeue reads.
inline constexpr std::string_view kSqueueFormat = "%i|%T|%r";

// Parses squeue's output in kSqueueFormat. Blank lines are skipped. A line without exactly three fields, or
// whose id is not is_job_id or state is empty, is an Error quoting it.
Result<std::vector<SqueueRow>> parse_squeue(std::string_view out);

// One line of squeue in kSqueueJobFormat, as the Slurm runner's tracking reads it (squeue_jobs_argv): final
// states included (`-t all`), and what identifies a job besides its id. Its text fields view the squeue output
// it was parsed from, which must outlive it: a cycle over ten thousand jobs copies none of them.
struct SqueueJob {
  std::string_view job_id;
  std::string_view state;             // e.g. PENDING, RUNNING, COMPLETING, COMPLETED, FAILED
  std::string_view reason;            // e.g. Resources, None
  std::optional<int> wait_status;     // exit_code: the raw wait status (exit 3 → 768, SIGTERM → 15)
  std::optional<std::int64_t> submit_time;  // seconds since the epoch (SLURM_TIME_FORMAT=%s), if printed
  std::optional<std::int64_t> start_time;   // actual start (running or ended), expected one (pending), if any
  std::string_view cluster;           // "" when not printed
  std::string_view name;              // the job name (last field: it may contain '|')
};

// The squeue -O field list parse_squeue_jobs reads. Times are epoch seconds when squeue runs with
// SLURM_TIME_FORMAT=%s (see kEpochTimeFormat); other values ("N/A", "Unknown", a date) read as absent.
inline constexpr std::string_view kSqueueJobFormat =
    "JobArrayID:|,State:|,Reason:|,exit_code:|,SubmitTime:|,StartTime:|,Cluster:|,Name:";

// The value of SLURM_TIME_FORMAT under which squeue and sacct print times as epoch seconds.
inline constexpr std::string_view kEpochTimeFormat = "%s";

// Parses squeue's output in kSqueueJobFormat; the rows view `out`. Blank lines are skipped. A line with fewer
// than eight fields, or without an id (is_job_id) or a state, is an Error quoting it.
Result<std::vector<SqueueJob>> parse_squeue_jobs(std::string_view out);

// Reads squeue's output as parse_squeue_jobs does, but calls `on_row` with each row in turn instead of holding
// them all (a cycle over ten thousand jobs then holds one row at a time). Every line is checked first: when one
// cannot be read, `on_row` is never called and the Error is parse_squeue_jobs'. Returns the number of rows.
Result<std::size_t> for_each_squeue_job(std::string_view out, const std::function<void(const SqueueJob&)>& on_row);

// The exit code and signal of a raw wait status: {status >> 8, 0} for an exit, {0, signal} for a signal death.
std::pair<int, int> decode_wait_status(int status);

// True when squeue's stderr says the (single) requested job id is unknown to slurmctld, i.e. it has been
// purged: `slurm_load_jobs error: Invalid job id specified`.
bool squeue_says_invalid_job(std::string_view err);

// One line of `sacct -X -n -P -o JobID,State,ExitCode`.
struct SacctRow {
  std::string job_id;
  std::string state;       // first word: CANCELLED for "CANCELLED by 1001"
  std::string state_text;  // as printed
  int exit_code = 0;       // before the ':'
  int signal = 0;          // after the ':'
};

// The sacct field list that parse_sacct reads.
inline constexpr std::string_view kSacctFormat = "JobID,State,ExitCode";

// Parses sacct's output. Step lines (ids with a '.') are skipped; when a job appears more than once
// (requeued), the last line wins. A malformed line (also: an id that is not is_job_id) is an Error quoting it.
Result<std::vector<SacctRow>> parse_sacct(std::string_view out);

// One line of `sacct -X -n -P -o kSacctJobFormat`, as the Slurm runner's tracking reads it.
struct SacctJob {
  std::string job_id;
  std::string state;       // first word: CANCELLED for "CANCELLED by 1001"
  std::string state_text;  // as printed
  int exit_code = 0;
  int signal = 0;
  std::optional<std::int64_t> submit_time;  // seconds since the epoch (SLURM_TIME_FORMAT=%s), if printed
  std::string cluster;
  std::string name;        // the job name (last field: it may contain '|')
};

// The sacct field list parse_sacct_jobs reads.
inline constexpr std::string_view kSacctJobFormat = "JobID,State,ExitCode,Submit,Cluster,JobName";

// Parses sacct's output in kSacctJobFormat. Step lines (ids with a '.') are skipped; every job line is kept,
// in order (a recycled id can appear more than once: the caller picks by name and submit time). A
// malformed line is an Error quoting it.
Result<std::vector<SacctJob>> parse_sacct_jobs(std::string_view out);

// True when sacct's stderr says accounting is not configured ("Slurm accounting storage is disabled").
bool sacct_says_accounting_disabled(std::string_view err);

// What a Slurm state means for tracking.
enum class SlurmPhase {
  pending,   // PENDING, CONFIGURING, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, RESV_DEL_HOLD, ...
  running,   // RUNNING, COMPLETING, SUSPENDED, STOPPED, SIGNALING, STAGE_OUT, RESIZING
  finished,  // COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, BOOT_FAIL,
             // DEADLINE, REVOKED, SPECIAL_EXIT
  unknown,   // anything else
};

// The phase of a state word (the first word: "CANCELLED by 0" → CANCELLED). Case-sensitive, as Slurm prints.
SlurmPhase phase_of(std::string_view state);

// The first line of sacctmgr's answer for default_account_argv, trimmed: the account, or "" when none is set.
std::string parse_default_account(std::string_view out);

// The value of `ClusterName = NAME` in `scontrol show config` output, or "" when there is none.
std::string parse_cluster_name(std::string_view out);

// The value of `MaxArraySize = N` in `scontrol show config` output (job arrays take indices 0 to N-1), or nullopt
// when there is none or it is not a number.
std::optional<std::size_t> parse_max_array_size(std::string_view out);

}  // namespace nymph::slurm
