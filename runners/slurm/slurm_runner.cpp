#include "runners/slurm/slurm_runner.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/coroutine_warning.hpp"
#include "runners/profile.hpp"
#include "runners/slurm/script.hpp"
#include "slurm/commands.hpp"
#include "slurm/parse.hpp"

namespace nymph::runners::slurm {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace cli = nymph::slurm;

JobUpdate failed_update(std::string message, std::optional<std::string> slurm_id = std::nullopt) {
  JobUpdate u;
  u.state = JobState::failed;
  u.message = std::move(message);
  u.slurm_job_id = std::move(slurm_id);
  return u;
}

Result<void> write_file(const fs::path& path, const std::string& text, fs::perms perms) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return fail("cannot write " + path.string());
  std::error_code ec;
  fs::permissions(path, perms, ec);
  return {};
}

// Reads `path` into an int when it holds exactly one decimal number and a newline (what the trap writes).
std::optional<int> read_status_file(const fs::path& path) {
  std::ifstream in(path);
  int v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

// One stream's output file, read from a byte offset on. The file is opened for each read and closed again:
// a thousand tracked jobs must not hold two thousand descriptors.
class OutputTail {
 public:
  OutputTail(fs::path path, Stream stream, std::uint64_t offset) : path_(std::move(path)), stream_(stream), offset_(offset) {}
  // The next at most `max` bytes (empty at the current end of the file or before it exists).
  std::string next(std::size_t max) const {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string buf(max, '\0');
    ssize_t n;
    do n = ::pread(fd, buf.data(), max, static_cast<off_t>(offset_));
    while (n < 0 && errno == EINTR);
    ::close(fd);
    buf.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return buf;
  }
  Stream stream() const { return stream_; }
  std::uint64_t offset() const { return offset_; }
  void advance(std::size_t n) { offset_ += n; }

 private:
  fs::path path_;
  Stream stream_;
  std::uint64_t offset_;
};

}  // namespace

struct SlurmRunner::Attempt {
  Attempt(asio::any_io_executor ex, JournalEntry e, JobReporter& r, OutputOffsets from)
      : entry(std::move(e)), reporter(&r), wake(ex),
        out(entry.dir / kStdoutFile, Stream::out, from.out), err(entry.dir / kStderrFile, Stream::err, from.err) {}
  JournalEntry entry;
  JobReporter* reporter;
  asio::steady_timer wake;                 // cancelled to wake follow() early (final update, detach)
  std::optional<JobUpdate> final;
  bool detached = false;
  bool training = false;                   // a training profile: result.json is read once it succeeded
  std::optional<StopReason> stop_requested;  // stop() before the Slurm id was known
  OutputTail out, err;
};

SlurmRunner::SlurmRunner(asio::any_io_executor executor, SlurmRunnerConfig config,
                         std::unique_ptr<cli::CommandRunner> commands, std::shared_ptr<spdlog::logger> logger)
    : executor_(std::move(executor)),
      config_(std::move(config)),
      commands_(std::move(commands)),
      log_(std::move(logger)),
      tracker_(TrackerConfig{config_.max_poll_duration, config_.cancel_grace, config_.lost_after_cycles}),
      poll_timer_(executor_),
      random_(std::random_device{}()) {
  if (auto r = cli::check_sbatch_path(config_.launch_dir); !r) throw std::runtime_error("[runners.slurm] launch_dir: " + r.error().message);
  std::error_code ec;
  fs::create_directories(config_.launch_dir, ec);
  if (ec) throw std::runtime_error("[runners.slurm] cannot create launch_dir " + config_.launch_dir.string() + ": " + ec.message());
  const fs::path path = config_.launch_dir / kJournalFile;
  in_flight_ = read_journal(path).value();
  compact_journal(path, in_flight_).value();
  journal_.emplace(Journal::open(path).value());
  if (!in_flight_.empty()) log_->info("slurm journal {}: {} attempt(s) in flight", path.string(), in_flight_.size());
}

SlurmRunner::~SlurmRunner() = default;

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<JobUpdate> SlurmRunner::run(JobSpec spec, JobReporter& reporter) {
  const bool training = spec.kind == "training";
  if (!training && config_.profiles_only)
    co_return failed_update("this worker runs approved training profiles only ([runners.process] allow_commands = "
                            "false): argv and command jobs are refused");
  // A profile's own #SBATCH lines decide its resources: site defaults on the command line would override them.
  cli::OptionDefaults defaults{config_.account, config_.qos, config_.partition};
  if (training) defaults = {};
  auto options = cli::validate_options(spec.slurm_options, defaults);
  if (!options) co_return failed_update(options.error().message);
  const Profile* profile = nullptr;
  std::string input;
  if (training) {
    auto p = resolve_training(config_.profiles, spec);
    if (!p) co_return failed_update(p.error().message);
    auto text = render_input(**p, spec.parameters);
    if (!text) co_return failed_update(text.error().message);
    profile = *p;
    input = std::move(*text);
  }
  if (attempts_.count(spec.job_id)) co_return failed_update("job " + spec.job_id + " is already running on this runner");
  if (attempts_.size() >= static_cast<std::size_t>(config_.max_jobs))
    co_return failed_update("the slurm runner is at capacity (max_jobs = " + std::to_string(config_.max_jobs) + ")");
  for (const auto& e : in_flight_) {
    if (e.job_id == spec.job_id && e.attempt == spec.attempt)
      co_return failed_update("job " + spec.job_id + " attempt " + std::to_string(spec.attempt) + " is Slurm job " +
                              e.slurm_job_id + " from before the restart: resume() it instead", e.slurm_job_id);
  }
  auto sub = profile ? prepare_training(spec, *profile, input, *options) : prepare_command(spec, *options);
  if (!sub) co_return failed_update(sub.error().message);
  const fs::path* dir = &sub->dir;

  JournalEntry entry{spec.job_id, spec.attempt, spec.lease_id, "", *dir, WallClock::now()};
  auto owned = std::make_unique<Attempt>(executor_, entry, reporter, OutputOffsets{});
  Attempt& a = *owned;
  a.training = sub->training;
  attempts_.emplace(spec.job_id, std::move(owned));

  auto slurm_id = co_await submit(*sub);
  if (!slurm_id) co_return end_without_tracking(spec.job_id, *dir, failed_update(slurm_id.error().message));
  a.entry.slurm_job_id = *slurm_id;
  a.entry.submitted_at = WallClock::now();
  if (auto j = journal_->append(a.entry); !j) {
    std::vector<std::string> ids{*slurm_id};
    co_await command(cli::scancel_argv(config_.scancel, ids));
    co_return end_without_tracking(spec.job_id, *dir, failed_update(j.error().message + "; Slurm job " + *slurm_id + " cancelled", *slurm_id));
  }
  log_->info("job {} attempt {}: submitted as Slurm job {} ({})", spec.job_id, spec.attempt, *slurm_id, dir->string());
  JobUpdate running;
  running.state = JobState::running;
  running.slurm_job_id = *slurm_id;
  running.message = "submitted as Slurm job " + *slurm_id;
  reporter.update(running);
  start_tracking(a);
  co_return co_await follow(a, {});
}
NYMPH_GCC_PR109224_END

// Removes whatever a previous run left at the attempt's directory and creates it afresh, mode 0700.
Result<fs::path> SlurmRunner::fresh_dir(const JobSpec& spec) {
  const fs::path dir = config_.launch_dir / job_dir_name(spec.job_id, spec.attempt);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create job directory " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  return dir;
}

Result<SlurmRunner::Submission> SlurmRunner::prepare_command(const JobSpec& spec, const SbatchOptions& options) {
  if (auto id = check_job_id(spec.job_id); !id) return id.error();
  const fs::path planned = config_.launch_dir / job_dir_name(spec.job_id, spec.attempt);
  auto rendered = render_job(spec, planned, options);
  if (!rendered) return rendered.error();
  auto dir = fresh_dir(spec);
  if (!dir) return dir.error();
  if (auto w = write_file(*dir / kScriptFile, rendered->script, fs::perms::owner_read | fs::perms::owner_write); !w) return w.error();
  if (rendered->command) {
    if (auto w = write_file(*dir / kCommandFile, *rendered->command, fs::perms::owner_read | fs::perms::owner_write); !w)
      return w.error();
  }
  return Submission{*dir, cli::sbatch_file_argv(config_.sbatch, (*dir / kScriptFile).string()),
                    cli::scrubbed_environment(), false};
}

Result<SlurmRunner::Submission> SlurmRunner::prepare_training(const JobSpec& spec, const Profile& profile,
                                                              const std::string& input,
                                                              const SbatchOptions& options) {
  const fs::path planned = config_.launch_dir / job_dir_name(spec.job_id, spec.attempt);
  auto args = training_sbatch_args(spec, planned, options, profile.script);
  if (!args) return args.error();
  auto dir = fresh_dir(spec);
  if (!dir) return dir.error();
  if (auto w = write_input(*dir, input); !w) return w.error();
  std::vector<std::string> argv{config_.sbatch};
  argv.insert(argv.end(), args->begin(), args->end());
  // sbatch exports its own environment to the job (--export=ALL is its default): the profile finds its
  // paths there. The agent's own NYMPH_* variables are not passed on.
  auto env = cli::scrubbed_environment();
  std::erase_if(env, [](const auto& kv) { return kv.first.starts_with("NYMPH_"); });
  env["NYMPH_INPUT"] = (*dir / kInputFile).string();
  env["NYMPH_RESULT"] = (*dir / kResultFile).string();
  env["NYMPH_JOB_ID"] = spec.job_id;
  env["NYMPH_ATTEMPT"] = std::to_string(spec.attempt);
  return Submission{*dir, std::move(argv), std::move(env), true};
}

asio::awaitable<Result<std::string>> SlurmRunner::submit(const Submission& s) {
  std::vector<std::string> argv = s.argv;  // GCC 12: named arguments, no conversions inside co_await
  std::optional<std::map<std::string, std::string>> env = s.env;
  auto r = co_await commands_->run(std::move(argv), std::move(env), config_.command_timeout);
  if (!r) co_return fail("sbatch: " + r.error().message);
  if (r->exit_code != 0) {
    std::string err(cli::trim(r->err));
    co_return fail("sbatch failed (exit status " + std::to_string(r->exit_code) + "): " +
                   (err.empty() ? std::string(cli::trim(r->out)) : err));
  }
  co_return cli::parse_sbatch_output(r->out);
}

JobUpdate SlurmRunner::end_without_tracking(const std::string& job_id, const fs::path& dir, JobUpdate u) {
  attempts_.erase(job_id);
  finished_[job_id] = Finished{dir, 0, false};
  log_->warn("job {}: {}", job_id, u.message);
  return u;
}

void SlurmRunner::start_tracking(Attempt& a) {
  job_of_slurm_id_[a.entry.slurm_job_id] = a.entry.job_id;
  tracker_.add({a.entry.slurm_job_id, a.entry.submitted_at});
  if (a.stop_requested) {
    auto why = *a.stop_requested;
    a.stop_requested.reset();
    stop(a.entry.job_id, why);
  }
  ensure_poll_loop();
}

asio::awaitable<JobUpdate> SlurmRunner::resume(JournalEntry entry, JobReporter& reporter, OutputOffsets from) {
  if (attempts_.count(entry.job_id)) co_return failed_update("job " + entry.job_id + " is already tracked here", entry.slurm_job_id);
  auto owned = std::make_unique<Attempt>(executor_, entry, reporter, from);
  Attempt& a = *owned;
  std::error_code ec;
  a.training = fs::exists(a.entry.dir / kInputFile, ec);
  attempts_.emplace(entry.job_id, std::move(owned));
  log_->info("job {} attempt {}: re-attached to Slurm job {}", entry.job_id, entry.attempt, entry.slurm_job_id);
  start_tracking(a);
  co_return co_await follow(a, from);
}

asio::awaitable<Result<void>> SlurmRunner::abandon(JournalEntry entry) {
  std::vector<std::string> ids{entry.slurm_job_id};
  auto r = co_await command(cli::scancel_argv(config_.scancel, ids));
  if (!r || r->exit_code != 0) {
    std::string why = r ? std::string(cli::trim(r->err)) : r.error().message;
    co_return fail("scancel " + entry.slurm_job_id + " failed: " + why);
  }
  finished_[entry.job_id] = Finished{entry.dir, entry.attempt, true};
  release(entry.job_id);
  co_return Result<void>{};
}

asio::awaitable<JobUpdate> SlurmRunner::follow(Attempt& a, OutputOffsets) {
  for (;;) {
    co_await ship_output(a, false);
    if (a.final) break;
    boost::system::error_code ec;
    a.wake.expires_after(config_.output_interval);
    co_await a.wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (!a.detached) co_await ship_output(a, true);  // the job has ended: everything it wrote, to the end
  JobUpdate result = std::move(*a.final);
  // Only now, with Slurm's final word (COMPLETED), is a training profile's result.json read and checked.
  if (a.training && !a.detached) result = attach_result(std::move(result), a.entry.dir);
  const std::string job_id = a.entry.job_id;
  if (!a.detached) finished_[job_id] = Finished{a.entry.dir, a.entry.attempt, true};
  job_of_slurm_id_.erase(a.entry.slurm_job_id);
  attempts_.erase(job_id);  // destroys `a`
  co_return result;
}

asio::awaitable<void> SlurmRunner::ship_output(Attempt& a, bool to_end) {
  // Read as much as there is (the reporter's backpressure paces us); while running, stop at a detach.
  for (OutputTail* tail : {&a.out, &a.err}) {
    for (;;) {
      if (a.detached) co_return;
      std::string bytes = tail->next(config_.output_chunk);
      if (bytes.empty()) break;
      std::size_t n = bytes.size();
      co_await a.reporter->output(tail->stream(), tail->offset(), std::move(bytes));
      tail->advance(n);
      if (!to_end && n < config_.output_chunk) break;
    }
  }
}

void SlurmRunner::stop(const std::string& job_id, StopReason why) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end() || it->second->final) return;
  Attempt& a = *it->second;
  if (a.entry.slurm_job_id.empty()) {  // still in sbatch: act once the id is known
    a.stop_requested = why;
    return;
  }
  if (why == StopReason::shutdown) {
    tracker_.remove(a.entry.slurm_job_id);
    JobUpdate u;
    u.state = JobState::running;
    u.slurm_job_id = a.entry.slurm_job_id;
    u.message = "manager stopping: Slurm job " + a.entry.slurm_job_id + " left running (journaled for resume)";
    a.final = std::move(u);
    a.detached = true;
    a.wake.cancel();
    return;
  }
  tracker_.request_cancel(a.entry.slurm_job_id, why == StopReason::lease_lost ? CancelCause::lease_lost : CancelCause::user);
  log_->info("job {}: cancelling Slurm job {}", job_id, a.entry.slurm_job_id);
  request_cycle();
}

void SlurmRunner::release(const std::string& job_id) {
  auto it = finished_.find(job_id);
  if (it == finished_.end()) return;
  Finished f = std::move(it->second);
  finished_.erase(it);
  std::erase_if(in_flight_, [&](const JournalEntry& e) { return e.job_id == job_id && e.attempt == f.attempt; });
  if (f.journaled) {
    if (auto r = journal_->mark_done(job_id, f.attempt); !r) log_->error("job {}: {}", job_id, r.error().message);
  }
  if (config_.keep_job_dirs) return;
  std::error_code ec;
  fs::remove_all(f.dir, ec);
  if (ec) log_->warn("job {}: cannot remove {}: {}", job_id, f.dir.string(), ec.message());
}

void SlurmRunner::request_cycle() {
  cycle_requested_ = true;
  poll_timer_.cancel();
}

void SlurmRunner::ensure_poll_loop() {
  if (poll_running_) return;
  poll_running_ = true;
  asio::co_spawn(executor_, poll_loop(), [log = log_](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log->critical("slurm poll loop failed: {}", ex.what());
    }
  });
}

std::chrono::milliseconds SlurmRunner::jittered_interval() {
  std::uniform_real_distribution<double> d(1.0 - config_.poll_jitter, 1.0 + config_.poll_jitter);
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(config_.poll_interval.count()) * d(random_)));
}

asio::awaitable<void> SlurmRunner::poll_loop() {
  while (!tracker_.empty()) {
    if (!cycle_requested_) {
      boost::system::error_code ec;
      poll_timer_.expires_after(jittered_interval());
      co_await poll_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    cycle_requested_ = false;
    co_await run_cycle();
  }
  poll_running_ = false;
}

asio::awaitable<void> SlurmRunner::run_cycle() {
  TrackerEvent event = tracker_event::CycleStart{};
  for (;;) {
    TrackerAction action = tracker_.resume(event, WallClock::now());
    for (const auto& w : action.warnings) log_->warn("slurm: {}", w);
    deliver(std::move(action.reports));
    if (action.step == TrackerStep::cycle_done) co_return;
    event = co_await perform(action);
  }
}

asio::awaitable<TrackerEvent> SlurmRunner::perform(const TrackerAction& action) {
  switch (action.step) {
    case TrackerStep::scancel: {
      auto r = co_await command(cli::scancel_argv(config_.scancel, action.slurm_ids));
      co_return TrackerEvent(tracker_event::ScancelDone{std::move(r)});
    }
    case TrackerStep::squeue: {
      auto r = co_await command(cli::squeue_jobs_argv(config_.squeue, action.slurm_ids));
      co_return TrackerEvent(tracker_event::SqueueDone{std::move(r)});
    }
    case TrackerStep::sacct: {
      auto r = co_await command(cli::sacct_jobs_argv(config_.sacct, action.slurm_ids));
      co_return TrackerEvent(tracker_event::SacctDone{std::move(r)});
    }
    case TrackerStep::read_exit_files: co_return TrackerEvent(read_exit_files(action.slurm_ids));
    case TrackerStep::cycle_done: break;
  }
  throw std::logic_error("slurm runner: nothing to perform");
}

asio::awaitable<Result<cli::CommandResult>> SlurmRunner::command(std::vector<std::string> argv) {
  co_return co_await commands_->run(std::move(argv), cli::scrubbed_environment(), config_.command_timeout);
}

tracker_event::ExitFilesRead SlurmRunner::read_exit_files(const std::vector<std::string>& slurm_ids) const {
  tracker_event::ExitFilesRead ev;
  for (const auto& id : slurm_ids) {
    auto job = job_of_slurm_id_.find(id);
    if (job == job_of_slurm_id_.end()) continue;
    auto a = attempts_.find(job->second);
    if (a == attempts_.end()) continue;
    ev.status[id] = read_status_file(a->second->entry.dir / kExitStatusFile);
  }
  return ev;
}

void SlurmRunner::deliver(std::vector<TrackerReport> reports) {
  for (auto& r : reports) {
    auto job = job_of_slurm_id_.find(r.slurm_id);
    if (job == job_of_slurm_id_.end()) continue;
    auto it = attempts_.find(job->second);
    if (it == attempts_.end()) continue;
    Attempt& a = *it->second;
    if (!is_final(r.update.state)) {
      a.reporter->update(std::move(r.update));
      continue;
    }
    log_->info("job {}: {} ({})", a.entry.job_id, to_string(r.update.state), r.update.message);
    a.final = std::move(r.update);
    a.wake.cancel();
  }
}

}  // namespace nymph::runners::slurm
