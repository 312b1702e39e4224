#include "runners/slurm/slurm_runner.hpp"

#include <malloc.h>

#include <set>
#include <stdexcept>

#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/coroutine_warning.hpp"
#include "common/files.hpp"
#include "common/spawn.hpp"
#include "runners/profile.hpp"
#include "runners/slurm/job_files.hpp"
#include "runners/slurm/script.hpp"
#include "slurm/commands.hpp"
#include "slurm/parse.hpp"
#include "slurm/time.hpp"

namespace nymph::runners::slurm {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace cli = nymph::slurm;

// A profile script is read for its #SBATCH lines before each submission; a reviewed script is far smaller.
constexpr std::size_t kMaxProfileScriptBytes = 4 * 1024 * 1024;

// sbatch calls per attempt that slurmctld may refuse (rate limit, unreachable) before the attempt fails.
constexpr int kMaxSbatchRefusals = 6;

JobUpdate failed_update(std::string message, std::optional<std::string> slurm_id = std::nullopt) {
  JobUpdate u;
  u.state = JobState::failed;
  u.message = std::move(message);
  u.slurm_job_id = std::move(slurm_id);
  return u;
}

// What release() and abandon() leave to the I/O threads, in this order: the journal's done line (for a
// journaled attempt), then the job directory (unless kept). Reports its own failures.
struct DiskCleanup {
  Journal* journal;
  std::string job_id;
  int attempt;
  bool journaled;
  fs::path dir;
  bool keep_dir;
  std::shared_ptr<spdlog::logger> log;

  void operator()() const noexcept {
    try {
      if (journaled) {
        if (auto r = journal->mark_done(job_id, attempt); !r) log->error("job {}: {}", job_id, r.error().message);
      }
      std::error_code ec;
      fs::remove(dir.parent_path() / kExitRecordDir / dir.filename(), ec);
      if (keep_dir) return;
      fs::remove_all(dir, ec);
      if (ec) log->warn("job {}: cannot remove {}: {}", job_id, dir.string(), ec.message());
    } catch (const std::exception& e) {  // bad_alloc, or a logger failure: nothing else to tell
      (void)e;
    }
  }
};

// Creates `dir` (launch_dir/exits) 0700 and removes the records in it of attempts not in `in_flight` (left by a
// cleanup that failed, or by jobs released before a crash). Start-up only: blocks.
void prepare_exit_records(const fs::path& dir, const std::vector<JournalEntry>& in_flight) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("[runners.slurm] cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  std::set<std::string> wanted;
  for (const auto& e : in_flight) wanted.insert(fs::path(e.dir).filename().string());
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code gone;
    if (!wanted.count(it->path().filename().string())) fs::remove(it->path(), gone);
  }
}

// Creates `dir` (launch_dir/arrays) 0700 and empties it: an array script is only needed until its sbatch returned
// (Slurm keeps its own copy), so any file there was left by a crash. Start-up only: blocks.
void prepare_array_scripts(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("[runners.slurm] cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code gone;
    fs::remove(it->path(), gone);
  }
}

// One stream's output file in the job directory, read from a byte offset on (through the I/O threads: see
// ship_output). No path of its own: ten thousand tracked jobs keep one directory path each.
class OutputTail {
 public:
  OutputTail(Stream stream, std::uint64_t offset) : stream_(stream), offset_(offset) {}
  fs::path path_in(const std::string& dir) const {
    return fs::path(dir) / (stream_ == Stream::out ? kStdoutFile : kStderrFile);
  }
  Stream stream() const { return stream_; }
  std::uint64_t offset() const { return offset_; }
  void advance(std::size_t n) { offset_ += n; }

 private:
  Stream stream_;
  std::uint64_t offset_;
};

// The journal append an sbatch's outcome waits for (one entry, or an array's), to run on the journal's I/O
// strand: `fault` (SlurmRunnerConfig::before_journal_append, for tests) fails it first when set. Returns the
// outcome with `entries` handed back: an array's ten thousand entries are moved there and back, not copied.
template <class Entries>
auto journal_append(Journal& journal, Entries entries, std::function<Result<void>()> fault) {
  return [&journal, entries = std::move(entries), fault = std::move(fault)]() mutable {
    Result<void> appended = fault ? fault() : Result<void>{};
    if (appended) appended = journal.append(entries);
    return std::pair{std::move(appended), std::move(entries)};
  };
}

}  // namespace

// One attempt this runner tracks, from start() (or attach()) to finish_following(). While Slurm has not started
// its job it is only this record: no coroutine frame, no timer (see wake()).
struct SlurmRunner::Attempt final : TrackedRecord {
  // `e` is its journal line (its Slurm id empty until submitted).
  Attempt(JournalEntry e, JobReporter& r, OutputOffsets from)
      : job_id(std::move(e.job_id)),
        slurm_job_id(std::move(e.slurm_job_id)),
        dir(std::move(e.dir)),
        line_only(std::make_unique<LineOnly>(
            LineOnly{std::move(e.lease_id), std::move(e.job_name), std::move(e.cluster), e.submitted_at})),
        reporter(&r),
        out(Stream::out, from.out),
        err(Stream::err, from.err),
        attempt(e.attempt) {}
  // Its journal line's fields, as they are kept while Slurm tracks its job (a manager tracks ten thousand):
  std::string job_id;
  std::string slurm_job_id;  // empty until its submission is journaled
  std::string dir;           // its job directory; empty once tracked when it is the default one (job_dir())
  // What only its journal line needs, until tracking starts: null from then on (the journal keeps it for the next
  // agent, the tracker keeps the name and cluster hashed, the agent keeps the lease id).
  struct LineOnly {
    std::string lease_id, job_name, cluster;
    WallClock::time_point submitted_at;
  };
  std::unique_ptr<LineOnly> line_only;
  // Its whole journal line; only before tracking starts (line_only is set).
  JournalEntry line() const {
    return JournalEntry{job_id,  attempt,         line_only->lease_id, slurm_job_id, dir, line_only->submitted_at,
                        line_only->job_name, line_only->cluster};
  }
  JobReporter* reporter;
  AttemptDone done;                        // where its final update goes, once handed over (hand_over())
  asio::steady_timer* follow_timer = nullptr;  // follow()'s wait between output reads, while it waits
  std::unique_ptr<JobUpdate> final;        // set once, at the end: a tracked job does not carry an empty one
  std::optional<std::chrono::seconds> time_limit;  // the job's timeout (its --time), when run() knows it
  OutputTail out, err;
  // The small fields together (a manager keeps ten thousand Attempts: no padding after each).
  int looks_since_exit_record = 0;          // cycles since its exit record was seen that still found it active
  // A training profile's result.json is read once it succeeded. A resumed attempt is `unknown` until it ended:
  // then its job directory tells (a training profile's input file), read on the I/O threads with the result.
  enum class Kind : std::uint8_t { command, training, unknown } kind = Kind::command;
  std::optional<StopReason> stop_requested;  // stop() before the Slurm id was known
  bool following = false;                  // follow() was started for it
  bool detached = false;
  // Its submission failed (final set, never tracked); with scancel_untracked, sbatch gave it a Slurm id that could
  // not be journaled, and the job is cancelled before it ends.
  bool untracked = false;
  bool scancel_untracked = false;
  bool exit_record_seen = false;            // its exit record in kExitRecordDir brought a cycle forward
  int attempt = 1;                          // its attempt number (journal line's)
};

SlurmRunner::SlurmRunner(asio::any_io_executor executor, SlurmRunnerConfig config,
                         std::unique_ptr<cli::CommandRunner> commands, std::shared_ptr<spdlog::logger> logger)
    : executor_(std::move(executor)),
      config_(std::move(config)),
      commands_(std::move(commands)),
      command_slots_(config_.max_concurrent_commands),
      log_(std::move(logger)),
      tracker_(TrackerConfig{config_.max_poll_duration, config_.cancel_grace, config_.lost_after_cycles,
                             config_.max_queue_duration}),
      poll_timer_(executor_),
      pacer_(PollPacerConfig{.quick = config_.poll_interval,
                             .ceiling = config_.poll_interval_max.count() > 0 ? config_.poll_interval_max
                                                                              : config_.poll_interval,
                             .jitter = config_.poll_jitter,
                             .rpc_budget_per_minute = config_.rpc_budget_per_minute,
                             .rpc_window = config_.rpc_budget_window,
                             .seed = std::random_device{}()}),
      batcher_(config_.max_array_tasks),
      random_(std::random_device{}()),
      io_(config_.io_threads) {
  if (auto r = cli::check_sbatch_path(config_.launch_dir); !r)
    throw std::runtime_error("[runners.slurm] launch_dir: " + r.error().message);
  std::error_code ec;
  fs::create_directories(config_.launch_dir, ec);
  if (ec) throw std::runtime_error("[runners.slurm] cannot create launch_dir " + config_.launch_dir.string() + ": " + ec.message());
  const fs::path path = config_.launch_dir / kJournalFile;
  in_flight_ = read_journal(path).value();
  compact_journal(path, in_flight_).value();
  journal_.emplace(Journal::open(path).value());
  prepare_exit_records(config_.launch_dir / kExitRecordDir, in_flight_);
  prepare_array_scripts(config_.launch_dir / kArrayScriptDir);
  if (!in_flight_.empty()) log_->info("slurm journal {}: {} attempt(s) in flight", path.string(), in_flight_.size());
}

SlurmRunner::~SlurmRunner() { io_.join(); }

namespace {
// The update `launch` hands to its AttemptDone, as an awaitable: launch runs when it is first awaited.
template <class Launch>
asio::awaitable<JobUpdate> awaited_update(Launch launch) {
  return asio::async_initiate<const asio::use_awaitable_t<>, void(JobUpdate)>(
      [](auto handler, Launch launch) { launch(AttemptDone(std::move(handler))); }, asio::use_awaitable,
      std::move(launch));
}
}  // namespace

asio::awaitable<JobUpdate> SlurmRunner::run(JobSpec spec, JobReporter& reporter) {
  return awaited_update([this, spec = std::move(spec), &reporter](AttemptDone done) mutable {
    launch(executor_, std::move(spec), reporter, std::move(done));
  });
}

void SlurmRunner::launch(asio::any_io_executor /*ex: the runner's*/, JobSpec spec, JobReporter& reporter,
                         AttemptDone done) {
  auto started = [this, done = std::move(done)](std::exception_ptr e, std::variant<Attempt*, JobUpdate> s) mutable {
    if (e) return complete(std::move(done), runner_error(e));
    if (auto* ended = std::get_if<JobUpdate>(&s)) return complete(std::move(done), std::move(*ended));
    hand_over(*std::get<Attempt*>(s), std::move(done));
  };
  asio::co_spawn(executor_, start(std::move(spec), reporter), std::move(started));
}

void SlurmRunner::hand_over(Attempt& a, AttemptDone done) {
  // Not `a.done = std::move(done)`: Boost 1.81's move assignment of any_completion_handler recurses until the
  // stack overflows (it copies from an lvalue through the converting constructor). a.done is empty here.
  a.done.swap(done);
  wake(a);
}

void SlurmRunner::wake(Attempt& a) {
  if (a.following) {
    if (a.follow_timer) a.follow_timer->cancel();
    return;
  }
  // Not before Slurm started it: a pending job has written nothing, and ten thousand of them must cost neither
  // file opens on the shared filesystem nor timer wake-ups. deliver() wakes it once Slurm runs or ends it.
  if (!a.done || (!a.final && !tracker_.started_at(a.slurm_job_id))) return;
  a.following = true;
  ++following_;
  auto ended = [this, done = std::move(a.done)](std::exception_ptr e, JobUpdate u) mutable {
    --following_;
    complete(std::move(done), e ? runner_error(e) : std::move(u));
  };
  asio::co_spawn(executor_, follow(a), std::move(ended));
}

void SlurmRunner::complete(AttemptDone done, JobUpdate u) const {
  asio::post(executor_, [done = std::move(done), u = std::move(u)]() mutable { std::move(done)(std::move(u)); });
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<JobUpdate> SlurmRunner::follow(Attempt& a) {
  co_await asio::post(executor_, asio::use_awaitable);  // wake()'s caller goes on first (it may be deliver()'s loop)
  asio::steady_timer timer(executor_);
  for (;;) {
    // A job Slurm requeued waits here without reading its files until deliver() reports it running again.
    const bool running = tracker_.started_at(a.slurm_job_id).has_value();
    if (running) co_await ship_output(a, false);
    if (a.final) break;
    boost::system::error_code ec;
    if (running) timer.expires_after(config_.output_interval);
    else timer.expires_at(asio::steady_timer::time_point::max());
    a.follow_timer = &timer;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    a.follow_timer = nullptr;
  }
  co_return co_await finish_following(a);
}

asio::awaitable<std::variant<SlurmRunner::Attempt*, JobUpdate>> SlurmRunner::start(JobSpec spec, JobReporter& reporter) {
  const bool training = spec.kind == "training";
  if (!training && config_.profiles_only)
    co_return failed_update("this worker runs approved training profiles only "
                            "([runners.process] allow_commands = false): argv and command jobs are refused");
  // Precedence (docs/profiles.md): runConfig.slurm > a profile's own #SBATCH lines > these site defaults >
  // Slurm's. prepare_training drops a default the profile script sets itself (sbatch's command line would
  // override the script).
  const cli::OptionDefaults defaults{config_.account, config_.qos, config_.partition};
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
  if (auto why = refusal(spec)) co_return std::move(*why);

  // The attempt holds its job's slot (and capacity) while its directory is prepared on the I/O threads.
  JournalEntry entry{spec.job_id, spec.attempt, spec.lease_id, "", default_job_dir(spec.job_id, spec.attempt),
                     WallClock::now()};
  auto owned = std::make_unique<Attempt>(std::move(entry), reporter, OutputOffsets{});
  Attempt& a = *owned;
  a.time_limit = spec.timeout;
  attempts_.emplace(a.job_id, std::move(owned));
  auto sub = co_await prepare(spec, profile, std::move(input), *options);
  if (!sub) {
    attempts_.erase(spec.job_id);
    co_return failed_update(sub.error().message);
  }
  if (sub->training) a.kind = Attempt::Kind::training;
  if (sub->shape) {
    wait_for_array(a, std::move(*sub));  // no frame of its own while it waits for its array's sbatch
    co_return &a;
  }
  auto sent = co_await submit_alone(a, *sub, false);
  submitted(a, std::move(sent));
  co_return &a;
}
NYMPH_GCC_PR109224_END

// Why `spec` cannot be submitted now (a duplicate, capacity, an attempt from before a restart), if it cannot.
std::optional<JobUpdate> SlurmRunner::refusal(const JobSpec& spec) const {
  if (attempts_.count(spec.job_id)) return failed_update("job " + spec.job_id + " is already running on this runner");
  if (attempts_.size() >= static_cast<std::size_t>(config_.max_jobs))
    return failed_update("the slurm runner is at capacity (max_jobs = " + std::to_string(config_.max_jobs) + ")");
  for (const auto& e : in_flight_) {
    if (e.job_id == spec.job_id && e.attempt == spec.attempt)
      return failed_update("job " + spec.job_id + " attempt " + std::to_string(spec.attempt) + " is Slurm job " +
                               e.slurm_job_id + " from before the restart: resume() it instead",
                           e.slurm_job_id);
  }
  return std::nullopt;
}

void SlurmRunner::submitted(Attempt& a, Result<Sent> sent) {
  if (!sent) return end_untracked_later(a, failed_update(sent.error().message), false);
  // `a` gets the id only once tracking starts: a stop() meanwhile waits for it (stop_requested).
  JournalEntry& e = sent->entry;
  a.slurm_job_id = std::move(e.slurm_job_id);
  *a.line_only = Attempt::LineOnly{std::move(e.lease_id), std::move(e.job_name), std::move(e.cluster), e.submitted_at};
  const std::string& slurm_id = a.slurm_job_id;
  if (const auto& j = sent->journaled; !j)
    return end_untracked_later(a, failed_update(j.error().message + "; Slurm job " + slurm_id + " cancelled", slurm_id),
                               true);
  log_->info("job {} attempt {}: submitted as Slurm job {} ({})", a.job_id, a.attempt, slurm_id, a.dir);
  JobUpdate running;
  running.state = JobState::running;
  running.slurm_job_id = slurm_id;
  running.message = "submitted as Slurm job " + slurm_id;
  a.reporter->update(running);
  start_tracking(a);
}

void SlurmRunner::end_untracked_later(Attempt& a, JobUpdate u, bool scancel) {
  a.final = std::make_unique<JobUpdate>(std::move(u));
  a.untracked = true;
  a.scancel_untracked = scancel;
  wake(a);
}

asio::awaitable<JobUpdate> SlurmRunner::end_untracked(Attempt& a) {
  const std::string job_id = a.job_id;
  const std::string dir = a.dir;
  if (a.scancel_untracked) {
    std::vector<std::string> ids{a.slurm_job_id};
    co_await command(cli::scancel_argv(config_.scancel, ids));
  }
  JobUpdate u = std::move(*a.final);
  co_return end_without_tracking(job_id, dir, std::move(u));  // destroys `a`
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<Result<SlurmRunner::Sent>> SlurmRunner::submit_alone(const Attempt& a, const Submission& sub,
                                                                      bool budget_spent) {
  // Slurm stamps its submit time while sbatch runs: now is a lower bound of it (part of the job's identity).
  const auto before_sbatch = WallClock::now();
  auto answer = co_await submit(sub, budget_spent);
  auto slurm_id = answer ? cli::parse_sbatch_output(answer->out) : Result<std::string>(answer.error());
  if (!slurm_id) co_return slurm_id.error();
  Sent sent{a.line(), {}};
  sent.entry.slurm_job_id = *slurm_id;
  sent.entry.submitted_at = before_sbatch;
  sent.entry.job_name = slurm_job_name(a.job_id);
  sent.entry.cluster = co_await cluster_of(answer->out);
  // On disk before anyone hears of it: a restarted manager finds every job it reported.
  auto [journaled, entry] =
      co_await io_.run_ordered(journal_append(*journal_, std::move(sent.entry), config_.before_journal_append));
  sent.entry = std::move(entry);
  sent.journaled = std::move(journaled);
  co_return sent;
}

NYMPH_GCC_PR109224_END

struct SlurmRunner::Waiting {
  Attempt* attempt;
  Submission sub;
};

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
void SlurmRunner::wait_for_array(Attempt& a, Submission sub) {
  const SubmissionTicket ticket = next_ticket_++;
  const std::string shape = *sub.shape;
  waiting_.emplace(ticket, std::make_unique<Waiting>(Waiting{&a, std::move(sub)}));
  if (batcher_.add(shape, ticket))
    asio::co_spawn(executor_, submit_shape(shape), log_failure(log_, "slurm submission of " + a.job_id));
}

asio::awaitable<void> SlurmRunner::submit_shape(std::string shape) {
  while (batcher_.waiting(shape) > 0) {
    if (!array_cap_read_ && batcher_.waiting(shape) > 1) co_await read_array_cap();
    co_await within_budget(1);  // what waits meanwhile joins this sbatch
    std::vector<std::unique_ptr<Waiting>> taken;  // this frame owns the batch until each task is sent
    std::vector<Waiting*> batch;
    for (SubmissionTicket t : batcher_.take(shape)) {
      taken.push_back(std::move(waiting_.extract(t).mapped()));
      batch.push_back(taken.back().get());
    }
    if (batch.size() > 1) {
      co_await submit_array(std::move(batch));
      continue;
    }
    Waiting& alone = *batch.front();
    auto outcome = co_await submit_alone(*alone.attempt, alone.sub, true);
    submitted(*alone.attempt, std::move(outcome));
  }
  batcher_.submitter_done(shape);
}

asio::awaitable<void> SlurmRunner::submit_array(std::vector<Waiting*> tasks) {
  const Attempt& first = *tasks.front()->attempt;
  const std::string name = array_job_name(first.job_id, first.attempt);
  auto script = [&] {  // the copies of the directories go with this call, not with the frame
    std::vector<std::string> dirs;
    dirs.reserve(tasks.size());
    for (const Waiting* w : tasks) dirs.push_back(w->attempt->dir);
    return render_array_script(name, config_.launch_dir, tasks.front()->sub.shape.value_or(""), dirs);
  }();
  if (!script) {
    for (Waiting* w : tasks) submitted(*w->attempt, script.error());
    co_return;
  }
  const fs::path path = config_.launch_dir / kArrayScriptDir / (name + ".sbatch");
  auto write = [path, text = std::move(*script)] {
    return write_file(path, text, fs::perms::owner_read | fs::perms::owner_write);
  };
  if (auto w = co_await io_.run(std::move(write)); !w) {
    log_->warn("slurm: cannot write the array script {}: {}; submitting its {} attempts one by one", path.string(),
               w.error().message, tasks.size());
    co_return co_await submit_each(tasks, 0);
  }
  const Submission array{cli::sbatch_file_argv(config_.sbatch, path.string()), {}, false, {}};
  const auto before_sbatch = WallClock::now();
  bool refused = false;
  auto answer = co_await submit(array, true, &refused);
  io_.post_ordered([path]() noexcept {
    std::error_code ec;
    fs::remove(path, ec);  // Slurm keeps its own copy of a submitted script
  });
  auto base = answer ? cli::parse_sbatch_output(answer->out) : Result<std::string>(answer.error());
  if (!base && refused) co_return co_await submit_one_by_one(std::move(tasks), base.error().message);
  if (!base) {
    for (Waiting* w : tasks) submitted(*w->attempt, base.error());
    co_return;
  }
  const std::string cluster = co_await cluster_of(answer->out);
  std::vector<JournalEntry> entries;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    JournalEntry e = tasks[i]->attempt->line();
    e.slurm_job_id = *base + "_" + std::to_string(i);
    e.submitted_at = before_sbatch;
    e.job_name = name;
    e.cluster = cluster;
    entries.push_back(std::move(e));
  }
  auto [journaled, sent] =
      co_await io_.run_ordered(journal_append(*journal_, std::move(entries), config_.before_journal_append));
  log_->info("slurm: {} attempts submitted in one sbatch as job array {}", tasks.size(), *base);
  for (std::size_t i = 0; i < tasks.size(); ++i) submitted(*tasks[i]->attempt, Sent{std::move(sent[i]), journaled});
}

asio::awaitable<void> SlurmRunner::submit_one_by_one(std::vector<Waiting*> tasks, const std::string& why) {
  log_->warn("slurm: {}; submitting the array's {} attempts one by one", why, tasks.size());
  auto first = co_await submit_alone(*tasks.front()->attempt, tasks.front()->sub, false);
  if (!first) {
    // Attempts of one shape differ only in what their scripts run: sbatch refuses each of them alike.
    for (Waiting* w : tasks) submitted(*w->attempt, first.error());
    co_return;
  }
  submitted(*tasks.front()->attempt, std::move(first));
  co_await submit_each(tasks, 1);
}

asio::awaitable<void> SlurmRunner::submit_each(const std::vector<Waiting*>& tasks, std::size_t from) {
  for (std::size_t i = from; i < tasks.size(); ++i) {
    auto outcome = co_await submit_alone(*tasks[i]->attempt, tasks[i]->sub, false);
    submitted(*tasks[i]->attempt, std::move(outcome));
  }
}
NYMPH_GCC_PR109224_END

asio::awaitable<void> SlurmRunner::read_array_cap() {
  array_cap_read_ = true;
  auto r = co_await command(cli::show_config_argv(config_.scontrol));
  auto cap = r && r->exit_code == 0 ? cli::parse_max_array_size(r->out) : std::nullopt;
  if (!cap) {
    log_->warn("slurm: cannot read MaxArraySize from `scontrol show config`; job arrays of up to {} tasks",
               batcher_.max_tasks());
    co_return;
  }
  if (auto name = cli::parse_cluster_name(r->out); !scontrol_cluster_ && !name.empty()) scontrol_cluster_ = name;
  if (*cap < batcher_.max_tasks()) batcher_.set_max_tasks(*cap);
}

asio::awaitable<Result<SlurmRunner::Submission>> SlurmRunner::prepare(const JobSpec& spec, const Profile* profile,
                                                                      std::string input, const SbatchOptions& options) {
  // `profile` points into config_, which outlives the runner's I/O threads; prepare_* only read config_.
  auto work = [this, spec, profile, input = std::move(input), options]() -> Result<Submission> {
    bool created = false;
    auto sub = profile ? prepare_training(spec, *profile, input, options, created) : prepare_command(spec, options, created);
    if (!sub && created) {
      // Nothing of a half-prepared job directory stays behind.
      std::error_code ec;
      fs::remove_all(config_.launch_dir / job_dir_name(spec.job_id, spec.attempt), ec);
    }
    return sub;
  };
  co_return co_await io_.run(std::move(work));
}

Result<void> SlurmRunner::job_dir_created(const fs::path& dir, bool& created) const {
  if (auto d = make_fresh_dir(dir); !d) return d.error();
  created = true;
  if (config_.after_job_dir_created) return config_.after_job_dir_created(dir);
  return {};
}

asio::awaitable<std::string> SlurmRunner::cluster_of(const std::string& sbatch_out) {
  if (!config_.cluster.empty()) co_return config_.cluster;
  if (auto named = cli::parse_sbatch_cluster(sbatch_out); !named.empty()) co_return named;
  if (!scontrol_cluster_) {
    // Asked once per runner; without an answer the cluster is "" (not checked).
    auto r = co_await command(cli::show_config_argv(config_.scontrol));
    scontrol_cluster_ = r && r->exit_code == 0 ? cli::parse_cluster_name(r->out) : std::string();
    if (scontrol_cluster_->empty()) log_->warn("slurm: cannot read ClusterName from `scontrol show config`");
  }
  co_return *scontrol_cluster_;
}

Result<SlurmRunner::Submission> SlurmRunner::prepare_command(const JobSpec& spec, const SbatchOptions& options,
                                                             bool& created) const {
  if (auto id = check_job_id(spec.job_id); !id) return id.error();
  const fs::path dir = config_.launch_dir / job_dir_name(spec.job_id, spec.attempt);
  auto rendered = render_job(spec, dir, options);
  if (!rendered) return rendered.error();
  if (auto d = job_dir_created(dir, created); !d) return d.error();
  constexpr auto private_file = fs::perms::owner_read | fs::perms::owner_write;
  if (auto w = write_file(dir / kScriptFile, rendered->script, private_file); !w) return w.error();
  if (rendered->command) {
    if (auto w = write_file(dir / kCommandFile, *rendered->command, private_file); !w) return w.error();
  }
  std::optional<std::string> shape;
  if (config_.max_array_tasks > 1) shape = shared_directives(spec, options);
  return Submission{cli::sbatch_file_argv(config_.sbatch, (dir / kScriptFile).string()), {}, false,
                    std::move(shape)};
}

Result<SlurmRunner::Submission> SlurmRunner::prepare_training(const JobSpec& spec, const Profile& profile,
                                                              const std::string& input,
                                                              const SbatchOptions& options, bool& created) const {
  const fs::path dir = config_.launch_dir / job_dir_name(spec.job_id, spec.attempt);
  // The script as sbatch will read it: a site default it sets with #SBATCH (and the job does not) is left out.
  auto text = read_small_file(profile.script, "profile " + profile.name + " script", kMaxProfileScriptBytes);
  if (!text) return text.error();
  const auto set_by_script = script_site_keys(*text);
  SbatchOptions effective;
  for (const auto& o : options)
    if (!set_by_script.count(o.key) || spec.slurm_options.contains(o.key)) effective.push_back(o);
  auto args = training_sbatch_args(spec, dir, effective, profile.script);
  if (!args) return args.error();
  if (auto d = job_dir_created(dir, created); !d) return d.error();
  if (auto w = write_input(dir, input); !w) return w.error();
  std::vector<std::string> argv{config_.sbatch};
  argv.insert(argv.end(), args->begin(), args->end());
  // sbatch exports its own environment to the job (--export=ALL is its default): the profile finds its
  // paths there (sbatch_environment adds them).
  std::map<std::string, std::string> job_env{{"NYMPH_INPUT", (dir / kInputFile).string()},
                                             {"NYMPH_RESULT", (dir / kResultFile).string()},
                                             {"NYMPH_JOB_ID", spec.job_id},
                                             {"NYMPH_ATTEMPT", std::to_string(spec.attempt)}};
  return Submission{std::move(argv), std::move(job_env), true, {}};
}

std::map<std::string, std::string> SlurmRunner::sbatch_environment(const Submission& s) {
  auto env = cli::scrubbed_environment();
  if (!s.training) return env;
  std::erase_if(env, [](const auto& kv) { return kv.first.starts_with("NYMPH_"); });
  for (const auto& [name, value] : s.job_env) env[name] = value;
  return env;
}

asio::awaitable<Result<cli::CommandResult>> SlurmRunner::submit(const Submission& s, bool budget_spent,
                                                                bool* refused) {
  for (int refusals = 0;; ++refusals) {
    if (refusals > 0 || !budget_spent) co_await within_budget(1);
    std::vector<std::string> argv = s.argv;  // GCC 12: named arguments, no conversions inside co_await
    std::optional<std::map<std::string, std::string>> env = sbatch_environment(s);
    auto r = co_await run_in_slot(std::move(argv), std::move(env));
    if (!r) co_return fail("sbatch: " + r.error().message);
    if (r->exit_code == 0) co_return r;
    std::string err(cli::trim(r->err));
    std::string why = "sbatch failed (exit status " + std::to_string(r->exit_code) + "): " +
                      (err.empty() ? std::string(cli::trim(r->out)) : err);
    // Only a refusal that certainly submitted nothing is tried again; a timeout may have submitted the job.
    if (!is_submission_refused(err) || refusals + 1 >= kMaxSbatchRefusals) {
      if (refused) *refused = true;
      co_return fail(why);
    }
    std::uniform_real_distribution<double> share(0.5, 1.0);
    auto wait = controller_backoff(refusals + 1, config_.poll_interval, share(random_));
    log_->warn("{}; trying again in {} ms", why, wait.count());
    asio::steady_timer t(executor_, wait);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

JobUpdate SlurmRunner::end_without_tracking(const std::string& job_id, const fs::path& dir, JobUpdate u) {
  attempts_.erase(job_id);
  finished_[job_id] = Finished{dir, 0, false};
  log_->warn("job {}: {}", job_id, u.message);
  return u;
}

std::string SlurmRunner::default_job_dir(std::string_view job_id, int attempt) const {
  return (config_.launch_dir / job_dir_name(job_id, attempt)).string();
}

std::string SlurmRunner::job_dir(const Attempt& a) const {
  return a.dir.empty() ? default_job_dir(a.job_id, a.attempt) : a.dir;
}

void SlurmRunner::start_tracking(Attempt& a) {
  tracker_.add({a.slurm_job_id, a.line_only->submitted_at, a.line_only->job_name, a.line_only->cluster, &a});
  // Nothing reads them again: the tracker keeps the name and cluster hashed, the agent the lease id, the journal all
  // of them for the next agent. An array task's job name is the array's (~45 bytes), and a manager tracks ten
  // thousand tasks.
  a.line_only.reset();
  // Its directory is where start() made it (launch_dir / job_dir_name) unless a previous agent's journal said
  // otherwise: job_dir() derives it again when asked.
  if (a.dir == default_job_dir(a.job_id, a.attempt)) a.dir = std::string();
  if (a.stop_requested) {
    auto why = *a.stop_requested;
    a.stop_requested.reset();
    stop(a.job_id, why);
  }
  pacer_.hurry(PacerClock::now());
  poll_timer_.cancel();  // a loop waiting for a later cycle looks at the sooner one
  ensure_poll_loop();
}

namespace {
asio::awaitable<JobUpdate> at_once(JobUpdate u) { co_return u; }
}  // namespace

asio::awaitable<JobUpdate> SlurmRunner::resume(JournalEntry entry, JobReporter& reporter, OutputOffsets from) {
  // Not a coroutine: tracked at the call; the attempt cannot end before it is handed over.
  auto attached = attach(std::move(entry), reporter, from);
  if (auto* refused = std::get_if<JobUpdate>(&attached)) return at_once(std::move(*refused));
  Attempt* a = std::get<Attempt*>(attached);
  return awaited_update([this, a](AttemptDone done) { hand_over(*a, std::move(done)); });
}

std::variant<SlurmRunner::Attempt*, JobUpdate> SlurmRunner::attach(JournalEntry entry, JobReporter& reporter,
                                                                    OutputOffsets from) {
  if (attempts_.count(entry.job_id))
    return failed_update("job " + entry.job_id + " is already tracked here", entry.slurm_job_id);
  auto owned = std::make_unique<Attempt>(std::move(entry), reporter, from);
  Attempt& a = *owned;
  a.kind = Attempt::Kind::unknown;
  attempts_.emplace(a.job_id, std::move(owned));
  log_->info("job {} attempt {}: re-attached to Slurm job {}", a.job_id, a.attempt, a.slurm_job_id);
  start_tracking(a);
  return &a;
}

std::vector<InFlightAttempt> SlurmRunner::in_flight() const {
  std::vector<InFlightAttempt> records;
  for (const auto& e : in_flight_) records.push_back({e.job_id, e.lease_id, e.attempt, e});
  return records;
}

asio::awaitable<JobUpdate> SlurmRunner::resume(InFlightAttempt attempt, JobReporter& reporter) {
  return awaited_update([this, attempt = std::move(attempt), &reporter](AttemptDone done) mutable {
    relaunch(executor_, std::move(attempt), reporter, std::move(done));
  });
}

void SlurmRunner::relaunch(asio::any_io_executor /*ex: the runner's*/, InFlightAttempt attempt, JobReporter& reporter,
                           AttemptDone done) {
  auto* entry = std::any_cast<JournalEntry>(&attempt.runner_data);
  if (!entry)
    return complete(std::move(done),
                    failed_update("job " + attempt.job_id + ": not an attempt journaled by the slurm runner"));
  auto attached = attach(std::move(*entry), reporter, {});
  if (auto* refused = std::get_if<JobUpdate>(&attached)) return complete(std::move(done), std::move(*refused));
  hand_over(*std::get<Attempt*>(attached), std::move(done));
}

asio::awaitable<Result<void>> SlurmRunner::abandon(InFlightAttempt attempt) {
  const auto* journaled = std::any_cast<JournalEntry>(&attempt.runner_data);
  if (!journaled) co_return fail("job " + attempt.job_id + ": not an attempt journaled by the slurm runner");
  const JournalEntry entry = *journaled;
  std::vector<std::string> ids{entry.slurm_job_id};
  auto r = co_await command(cli::scancel_argv(config_.scancel, ids));
  if (!r || r->exit_code != 0) {
    std::string why = r ? std::string(cli::trim(r->err)) : r.error().message;
    co_return fail("scancel " + entry.slurm_job_id + " failed: " + why);
  }
  std::erase_if(in_flight_, [&](const JournalEntry& e) { return e.job_id == entry.job_id && e.attempt == entry.attempt; });
  DiskCleanup cleanup{&*journal_, entry.job_id, entry.attempt, true, entry.dir, config_.keep_job_dirs, log_};
  co_await io_.run_ordered(std::move(cleanup));
  co_return Result<void>{};
}

asio::awaitable<JobUpdate> SlurmRunner::finish_following(Attempt& a) {
  if (a.untracked) co_return co_await end_untracked(a);
  if (!a.detached) co_await ship_output(a, true);  // the job has ended: everything it wrote, to the end
  JobUpdate result = std::move(*a.final);
  // Only now, with Slurm's final word (COMPLETED), is a training profile's result.json read and checked.
  if (a.kind != Attempt::Kind::command && !a.detached) {
    auto check = [u = std::move(result), dir = job_dir(a), known = a.kind == Attempt::Kind::training]() mutable {
      std::error_code ec;
      if (!known && !fs::exists(fs::path(dir) / kInputFile, ec)) return u;  // a resumed command job
      return attach_result(std::move(u), dir);
    };
    result = co_await io_.run(std::move(check));
  }
  const std::string job_id = a.job_id;
  if (!a.detached) finished_[job_id] = Finished{job_dir(a), a.attempt, true};
  tracker_.remove(a.slurm_job_id);  // tracked no more already (its final report, or detach): never a dangling record
  attempts_.erase(job_id);  // destroys `a`
  co_return result;
}

asio::awaitable<void> SlurmRunner::ship_output(Attempt& a, bool to_end) {
  // Read as much as there is (the reporter's backpressure paces us); while running, stop at a detach.
  for (OutputTail* tail : {&a.out, &a.err}) {
    for (;;) {
      if (a.detached) co_return;
      auto read = [path = tail->path_in(job_dir(a)), offset = tail->offset(), max = config_.output_chunk] {
        return read_chunk(path, offset, max);
      };
      std::string bytes = co_await io_.run(std::move(read));
      if (a.detached) co_return;
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
  if (a.slurm_job_id.empty()) {  // still preparing or in sbatch: act once the id is known
    a.stop_requested = why;
    return;
  }
  if (why == StopReason::shutdown) {
    tracker_.remove(a.slurm_job_id);
    JobUpdate u;
    u.state = JobState::running;
    u.slurm_job_id = a.slurm_job_id;
    u.message = "manager stopping: Slurm job " + a.slurm_job_id + " left running (journaled for resume)";
    a.final = std::make_unique<JobUpdate>(std::move(u));
    a.detached = true;
    wake(a);
    return;
  }
  tracker_.request_cancel(a.slurm_job_id, why == StopReason::lease_lost || why == StopReason::lease_expired ? CancelCause::lease_lost : CancelCause::user);
  log_->info("job {}: cancelling Slurm job {}", job_id, a.slurm_job_id);
  request_cycle();
}

void SlurmRunner::release(const std::string& job_id) {
  auto it = finished_.find(job_id);
  if (it == finished_.end()) return;
  Finished f = std::move(it->second);
  finished_.erase(it);
  std::erase_if(in_flight_, [&](const JournalEntry& e) { return e.job_id == job_id && e.attempt == f.attempt; });
  io_.post_ordered(DiskCleanup{&*journal_, job_id, f.attempt, f.journaled, f.dir, config_.keep_job_dirs, log_});
}

void SlurmRunner::request_cycle() {
  pacer_.hurry(PacerClock::now());
  cycle_requested_ = true;
  poll_timer_.cancel();
}

void SlurmRunner::ensure_poll_loop() {
  if (poll_running_) return;
  poll_running_ = true;
  asio::co_spawn(executor_, poll_loop(), log_failure(log_, "slurm poll loop"));
}

asio::awaitable<void> SlurmRunner::poll_loop() {
  while (!tracker_.empty()) {
    if (!cycle_requested_ && PacerClock::now() < pacer_.next_cycle()) {
      co_await wait_for_cycle();
      continue;
    }
    cycle_requested_ = false;
    co_await run_cycle();
  }
  poll_running_ = false;
}

// Sleeps until the next cycle is due, or the next exit-record listing, or request_cycle(). The listing runs on
// its own (list_exit_records), so a stalled launch_dir holds up no cycle; one at a time.
asio::awaitable<void> SlurmRunner::wait_for_cycle() {
  const bool scanning = config_.exit_scan_interval.count() > 0;
  auto wake = pacer_.next_cycle();
  if (scanning) wake = std::min(wake, next_exit_scan_);
  boost::system::error_code ec;
  poll_timer_.expires_at(wake);
  co_await poll_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (!scanning || cycle_requested_ || PacerClock::now() < next_exit_scan_) co_return;
  next_exit_scan_ = PacerClock::now() + config_.exit_scan_interval;
  if (listing_exit_records_) co_return;
  listing_exit_records_ = true;
  asio::co_spawn(executor_, list_exit_records(), log_failure(log_, "slurm exit-record listing"));
}

// One listing of kExitRecordDir: the record of a tracked job's end brings the cycle forward (unless slurmctld is
// being backed off from).
asio::awaitable<void> SlurmRunner::list_exit_records() {
  const bool fresh = co_await new_exit_records();
  listing_exit_records_ = false;
  if (!fresh) co_return;
  pacer_.hurry(PacerClock::now());
  if (pacer_.failures() > 0) co_return;
  cycle_requested_ = true;
  poll_timer_.cancel();
}

// Lists kExitRecordDir once (on the I/O threads) and marks the tracked attempts whose record is new.
asio::awaitable<bool> SlurmRunner::new_exit_records() {
  auto list = [dir = config_.launch_dir / kExitRecordDir] {
    std::set<std::string, std::less<>> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      names.insert(it->path().filename().string());
    return names;
  };
  const auto names = co_await io_.run(std::move(list));
  if (names.empty()) co_return false;  // the usual answer: no pass over ten thousand attempts
  bool fresh = false;
  for (auto& [job_id, a] : attempts_) {
    if (a->slurm_job_id.empty() || a->exit_record_seen) continue;
    const std::string_view dir = a->dir;
    // The directory's name (rfind npos + 1 = 0), or of the directory job_dir() derives.
    const std::string record =
        dir.empty() ? job_dir_name(a->job_id, a->attempt) : std::string(dir.substr(dir.rfind('/') + 1));
    if (!names.contains(record)) continue;
    a->exit_record_seen = true;
    fresh = true;
  }
  co_return fresh;
}

asio::awaitable<void> SlurmRunner::run_cycle() {
  TrackerEvent event = tracker_event::CycleStart{};
  bool changed = false;
  cycle_trouble_.clear();
  for (;;) {
    TrackerAction action = tracker_.resume(event, WallClock::now());
    for (const auto& w : action.warnings) log_->warn("slurm: {}", w);
    changed = changed || !action.reports.empty();
    deliver(std::move(action.reports));
    if (action.step == TrackerStep::cycle_done) break;
    event = co_await perform(action);
  }
  const auto outcome = !cycle_trouble_.empty() ? CycleOutcome::controller_trouble
                       : changed               ? CycleOutcome::changed
                                               : CycleOutcome::quiet;
  // A cycle over thousands of jobs allocates and frees a row for each, in the middle of the heap: glibc would
  // keep those pages for good.
  if (config_.trim_from_tracked_jobs > 0 && tracker_.size() >= config_.trim_from_tracked_jobs) ::malloc_trim(0);
  pacer_.cycle_done(PacerClock::now(), outcome, cycle_trouble_, until_expected_end());
  if (outcome != CycleOutcome::controller_trouble) {
    set_trouble("");
    look_again_at_recorded_ends();
    co_return;
  }
  auto wait = std::chrono::duration_cast<std::chrono::seconds>(pacer_.next_cycle() - PacerClock::now());
  set_trouble("slurmctld: " + cycle_trouble_ + " (" + std::to_string(pacer_.failures()) +
              " failed cycle(s) in a row; next try in " + std::to_string(wait.count()) + " s)");
}

// A job whose exit record was listed but that squeue still shows active is ending (slurmd reports the batch
// script's exit a moment later): the next cycle comes 1 s later, doubling per such look up to poll_interval, not
// after the backed-off wait, when slurmctld may have purged the job already.
void SlurmRunner::look_again_at_recorded_ends() {
  constexpr std::chrono::milliseconds kFirstLook{1000};
  std::optional<std::chrono::milliseconds> soonest;
  for (auto& [job_id, a] : attempts_) {
    if (!a->exit_record_seen || !tracker_.tracking(a->slurm_job_id)) continue;
    auto wait = std::min<std::chrono::milliseconds>(kFirstLook * (1 << std::min(a->looks_since_exit_record++, 6)),
                                                    config_.poll_interval);
    soonest = soonest ? std::min(*soonest, wait) : wait;
  }
  if (soonest) pacer_.due_within(PacerClock::now(), *soonest);
}

// How long until the soonest time limit of a running job, when one is known.
std::optional<std::chrono::milliseconds> SlurmRunner::until_expected_end() const {
  std::optional<std::chrono::milliseconds> soonest;
  const auto now = WallClock::now();
  for (const auto& [job_id, a] : attempts_) {
    if (!a->time_limit || a->slurm_job_id.empty()) continue;
    auto started = tracker_.started_at(a->slurm_job_id);
    if (!started) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*started + *a->time_limit - now);
    left = std::max(left, std::chrono::milliseconds(0));
    if (!soonest || left < *soonest) soonest = left;
  }
  return soonest;
}

void SlurmRunner::set_trouble(std::string text) {
  if (text == trouble_) return;
  if (text.empty()) log_->info("slurm: slurmctld answers again");
  else log_->warn("slurm: {}", text);
  trouble_ = std::move(text);
  if (on_trouble_change_) on_trouble_change_();
}

// Remembers, for the cycle in progress, a squeue or scancel answer that says slurmctld is failing.
void SlurmRunner::note_controller_answer(std::string_view what, const Result<cli::CommandResult>& r) {
  std::string text;
  if (!r) text = r.error().message;
  else if (r->exit_code != 0) text = std::string(cli::trim(r->err));
  if (text.empty() || !is_controller_trouble(text)) return;
  cycle_trouble_ = text.starts_with(what) ? std::move(text) : std::string(what) + ": " + text;
}

// Waits until `rpcs` more slurmctld RPCs fit in the budget, then counts them as made.
asio::awaitable<void> SlurmRunner::within_budget(int rpcs) {
  for (bool first = true;; first = false) {
    auto delay = pacer_.rpc_delay(PacerClock::now(), rpcs);
    if (delay.count() == 0) {
      if (first) budget_wait_said_ = false;
      break;
    }
    if (!budget_wait_said_) {  // once per stretch of waiting, not per call
      budget_wait_said_ = true;
      log_->info("slurm: calls to slurmctld now wait for the RPC budget ({} a minute, spread out: "
                 "rpc_budget_per_minute); the next in {} ms",
                 config_.rpc_budget_per_minute, delay.count());
    }
    asio::steady_timer t(executor_, delay);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  pacer_.spend(PacerClock::now(), rpcs);
}

asio::awaitable<TrackerEvent> SlurmRunner::perform(const TrackerAction& action) {
  switch (action.step) {
    case TrackerStep::scancel: {
      auto r = co_await command(cli::scancel_argv(config_.scancel, action.slurm_ids));
      note_controller_answer("scancel", r);
      co_return TrackerEvent(tracker_event::ScancelDone{std::move(r)});
    }
    case TrackerStep::squeue: {
      auto r = co_await command(cli::squeue_jobs_argv(config_.squeue, action.slurm_ids));
      note_controller_answer("squeue", r);
      co_return TrackerEvent(tracker_event::SqueueDone{std::move(r)});
    }
    case TrackerStep::sacct: {
      auto r = co_await command(cli::sacct_jobs_argv(config_.sacct, action.slurm_ids, cli::format_slurm_time(action.sacct_since)));
      co_return TrackerEvent(tracker_event::SacctDone{std::move(r)});
    }
    case TrackerStep::read_exit_files: co_return TrackerEvent(co_await read_exit_files(action.slurm_ids));
    case TrackerStep::cycle_done: break;
  }
  throw std::logic_error("slurm runner: nothing to perform");
}

asio::awaitable<Result<cli::CommandResult>> SlurmRunner::command(std::vector<std::string> argv) {
  // sacct asks slurmdbd; squeue and scontrol are one slurmctld RPC each, scancel one per job id.
  if (argv[0] != config_.sacct) {
    const bool scancel = argv[0] == config_.scancel;
    co_await within_budget(scancel ? static_cast<int>(argv.size()) - 1 : 1);
  }
  // Times in squeue's and sacct's answers as epoch seconds, whatever the time zones of this host and slurmctld.
  auto env = cli::scrubbed_environment();
  env["SLURM_TIME_FORMAT"] = std::string(cli::kEpochTimeFormat);
  std::optional<std::map<std::string, std::string>> scrubbed = std::move(env);
  co_return co_await run_in_slot(std::move(argv), std::move(scrubbed));
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<Result<cli::CommandResult>> SlurmRunner::run_in_slot(
    std::vector<std::string> argv, std::optional<std::map<std::string, std::string>> env) {
  auto slot = co_await command_slots_.acquire();
  co_return co_await commands_->run(std::move(argv), std::move(env), config_.command_timeout);
}
NYMPH_GCC_PR109224_END

asio::awaitable<tracker_event::ExitFilesRead> SlurmRunner::read_exit_files(const std::vector<std::string>& slurm_ids) {
  std::map<std::string, fs::path> files;
  for (const auto& id : slurm_ids) {
    auto* record = tracker_.record_of(id);
    if (!record) continue;
    files[id] = fs::path(job_dir(*static_cast<const Attempt*>(record))) / kExitStatusFile;
  }
  auto read = [files = std::move(files)] {
    tracker_event::ExitFilesRead ev;
    for (const auto& [id, path] : files) ev.status[id] = read_status_file(path);
    return ev;
  };
  co_return co_await io_.run(std::move(read));
}

void SlurmRunner::deliver(std::vector<TrackerReport> reports) {
  for (auto& r : reports) {
    if (!r.record) continue;
    Attempt& a = *static_cast<Attempt*>(r.record);
    if (!is_final(r.update.state)) {
      const bool started = r.update.state == JobState::running;
      a.reporter->update(std::move(r.update));
      if (started) wake(a);  // follow() ships its output
      continue;
    }
    log_->info("job {}: {} ({})", a.job_id, to_string(r.update.state), r.update.message);
    a.final = std::make_unique<JobUpdate>(std::move(r.update));
    wake(a);
  }
}

}  // namespace nymph::runners::slurm
