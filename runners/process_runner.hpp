#pragma once
// The `process` runner: runs a job as a local child process of the agent (see issue 4).
#include <spdlog/logger.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "runners/profile.hpp"
#include "runners/runner.hpp"

namespace boost::asio {
class thread_pool;
}

namespace nymph::runners {

// Settings of the process runner ([runners.process] plus the worker's work_dir), passed by value.
struct ProcessRunnerConfig {
  // Root of the per-attempt work directories `<work_dir>/<jobId>-<attempt>` (created 0700 when missing;
  // a relative path resolves against the agent's working directory when run() starts).
  std::filesystem::path work_dir = "work";
  // Whether `command` jobs (run by /bin/sh -c) are accepted; argv jobs are unless profiles_only.
  bool allow_commands = false;
  // A profiles-only worker ([runners.process] allow_commands = false): every kind=command job (argv or
  // command) fails at once with a message saying so; only approved training profiles run.
  bool profiles_only = false;
  // The approved training profiles (kind=training jobs name one of them).
  ProfileCatalog profiles;
  // Timeout or stop: SIGTERM to the job's process group, this long, then SIGKILL.
  std::chrono::milliseconds kill_grace{10'000};
  // Keep work directories after release() (for debugging).
  bool keep_work_dirs = false;
  // Extra agent environment variables never passed to jobs: exact names, or prefixes written "PREFIX*".
  // Always removed on top of these: NYMPH_*, SLURM_*, SBATCH_*, SALLOC_*.
  std::vector<std::string> scrub_env;
  // Output is handed to the reporter in chunks of at most this many bytes per stream...
  std::size_t output_chunk = 64 * 1024;
  // ...or once the oldest unsent byte is this old.
  std::chrono::milliseconds output_flush{250};
};

// Runs `kind=command` jobs: `argv` verbatim, or `command` through /bin/sh -c when allowed; and `kind=training`
// jobs: the approved profile's script with argv {script, <dir>/input.json, <dir>/result.json}, the checked
// parameters written to input.json first (see runners/profile.hpp). Each attempt runs in its own process group
// inside a fresh work directory, with the agent's environment minus its secrets and inherited Slurm
// variables, plus NYMPH_JOB_ID, NYMPH_ATTEMPT, NYMPH_WORK_DIR (and PWD; for training also NYMPH_INPUT and
// NYMPH_RESULT). Single-threaded: all calls on the io_context thread that runs run().
class ProcessRunner final : public Runner {
 public:
  // `logger` must not be null (use nymph::null_logger()). Does not touch the filesystem.
  ProcessRunner(ProcessRunnerConfig config, std::shared_ptr<spdlog::logger> logger);
  // Waits for work directories being removed in the background (see release()). Every run() must have
  // finished before.
  ~ProcessRunner() override;

  // "process".
  std::string_view name() const override;

  // stops_with_agent: each job is a child of the agent. Not resumable (resumable() is nullptr).
  Lifetime lifetime() const override { return Lifetime::stops_with_agent; }

  // Runs one attempt (see Runner::run). Reports `running` once the process has started; stdout and stderr
  // go to reporter.output() in chunks with contiguous offsets, and the next read waits while output() is
  // suspended. Returns: succeeded (exit 0; for training only with a valid result.json, attached as
  // `result`); failed with exit_code or signal and a message (non-zero exit, killed by a signal, "timed out
  // after Ns", a training profile that wrote no or an invalid result.json, or bad input: invalid job id or
  // env name, command not allowed, profiles-only worker, unknown profile, bad parameters, missing
  // executable, work directory not creatable: nothing is started then); cancelled after stop() with user_cancel,
  // lease_lost or shutdown. Never throws for job problems. If the caller cancels it, the process group is
  // still terminated (TERM, grace, KILL) before the exception propagates.
  boost::asio::awaitable<JobUpdate> run(JobSpec spec, JobReporter& reporter) override;

  // Stops the running attempt of `job_id`: run() sends SIGTERM to its group, SIGKILL after kill_grace, and
  // returns cancelled (or failed "timed out" for StopReason::timeout). Returns at once; unknown ids are
  // ignored, as are stops after the process has exited.
  void stop(const std::string& job_id, StopReason why) override;

  // Like stop(), but without the kill grace: SIGKILL to the job's group at once, also when a stop() is already
  // waiting out its grace. run() returns as after stop(why) (the first stop's reason wins).
  void kill(const std::string& job_id, StopReason why) override;

  // Removes the work directories of `job_id`'s finished attempts unless keep_work_dirs: each is renamed
  // away at once (its path is free again when this returns) and deleted on a background thread, so a
  // large tree never blocks the io_context. The directory of an attempt still inside run() is left alone.
  // Unknown ids are ignored. Never throws (failures are logged).
  void release(const std::string& job_id) override;

  // Number of attempts currently inside run().
  std::size_t active() const { return attempts_.size(); }

 private:
  struct Attempt;

  Result<std::filesystem::path> make_work_dir(const JobSpec& spec);
  void discard_dir(const std::filesystem::path& dir);

  ProcessRunnerConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  std::map<std::string, Attempt*> attempts_;                        // by job id, while in run()
  std::map<std::string, std::vector<std::filesystem::path>> dirs_;  // by job id, until release()
  std::unique_ptr<boost::asio::thread_pool> remover_;               // created on first removal
  std::uint64_t removals_ = 0;
};

}  // namespace nymph::runners
