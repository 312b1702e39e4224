#include "runners/process_runner.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <system_error>
#include <utility>

#include "common/coroutine_warning.hpp"
#include "platform/child_process.hpp"
#include "platform/read_group.hpp"

namespace nymph::runners {

namespace asio = boost::asio;
using platform::ChildProcess;
using platform::Environment;
using platform::ExitStatus;
using platform::LaunchOptions;
using platform::ReadGroup;
namespace fs = std::filesystem;
using asio::experimental::awaitable_operators::operator||;
using asio::experimental::awaitable_operators::operator&&;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

struct ProcessRunner::Attempt {
  explicit Attempt(const asio::any_io_executor& exec) : wake(exec) {}
  std::optional<StopReason> stop;  // set by stop()
  bool kill = false;               // set by kill(): SIGKILL, no grace
  asio::steady_timer wake;         // expires at the job's timeout; cancelled by stop()
  fs::path dir;                    // its work directory, once created
  ChildProcess* child = nullptr;   // while supervised
};

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string_view reason_name(StopReason why) {
  switch (why) {
    case StopReason::user_cancel:
      return "user_cancel";
    case StopReason::lease_lost:
      return "lease_lost";
    case StopReason::timeout:
      return "timeout";
    case StopReason::shutdown:
      return "shutdown";
    case StopReason::lease_expired:
      return "lease_expired";
  }
  return "unknown";
}

JobUpdate failed(std::string message) {
  JobUpdate u;
  u.state = JobState::failed;
  u.message = std::move(message);
  return u;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// [A-Za-z_][A-Za-z0-9_]*
bool valid_env_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

// A job id becomes a directory name: [A-Za-z0-9._-], not starting with '.', at most 200 characters.
bool valid_job_id(std::string_view id) {
  if (id.empty() || id.size() > 200 || id[0] == '.') return false;
  for (char c : id)
    if (!(c == '_' || c == '-' || c == '.' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
          (c >= '0' && c <= '9')))
      return false;
  return true;
}

// The agent's own variables a job must not see: its secrets and an enclosing Slurm job's settings.
bool scrubbed(std::string_view name, const std::vector<std::string>& extra) {
  for (std::string_view p : {"NYMPH_", "SLURM_", "SBATCH_", "SALLOC_"})
    if (starts_with(name, p)) return true;
  for (std::string_view e : extra) {
    bool prefix = !e.empty() && e.back() == '*';
    if (prefix ? starts_with(name, e.substr(0, e.size() - 1)) : name == e) return true;
  }
  return false;
}

// Why the job's own variables are unacceptable, if they are.
std::optional<std::string> env_problem(const JobSpec& spec) {
  for (const auto& [name, value] : spec.env) {
    if (!valid_env_name(name)) return "invalid environment variable name '" + name + "'";
    if (starts_with(name, "NYMPH_")) return "environment variable " + name + ": NYMPH_* names are reserved";
    if (value.find('\0') != std::string::npos) return "environment variable " + name + " contains a NUL byte";
  }
  return std::nullopt;
}

// The agent's environment minus what is scrubbed, plus the job's variables and the NYMPH_* it is told.
Environment job_environment(const JobSpec& spec, const fs::path& dir, const ProcessRunnerConfig& cfg) {
  Environment env = platform::current_environment();
  std::erase_if(env, [&](const auto& kv) { return scrubbed(kv.first, cfg.scrub_env); });
  for (const auto& [name, value] : spec.env) env[name] = value;
  env["NYMPH_JOB_ID"] = spec.job_id;
  env["NYMPH_ATTEMPT"] = std::to_string(spec.attempt);
  env["NYMPH_WORK_DIR"] = dir.string();
  env["PWD"] = dir.string();
  return env;
}

Result<std::vector<std::string>> job_argv(const JobSpec& spec, const ProcessRunnerConfig& cfg) {
  if (spec.kind != "command")
    return fail("the process runner runs kind=command and kind=training jobs, not '" + spec.kind + "'");
  if (cfg.profiles_only)
    return fail("this worker runs approved training profiles only ([runners.process] allow_commands = false): "
                "argv and command jobs are refused");
  if (spec.command && !spec.argv.empty()) return fail("a job has either argv or command, not both");
  if (spec.command) {
    if (!cfg.allow_commands)
      return fail("command jobs are not allowed on this agent (allow_commands = false); use argv");
    std::vector<std::string> argv{"/bin/sh", "-c", *spec.command};
    return argv;
  }
  if (spec.argv.empty() || spec.argv[0].empty()) return fail("the job has no argv (or an empty argv[0])");
  return spec.argv;
}

// Everything one running attempt's coroutines share; lives in supervise()'s frame.
struct Session {
  Session(ChildProcess& c, JobReporter& r, const ProcessRunnerConfig& cfg, std::optional<StopReason>& stop,
          const bool& kill, asio::steady_timer& wake)
      : child(c), reporter(r), cfg(cfg), stop(stop), kill(kill), wake(wake), reading(wake.get_executor(), 2) {}
  ChildProcess& child;
  JobReporter& reporter;
  const ProcessRunnerConfig& cfg;
  std::optional<StopReason>& stop;
  const bool& kill;  // no grace: SIGKILL at once
  asio::steady_timer& wake;
  ReadGroup reading;  // the stdout and stderr pumps
  bool timed_out = false;
  std::optional<StopReason> stopped_by;  // the stop that ended the process (not one arriving after its exit)
  ExitStatus status;
};

// One stream's buffer of unsent output: output_chunk bytes, left uninitialised (a job that prints little touches
// few of its pages) and reused for every chunk of the stream.
struct Pending {
  explicit Pending(std::size_t size) : bytes(std::make_unique_for_overwrite<char[]>(size)), size(size) {}
  std::unique_ptr<char[]> bytes;
  std::size_t size;
  std::size_t used = 0;
  std::uint64_t offset = 0;  // stream offset of bytes[0]
  Clock::time_point first;   // when bytes[0] was read
};

asio::awaitable<void> flush(Session* s, Stream stream, Pending* p) {
  if (p->used == 0) co_return;
  std::string chunk(p->bytes.get(), p->used);  // what the outbox keeps is what was read, no more
  const std::size_t n = p->used;
  p->used = 0;
  // Suspends while the agent's queue is full; not reading meanwhile is the backpressure on the job.
  co_await s->reporter.output(stream, p->offset, std::move(chunk));
  p->offset += n;
}

// Reads one pipe to EOF and hands the bytes on in chunks, flushed when full or output_flush old.
asio::awaitable<void> pump(Session* s, asio::posix::stream_descriptor* sd, Stream stream) {
  Pending p(s->cfg.output_chunk);
  asio::steady_timer flush_timer(sd->get_executor());
  std::size_t budget = ReadGroup::kFinalDrainBudget;
  for (;;) {
    error_code ec;
    std::size_t n = sd->read_some(asio::buffer(p.bytes.get() + p.used, p.size - p.used), ec);
    if (!ec) {
      if (p.used == 0) p.first = Clock::now();
      p.used += n;
      if (p.used == p.size || Clock::now() >= p.first + s->cfg.output_flush) co_await flush(s, stream, &p);
      if (s->reading.final_drain() && (budget -= std::min(budget, n)) == 0) break;
      continue;
    }
    if (ec != asio::error::would_block && ec != asio::error::try_again) break;  // EOF (or a read error)
    if (s->reading.final_drain()) break;
    if (p.used == 0) {
      co_await sd->async_wait(asio::posix::stream_descriptor::wait_read, use_tuple);
    } else if (Clock::now() >= p.first + s->cfg.output_flush) {
      co_await flush(s, stream, &p);
    } else {
      // Waiting for readiness (not reading) loses nothing when the timer wins the race.
      flush_timer.expires_at(p.first + s->cfg.output_flush);
      co_await (sd->async_wait(asio::posix::stream_descriptor::wait_read, use_tuple) ||
                flush_timer.async_wait(use_tuple));
    }
  }
  co_await flush(s, stream, &p);
  s->reading.reader_done();
}

// Waits for the exit, a stop or the timeout; then ends the whole group and the reading.
asio::awaitable<void> watch(Session* s) {
  for (;;) {
    if (s->stop) {
      s->stopped_by = s->stop;
      break;
    }
    auto first = co_await (platform::wait_quietly(s->child) || s->wake.async_wait(use_tuple));
    // The caller cancelled run(): supervise() terminates the group and lets the exception through.
    auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none)
      throw boost::system::system_error(asio::error::operation_aborted);
    if (first.index() == 0) break;  // exited on its own
    if (!std::get<0>(std::get<1>(first))) {
      s->timed_out = true;
      break;
    }
    // wake was cancelled by stop(): the loop head records why
  }
  s->status = co_await s->child.terminate(s->kill ? std::chrono::milliseconds(0) : s->cfg.kill_grace);
  // Once the group is gone the pipes reach EOF at once, unless a process that left it (setsid) holds one.
  co_await s->reading.finish(s->child, s->cfg.kill_grace);
}

JobUpdate final_update(const Session& s, std::optional<std::chrono::seconds> timeout) {
  JobUpdate u;
  u.exit_code = s.status.exit_code;
  u.signal = s.status.signal;
  if (s.timed_out) {
    u.state = JobState::failed;
    u.message = "timed out after " + std::to_string(timeout ? timeout->count() : 0) + "s";
  } else if (s.stopped_by == StopReason::timeout) {
    u.state = JobState::failed;
    u.message = "timed out (stopped by the agent)";
  } else if (s.stopped_by) {
    u.state = JobState::cancelled;
    u.message = "cancelled (" + std::string(reason_name(*s.stopped_by)) + "); the process " + s.status.describe();
  } else if (s.status.success()) {
    u.state = JobState::succeeded;
    u.message = s.status.describe();
  } else {
    u.state = JobState::failed;
    u.message = "the process " + s.status.describe();
  }
  return u;
}

// Drives one started attempt to its final update. If the caller cancels it (or the reporter throws), the
// group is still terminated before the exception propagates.
asio::awaitable<JobUpdate> supervise(ChildProcess& child, JobReporter& reporter, const ProcessRunnerConfig& cfg,
                                     std::optional<StopReason>& stop, const bool& kill, asio::steady_timer& wake,
                                     std::optional<std::chrono::seconds> timeout) {
  Session s(child, reporter, cfg, stop, kill, wake);
  wake.expires_at(timeout ? Clock::now() + *timeout : Clock::time_point::max());
  std::exception_ptr error;
  try {
    co_await (pump(&s, child.out(), Stream::out) && pump(&s, child.err(), Stream::err) && watch(&s));
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    co_await asio::this_coro::reset_cancellation_state();
    co_await child.terminate(cfg.kill_grace);
    std::rethrow_exception(error);
  }
  co_return final_update(s, timeout);
}

// Registers an attempt under its job id for stop() while run() is inside its scope.
template <class Map>
class Registration {
 public:
  Registration(Map& map, std::string id, typename Map::mapped_type value) : map_(map), id_(std::move(id)) {
    map_.emplace(id_, value);
  }
  ~Registration() { map_.erase(id_); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  Map& map_;
  std::string id_;
};

}  // namespace

ProcessRunner::ProcessRunner(ProcessRunnerConfig config, std::shared_ptr<spdlog::logger> logger)
    : config_(std::move(config)), log_(std::move(logger)) {
  if (config_.output_chunk == 0) config_.output_chunk = 64 * 1024;
}

ProcessRunner::~ProcessRunner() {
  if (remover_) remover_->join();
}

std::string_view ProcessRunner::name() const {
  return "process";
}

// Creates `<work_dir>/<jobId>-<attempt>` afresh, mode 0700; records it for release().
Result<fs::path> ProcessRunner::make_work_dir(const JobSpec& spec) {
  if (!valid_job_id(spec.job_id)) return fail("invalid job id '" + spec.job_id + "' for a work directory name");
  std::error_code ec;
  fs::path root = fs::absolute(config_.work_dir, ec);
  if (ec) return fail("work directory root " + config_.work_dir.string() + ": " + ec.message());
  if (!fs::is_directory(root, ec)) {
    fs::create_directories(root, ec);
    if (ec) return fail("cannot create work directory root " + root.string() + ": " + ec.message());
    ::chmod(root.c_str(), 0700);
  }
  fs::path dir = root / (spec.job_id + "-" + std::to_string(spec.attempt));
  if (fs::symlink_status(dir, ec).type() != fs::file_type::not_found) discard_dir(dir);  // a stale one
  if (::mkdir(dir.c_str(), 0700) != 0)
    return fail("cannot create work directory " + dir.string() + ": " + std::strerror(errno));
  ::chmod(dir.c_str(), 0700);  // whatever the umask
  dirs_[spec.job_id].push_back(dir);
  return dir;
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<JobUpdate> ProcessRunner::run(JobSpec spec, JobReporter& reporter) {
  auto exec = co_await asio::this_coro::executor;
  const std::string who = "job " + spec.job_id + " attempt " + std::to_string(spec.attempt);
  if (attempts_.contains(spec.job_id)) co_return failed("an attempt of job " + spec.job_id + " is already running");
  Attempt attempt(exec);
  Registration registration(attempts_, spec.job_id, &attempt);

  // A training job: the profile and its input are checked before anything is created or started.
  const Profile* profile = nullptr;
  std::string input;
  Result<std::vector<std::string>> argv = std::vector<std::string>{};
  if (spec.kind == "training") {
    auto p = resolve_training(config_.profiles, spec);
    if (!p) co_return failed(p.error().message);
    auto text = render_input(**p, spec.parameters);
    if (!text) co_return failed(text.error().message);
    profile = *p;
    input = std::move(*text);
  } else {
    argv = job_argv(spec, config_);
    if (!argv) co_return failed(argv.error().message);
  }
  if (auto problem = env_problem(spec)) co_return failed(*problem);
  if (spec.timeout && spec.timeout->count() <= 0) co_return failed("timeout must be positive");
  auto dir = make_work_dir(spec);
  if (!dir) co_return failed(dir.error().message);
  attempt.dir = *dir;

  Environment env = job_environment(spec, *dir, config_);
  if (profile) {
    if (auto w = write_input(*dir, input); !w) co_return failed(w.error().message);
    const std::string in_path = (*dir / kInputFile).string(), out_path = (*dir / kResultFile).string();
    *argv = {profile->script.string(), in_path, out_path};
    env["NYMPH_INPUT"] = in_path;
    env["NYMPH_RESULT"] = out_path;
  }

  // A5: a SIGKILLed agent takes its jobs' processes with it (PR_SET_PDEATHSIG), so the control plane never
  // re-queues a job whose first copy still runs here.
  LaunchOptions launch{std::move(*argv), std::move(env), dir->string()};
  launch.die_with_parent = true;
  auto child = ChildProcess::launch(exec, std::move(launch));
  if (!child) {
    log_->warn("{}: {}", who, child.error().message);
    co_return failed(child.error().message);
  }
  log_->info("{}: started pid {} in {}", who, child->pid(), dir->string());
  reporter.update(JobUpdate{JobState::running});
  attempt.child = &*child;
  JobUpdate final =
      co_await supervise(*child, reporter, config_, attempt.stop, attempt.kill, attempt.wake, spec.timeout);
  attempt.child = nullptr;
  // result.json is read only once the process has exited 0, and only reported when it checks out.
  if (profile) final = attach_result(std::move(final), *dir);
  log_->info("{}: {} ({})", who, to_string(final.state), final.message);
  co_return final;
}
NYMPH_GCC_PR109224_END

void ProcessRunner::stop(const std::string& job_id, StopReason why) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end()) return;
  if (!it->second->stop) it->second->stop = why;
  it->second->wake.cancel();
  log_->info("job {}: stop requested ({})", job_id, reason_name(why));
}

void ProcessRunner::kill(const std::string& job_id, StopReason why) {
  auto it = attempts_.find(job_id);
  if (it == attempts_.end()) return;
  Attempt& a = *it->second;
  if (!a.stop) a.stop = why;
  a.kill = true;
  a.wake.cancel();
  // A terminate() already waiting out its grace sees the group gone once the KILL lands.
  if (a.child) a.child->signal_group(SIGKILL);
  log_->info("job {}: kill requested ({})", job_id, reason_name(why));
}

void ProcessRunner::release(const std::string& job_id) {
  auto it = dirs_.find(job_id);
  if (it == dirs_.end()) return;
  // A later attempt of the same job may be running: its directory stays until its own release().
  auto running = attempts_.find(job_id);
  const fs::path in_use = running != attempts_.end() ? running->second->dir : fs::path();
  std::vector<fs::path> keep;
  for (auto& dir : it->second) {
    if (!in_use.empty() && dir == in_use)
      keep.push_back(std::move(dir));
    else if (!config_.keep_work_dirs)
      discard_dir(dir);
  }
  if (keep.empty())
    dirs_.erase(it);
  else
    it->second = std::move(keep);
}

// Renames `dir` to a hidden name beside it, then deletes that tree on the remover thread.
void ProcessRunner::discard_dir(const fs::path& dir) {
  std::error_code ec;
  fs::path doomed = dir.parent_path() / (".removing-" + dir.filename().string() + "-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(++removals_));
  fs::rename(dir, doomed, ec);
  if (ec) {
    log_->warn("cannot remove work directory {}: {}", dir.string(), ec.message());
    return;
  }
  if (!remover_) remover_ = std::make_unique<asio::thread_pool>(1);
  asio::post(*remover_, [doomed, log = log_] {
    std::error_code rec;
    fs::remove_all(doomed, rec);
    if (rec) log->warn("cannot remove work directory {}: {}", doomed.string(), rec.message());
  });
}

}  // namespace nymph::runners
