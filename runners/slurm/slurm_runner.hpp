#pragma once
// The Slurm runner: renders each attempt into a job directory, submits it with sbatch (a burst of same-shaped
// attempts as one job array), tracks every job with ONE squeue per poll cycle (+ at most one sacct), ships the
// job's output files as log chunks, cancels with scancel, and journals submissions so a restarted manager can
// re-attach to jobs still in Slurm.
//
// Restart protocol for the agent (same launch_dir), through the ResumableRunner part of the interface:
//   1. construct the runner: it reads the journal (journaled(), listed as in_flight()) and compacts it;
//   2. list in_flight() attempts to the control plane when re-registering;
//   3. for each attempt the control plane still wants: co_spawn resume(attempt, reporter) — it behaves like
//      run() from the moment the job was submitted and returns its final update exactly once;
//   4. for each one it no longer wants: co_await abandon(attempt) (scancel, journal done, directory removed).
// Manager shutdown: stop(job, StopReason::shutdown) detaches an attempt — the Slurm job keeps running,
// run()/resume() return at once with a NON-final update (state running, the Slurm id, "left running")
// which the agent must not report as the attempt's end; the journal keeps the entry for step 3.
//
// launch_dir is on a shared filesystem: output files, exit-status files, job directories and the journal are
// read and written on the runner's own I/O threads (runners/slurm/io_pool.hpp), never on the io_context
// thread, so a stalled mount holds up only the jobs whose files it holds. The Slurm command lines and their
// parsers are in slurm/.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "common/concurrency_limit.hpp"
#include "runners/profile.hpp"
#include "runners/runner.hpp"
#include "runners/slurm/array_batcher.hpp"
#include "runners/slurm/io_pool.hpp"
#include "runners/slurm/journal.hpp"
#include "runners/slurm/poll_pacer.hpp"
#include "runners/slurm/tracker.hpp"
#include "slurm/command_runner.hpp"
#include "slurm/options.hpp"

namespace nymph::runners::slurm {

// [runners.slurm], as a value. Durations can be milliseconds in tests.
struct SlurmRunnerConfig {
  std::string enabled = "auto";                      // auto | true | false: read by the agent, not the runner
  // The poll cycle (runners/slurm/poll_pacer.hpp): one squeue (+ at most one sacct) poll_interval after a
  // submission, a cancel, an exit record or a cycle that saw a change; each quiet cycle doubles the wait up to
  // poll_interval_max (0: poll_interval, a fixed rate); jittered by ±poll_jitter.
  std::chrono::milliseconds poll_interval{10'000};
  std::chrono::milliseconds poll_interval_max{0};
  double poll_jitter = 0.2;
  // slurmctld RPCs (each sbatch, squeue and scontrol call, each job id given to scancel) in any window of
  // rpc_budget_window: a call that would exceed it waits. sacct (slurmdbd) is not counted. 0: no budget (the
  // agent always sets one: [runners.slurm] rpc_budget_per_minute, default 60).
  int rpc_budget_per_minute = 0;
  std::chrono::milliseconds rpc_budget_window{60'000};  // a minute; tests shorten it
  // How often launch_dir/exits (kExitRecordDir) is listed for the exit records of ended jobs: one directory
  // listing, no RPC; a new record brings the next cycle forward. 0: never listed.
  std::chrono::milliseconds exit_scan_interval{2'000};
  std::string account, qos, partition;               // site defaults: every sbatch, unless the job or profile sets them
  std::filesystem::path launch_dir;                  // job directories + journal; must be visible to nodes
  int max_jobs = 100;                                // attempts tracked at once; more fail at once
  std::chrono::milliseconds max_poll_duration{24 * 3'600'000};   // running time, from Slurm's start
  std::chrono::milliseconds max_queue_duration{7 * 24 * 3'600'000};  // pending longer: scancel, `failed`
  std::string cluster;                               // "" : sbatch's `N;cluster`, else scontrol's ClusterName
  std::chrono::milliseconds command_timeout{30'000}; // per sbatch/squeue/sacct/scancel invocation
  // Slurm commands (sbatch, squeue, sacct, scancel, scontrol) running at once; more wait their turn, oldest
  // first. Bounds the child processes and pipes a burst can open whatever the RPC budget allows.
  std::size_t max_concurrent_commands = 4;
  std::string sbatch = "sbatch", squeue = "squeue", sacct = "sacct", scancel = "scancel", scontrol = "scontrol";
  bool keep_job_dirs = false;                        // release() keeps the job directory
  std::chrono::milliseconds output_interval{2'000};  // how often a running job's output files are read
  std::size_t output_chunk = 64 * 1024;              // bytes per JobReporter::output call
  int lost_after_cycles = 3;                         // see TrackerConfig
  std::chrono::milliseconds cancel_grace{5 * 60'000};
  ProfileCatalog profiles;                           // approved training profiles (kind=training)
  bool profiles_only = false;                        // refuse kind=command jobs ([runners.process] allow_commands = false)
  int io_threads = 2;                                // threads for launch_dir I/O (shared filesystem)
  // Most command attempts in one sbatch: attempts of the same shape (equal #SBATCH lines) that wait while an
  // sbatch of that shape is in flight go together as the tasks of one job array, each task still its own
  // attempt (own Slurm id "<array>_<i>", journal line, directory, output, cancel and final state). Capped by the
  // cluster's MaxArraySize (read once from `scontrol show config`). 1: one sbatch per attempt.
  std::size_t max_array_tasks = 1000;
  // From this many tracked jobs on, each poll cycle ends by handing the memory freed in it back to the system
  // (malloc_trim: the cycle's squeue rows and sacct records, and what the start-up burst left). 0: never.
  std::size_t trim_from_tracked_jobs = 1000;
  // Fault injection for tests: called (on an I/O thread) once a job directory has been created; an Error
  // fails the preparation there, as a failed write would.
  std::function<Result<void>(const std::filesystem::path& dir)> after_job_dir_created;
  // Fault injection for tests: called (on the journal's I/O strand) before the submission lines of an sbatch are
  // appended; an Error fails the append there, as a failed write or fsync would.
  std::function<Result<void>()> before_journal_append;
};

// Where to resume shipping output after a restart (bytes the control plane already has).
struct OutputOffsets {
  std::uint64_t out = 0;
  std::uint64_t err = 0;
};

class SlurmRunner final : public Runner, public ResumableRunner {
 public:
  // Prepares launch_dir (created 0700 if missing), reads and compacts its journal, opens it for appending.
  // (These start-up steps block the calling thread.) Throws std::runtime_error for start-up errors:
  // launch_dir not absolute or not usable in an sbatch script (spaces, quotes, '%'), cannot be created, or an
  // unreadable journal. All coroutines run on `executor`; destroy the runner only when its io_context no
  // longer runs (a stopped or finished context).
  SlurmRunner(boost::asio::any_io_executor executor, SlurmRunnerConfig config,
              std::unique_ptr<nymph::slurm::CommandRunner> commands, std::shared_ptr<spdlog::logger> logger);
  // Waits for the I/O threads to finish what release() queued (journal lines, directory removals).
  ~SlurmRunner() override;

  std::string_view name() const override { return "slurm"; }

  // survives_agent: sbatch jobs outlive the agent; resumable() is this runner.
  Lifetime lifetime() const override { return Lifetime::survives_agent; }
  ResumableRunner* resumable() override { return this; }

  // Validates and renders `spec` (bad runConfig.slurm, argv, env or job id → `failed` naming what, nothing
  // submitted), submits it with `sbatch --parsable` under a Slurm-scrubbed environment (failure → `failed`
  // with sbatch's stderr; a command attempt that waits for an sbatch of its shape goes with others as a task
  // of one job array, Slurm id "<array>_<i>": see max_array_tasks), journals it, reports `running` with the
  // Slurm id, then tracks it: `pending` with
  // Slurm's reason, `running`, output shipped through reporter.output, and returns the final update once
  // the output is flushed. More than max_jobs attempts at once, or a second attempt of a job already
  // running here, fail at once; so does a kind=command job on a profiles_only runner.
  // kind=training: the profile must be in `profiles` (else `failed`, nothing written or submitted); the
  // checked parameters go to <dir>/input.json and the profile script itself is submitted (see
  // training_sbatch_args; runConfig.slurm adds allow-listed options, and the [runners.slurm] account/qos/
  // partition defaults apply where neither runConfig.slurm nor the script's own #SBATCH lines set them,
  // see script_site_keys) with NYMPH_INPUT, NYMPH_RESULT, NYMPH_JOB_ID, NYMPH_ATTEMPT in its
  // environment. Once Slurm reports COMPLETED, <dir>/result.json is read and checked: the update is
  // succeeded with `result`, or failed saying why. No other final state carries a result.
  boost::asio::awaitable<JobUpdate> run(JobSpec spec, JobReporter& reporter) override;

  // run() through a callback (run() is this with use_awaitable): the attempt is a record of this runner's, and
  // a coroutine of its own exists only while its job directory is prepared and submitted, and again once Slurm
  // runs or ends the job (ten thousand waiting in Slurm's queue hold none). `done` is called on the runner's
  // executor, which must be `ex`'s.
  void launch(boost::asio::any_io_executor ex, JobSpec spec, JobReporter& reporter, AttemptDone done) override;

  // user_cancel, lease_lost, timeout: scancel at once (an immediate poll cycle); the attempt ends when
  // Slurm confirms (`cancelled`). shutdown: detach (see the file comment). Unknown ids are ignored.
  void stop(const std::string& job_id, StopReason why) override;

  // After the final event was delivered: marks the attempt done in the journal and removes its job
  // directory unless keep_job_dirs, in that order, on the I/O threads: returns at once, and the work is done
  // by the time the runner is destroyed. Ignored for unknown, still-running or detached attempts.
  void release(const std::string& job_id) override;

  // Attempts of this launch_dir that were submitted and not released, as found in the journal when the
  // runner was constructed (an entry leaves the list when it is released or abandoned). run() refuses to
  // submit one of these again: resume() it.
  const std::vector<JournalEntry>& journaled() const { return in_flight_; }

  // journaled(), each entry as a runner-neutral record carrying the JournalEntry as its runner_data.
  std::vector<InFlightAttempt> in_flight() const override;

  // resume(entry, reporter) for a record from in_flight(); `failed` for a record without a JournalEntry.
  boost::asio::awaitable<JobUpdate> resume(InFlightAttempt attempt, JobReporter& reporter) override;

  // resume(attempt, reporter) through a callback, tracked at the call: like launch(), a job waiting in Slurm's
  // queue holds no coroutine frame.
  void relaunch(boost::asio::any_io_executor ex, InFlightAttempt attempt, JobReporter& reporter,
                AttemptDone done) override;

  // Re-attaches to a journaled attempt: tracks entry.slurm_job_id like run() does after submission, ships
  // output from `from`, and returns the final update (a training attempt, recognised by the input.json in
  // its directory, gets its result.json checked as in run()). Returns `failed` at once when the job id is already
  // tracked here. Tracking starts at the call, not when the result is first awaited (no frame or I/O of its
  // own before that): await what it returns, the only way to the job's final update.
  boost::asio::awaitable<JobUpdate> resume(JournalEntry entry, JobReporter& reporter, OutputOffsets from = {});

  // Gives up a journaled attempt (from in_flight()) the control plane no longer wants: scancel (one try,
  // bounded by command_timeout), journal done, job directory removed unless keep_job_dirs; all of it done when it
  // returns. Returns scancel's error (the entry stays journaled), or an Error for a record without a JournalEntry.
  boost::asio::awaitable<Result<void>> abandon(InFlightAttempt attempt) override;

  // Number of attempts being tracked (submitted, not ended).
  std::size_t tracked() const { return tracker_.size(); }

  // Number of attempts with a coroutine of their own: those whose job Slurm runs or ended (follow()). One waiting
  // in Slurm's queue, or for its job array's sbatch, has none.
  std::size_t following() const { return following_; }

  // Number of attempts waiting for an sbatch of their shape (to go together as a job array).
  std::size_t waiting_submissions() const { return batcher_.waiting(); }

  // Slurm commands waiting for one of the max_concurrent_commands slots.
  std::size_t waiting_commands() const { return command_slots_.waiting(); }

  // "" while slurmctld answers; while the runner backs off from it, what failed and when it tries again.
  std::string trouble() const override { return trouble_; }
  void on_trouble_change(std::function<void()> changed) override { on_trouble_change_ = std::move(changed); }

 private:
  struct Attempt;
  struct Finished {
    std::filesystem::path dir;
    int attempt = 1;
    bool journaled = false;
  };

  // What to submit, after the job directory has been prepared: sbatch's arguments, and what its environment adds
  // to the agent's. A burst of ten thousand attempts waits as Submissions: the environment itself is built per
  // sbatch call (submit()), not kept in each of them.
  struct Submission {
    std::vector<std::string> argv;  // sbatch and its arguments
    // Training profiles: the job's NYMPH_* variables; the agent's own NYMPH_* variables are then not passed on.
    std::map<std::string, std::string> job_env;
    bool training = false;
    std::optional<std::string> shape;  // its shared_directives, when it may be a task of a job array
  };
  // A submitted attempt: its journal entry with the Slurm id, and whether that entry is on disk.
  struct Sent {
    JournalEntry entry;
    Result<void> journaled;
  };
  // A submission waiting for its shape's submitter (wait_for_array), owned by waiting_ and then by the submitter.
  struct Waiting;
  // The environment sbatch runs with for `s`: the agent's, without Slurm's variables (scrubbed_environment), and
  // for a training profile without the agent's NYMPH_* variables and with the job's (s.job_env).
  static std::map<std::string, std::string> sbatch_environment(const Submission& s);
  using SbatchOptions = std::vector<nymph::slurm::SbatchOption>;
  Result<Submission> prepare_command(const JobSpec& spec, const SbatchOptions& options, bool& created) const;
  Result<Submission> prepare_training(const JobSpec& spec, const Profile& profile, const std::string& input,
                                      const SbatchOptions& options, bool& created) const;
  Result<void> job_dir_created(const std::filesystem::path& dir, bool& created) const;
  boost::asio::awaitable<std::string> cluster_of(const std::string& sbatch_out);
  boost::asio::awaitable<Result<Submission>> prepare(const JobSpec& spec, const Profile* profile, std::string input,
                                                     const SbatchOptions& options);
  // sbatch for `s`, retried while slurmctld refuses it (rate limit); the first try without waiting for the RPC
  // budget when `budget_spent`. `refused` (when given) is set when sbatch answered and said no: nothing was
  // submitted (unlike a timeout, which may have submitted the job).
  boost::asio::awaitable<Result<nymph::slurm::CommandResult>> submit(const Submission& s, bool budget_spent = false,
                                                                     bool* refused = nullptr);
  // One sbatch for `a` alone, then its journal line.
  boost::asio::awaitable<Result<Sent>> submit_alone(const Attempt& a, const Submission& sub, bool budget_spent);
  // Queues `sub` for its shape's submitter (submit_shape), which hands the outcome to submitted(). A waiting
  // attempt has no coroutine frame: ten thousand of them waiting for their arrays cost a Submission each.
  void wait_for_array(Attempt& a, Submission sub);
  // The submitter of one shape: while attempts of it wait, sends the oldest (up to the batch size) in one sbatch.
  boost::asio::awaitable<void> submit_shape(std::string shape);
  // One job array for `tasks` (two or more): the script, the sbatch, one journal write for all of them.
  boost::asio::awaitable<void> submit_array(std::vector<Waiting*> tasks);
  // After sbatch refused an array: the first task alone; refused too, every task fails with that; else the
  // others one by one.
  boost::asio::awaitable<void> submit_one_by_one(std::vector<Waiting*> tasks, const std::string& why);
  // Submits tasks[from...] one sbatch each, each with its own outcome.
  boost::asio::awaitable<void> submit_each(const std::vector<Waiting*>& tasks, std::size_t from);
  // Reads MaxArraySize from `scontrol show config` once, and caps the batch size by it.
  boost::asio::awaitable<void> read_array_cap();
  // The outcome of a's sbatch: reports `running` with the Slurm id and starts tracking, or ends `a` untracked
  // (end_untracked_later). Does not suspend.
  void submitted(Attempt& a, Result<Sent> sent);
  // Sets a's final update `u` and wakes it (wake()): follow() ends the attempt with end_untracked (after a scancel of
  // the Slurm id sbatch gave it, when `scancel`).
  void end_untracked_later(Attempt& a, JobUpdate u, bool scancel);
  // follow()'s end for an attempt whose submission failed: the scancel end_untracked_later asked for, then
  // end_without_tracking. Destroys `a`; returns its final update.
  boost::asio::awaitable<JobUpdate> end_untracked(Attempt& a);
  // run() up to its submission: validates and prepares the job directory, then submits it (an attempt alone) or
  // queues it for its shape's job array (wait_for_array), whose sbatch hands the outcome to submitted(). Returns
  // the attempt, or its final update when it is not tracked (refused, or its directory could not be prepared).
  boost::asio::awaitable<std::variant<Attempt*, JobUpdate>> start(JobSpec spec, JobReporter& reporter);
  std::optional<JobUpdate> refusal(const JobSpec& spec) const;
  // Gives `a` the callback its final update goes to (launch, relaunch, resume), and follows it if it needs it.
  void hand_over(Attempt& a, AttemptDone done);
  // Called whenever Slurm started or ended `a`, its submission failed, or it was detached: wakes its follow()
  // coroutine, or starts one when `a` has been handed over and its job runs or ended. Never runs it inline.
  void wake(Attempt& a);
  // The coroutine of a job Slurm runs (or ended) up to its final update: ships its output while it runs, then
  // finish_following(). Destroys `a`.
  boost::asio::awaitable<JobUpdate> follow(Attempt& a);
  // Hands `u` to `done` later (posted to the runner's executor): never inside the caller.
  void complete(AttemptDone done, JobUpdate u) const;
  // follow() once the job has ended: the rest of its output, its result (training), forgetting it.
  boost::asio::awaitable<JobUpdate> finish_following(Attempt& a);
  // resume() up to tracking, without suspending (ten thousand of them at a restart make no I/O and no frame of
  // their own): tracks `entry` as a new Attempt and returns it, or the final update `failed` when the job is
  // tracked here already.
  std::variant<Attempt*, JobUpdate> attach(JournalEntry entry, JobReporter& reporter, OutputOffsets from);
  boost::asio::awaitable<void> ship_output(Attempt& a, bool to_end);
  JobUpdate end_without_tracking(const std::string& job_id, const std::filesystem::path& dir, JobUpdate u);
  // Starts tracking `a` (submitted: it has its Slurm id), letting go of what only its journal line needs.
  void start_tracking(Attempt& a);
  // Where start() puts the directory of attempt `attempt` of `job_id`: launch_dir / job_dir_name.
  std::string default_job_dir(std::string_view job_id, int attempt) const;
  // The job directory of `a`: its own, or default_job_dir() when tracking let its copy go.
  std::string job_dir(const Attempt& a) const;
  void ensure_poll_loop();
  boost::asio::awaitable<void> poll_loop();
  boost::asio::awaitable<void> run_cycle();
  boost::asio::awaitable<TrackerEvent> perform(const TrackerAction& action);
  boost::asio::awaitable<Result<nymph::slurm::CommandResult>> command(std::vector<std::string> argv);
  // Runs one Slurm command once a max_concurrent_commands slot is free (every command goes through here).
  boost::asio::awaitable<Result<nymph::slurm::CommandResult>> run_in_slot(
      std::vector<std::string> argv, std::optional<std::map<std::string, std::string>> env);
  boost::asio::awaitable<tracker_event::ExitFilesRead> read_exit_files(const std::vector<std::string>& slurm_ids);
  void deliver(std::vector<TrackerReport> reports);
  void request_cycle();
  boost::asio::awaitable<void> wait_for_cycle();
  boost::asio::awaitable<void> list_exit_records();
  boost::asio::awaitable<bool> new_exit_records();
  boost::asio::awaitable<void> within_budget(int rpcs);
  void note_controller_answer(std::string_view what, const Result<nymph::slurm::CommandResult>& r);
  void set_trouble(std::string text);
  std::optional<std::chrono::milliseconds> until_expected_end() const;
  void look_again_at_recorded_ends();

  boost::asio::any_io_executor executor_;
  SlurmRunnerConfig config_;
  std::unique_ptr<nymph::slurm::CommandRunner> commands_;
  ConcurrencyLimit command_slots_;  // max_concurrent_commands: taken around each commands_->run
  std::shared_ptr<spdlog::logger> log_;
  Tracker tracker_;
  std::optional<Journal> journal_;
  std::vector<JournalEntry> in_flight_;
  // By job id: each key views its attempt's job_id (a manager tracks ten thousand; no copy of each id).
  std::map<std::string_view, std::unique_ptr<Attempt>> attempts_;
  std::map<std::string, Finished> finished_;                   // ended, awaiting release()
  std::size_t following_ = 0;                                  // following()
  boost::asio::steady_timer poll_timer_;
  bool poll_running_ = false;
  bool cycle_requested_ = false;
  PollPacer pacer_;
  bool budget_wait_said_ = false;  // the log said calls wait for the RPC budget; cleared when one goes at once
  PacerClock::time_point next_exit_scan_{};
  bool listing_exit_records_ = false;  // a list_exit_records() is in flight
  std::string cycle_trouble_;      // the controller failure of the cycle in progress ("" : none)
  std::string trouble_;            // trouble(), as last announced
  std::function<void()> on_trouble_change_;
  std::optional<std::string> scontrol_cluster_;  // ClusterName, once asked
  ArrayBatcher batcher_;
  std::map<SubmissionTicket, std::unique_ptr<Waiting>> waiting_;  // queued in batcher_, by ticket
  SubmissionTicket next_ticket_ = 0;
  bool array_cap_read_ = false;
  std::minstd_rand random_;
  IoPool io_;  // last: destroyed (joined) first, while everything its work touches still exists
};

}  // namespace nymph::runners::slurm
