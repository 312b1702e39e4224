#include "runners/child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/process/v2/process.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

extern char** environ;

namespace nymph::runners {

namespace asio = boost::asio;
namespace bp = boost::process::v2;
using asio::experimental::awaitable_operators::operator||;
using asio::experimental::awaitable_operators::operator&&;
using boost::system::error_code;
using std::chrono::milliseconds;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr milliseconds group_poll_first{5};
constexpr milliseconds group_poll_max{250};

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Moves `fd` above 0-2 (keeping close-on-exec), so a dup2 onto a standard stream in the child can never
// clobber another source fd when the agent itself runs with a closed stdin/stdout/stderr.
Fd above_stdio(int fd) {
  if (fd < 0 || fd > 2) return Fd(fd);
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return Fd(moved);
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// Opens the parent-side fd that becomes the child's stdout/stderr; for a pipe, also returns the read end.
Result<Fd> open_output(const OutputTarget& target, Fd& read_end) {
  switch (target.kind) {
    case OutputTarget::Kind::null: {
      Fd fd = above_stdio(::open("/dev/null", O_WRONLY | O_CLOEXEC));
      if (!fd) return fail("/dev/null: " + errno_text(errno));
      return fd;
    }
    case OutputTarget::Kind::file: {
      int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (target.append ? O_APPEND : O_TRUNC);
      Fd fd = above_stdio(::open(target.path.c_str(), flags, 0600));
      if (!fd) return fail(target.path + ": " + errno_text(errno));
      return fd;
    }
    case OutputTarget::Kind::pipe:
      break;
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return fail("pipe: " + errno_text(errno));
  Fd r = above_stdio(p[0]);
  Fd w = above_stdio(p[1]);
  if (!r || !w) return fail("pipe: " + errno_text(errno));
  read_end = std::move(r);
  return w;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// execvp's search, done in the parent so a miss is an error message rather than a failed fork.
std::optional<std::string> find_on_path(const std::string& name, const Environment& env) {
  std::string path = "/usr/bin:/bin";
  if (auto it = env.find("PATH"); it != env.end()) {
    path = it->second;
  } else if (const char* own = std::getenv("PATH")) {
    path = own;
  }
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = std::min(path.find(':', begin), path.size());
    std::string dir = path.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return std::nullopt;
}

// Whether /proc shows a process of group `pgid` that is not a zombie. Without /proc, assumes there is one.
bool live_member_of_group(pid_t pgid) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return true;
  bool found = false;
  char path[300];  // "/proc/" + d_name (at most 255) + "/stat"
  char stat[512];
  while (!found) {
    const dirent* entry = ::readdir(proc);
    if (entry == nullptr) break;
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    std::snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = ::read(fd, stat, sizeof stat - 1);
    ::close(fd);
    if (n <= 0) continue;
    stat[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may contain anything, so parse after the last ')'.
    const char* rest = std::strrchr(stat, ')');
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (rest && std::sscanf(rest + 1, " %c %d %d", &state, &ppid, &pgrp) == 3)
      found = pgrp == pgid && state != 'Z' && state != 'X';
  }
  ::closedir(proc);
  return found;
}

// posix_spawn's attributes and file actions, destroyed with the object.
class SpawnSetup {
 public:
  SpawnSetup() {
    ::posix_spawnattr_init(&attr_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  // stdin/stdout/stderr from `in`/`out`/`err` (all above 2, close-on-exec); every other fd closed (glibc
  // uses close_range, or walks /proc/self/fd where the kernel lacks it); the working directory; its own
  // process group or session; default signal dispositions and an empty mask (ignored dispositions and the
  // mask would otherwise survive exec). Returns an errno value, 0 on success.
  int prepare(int in, int out, int err, const char* working_dir, Grouping grouping) {
    int rc = 0;
    auto step = [&rc](int r) {
      if (rc == 0) rc = r;
    };
    step(::posix_spawn_file_actions_adddup2(&actions_, in, 0));
    step(::posix_spawn_file_actions_adddup2(&actions_, out, 1));
    step(::posix_spawn_file_actions_adddup2(&actions_, err, 2));
    step(::posix_spawn_file_actions_addclosefrom_np(&actions_, 3));
    if (working_dir != nullptr) step(::posix_spawn_file_actions_addchdir_np(&actions_, working_dir));
    sigset_t all, none;
    ::sigfillset(&all);
    ::sigemptyset(&none);
    step(::posix_spawnattr_setsigdefault(&attr_, &all));
    step(::posix_spawnattr_setsigmask(&attr_, &none));
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    if (grouping == Grouping::session) {
      flags |= POSIX_SPAWN_SETSID;
    } else {
      flags |= POSIX_SPAWN_SETPGROUP;
      step(::posix_spawnattr_setpgroup(&attr_, 0));
    }
    step(::posix_spawnattr_setflags(&attr_, flags));
    return rc;
  }

  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attributes() const { return &attr_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------

Environment current_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

ExitStatus ExitStatus::from_wait_status(int status) {
  ExitStatus s;
  if (WIFEXITED(status))
    s.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    s.signal = WTERMSIG(status);
  return s;
}

std::string ExitStatus::describe() const {
  if (exit_code) return "exited with status " + std::to_string(*exit_code);
  if (signal) {
    const char* abbrev = ::sigabbrev_np(*signal);
    return "killed by signal " + std::to_string(*signal) + (abbrev ? std::string(" (") + abbrev + ")" : "");
  }
  return "exit status unknown";
}

struct ChildProcess::Impl {
  bp::basic_process<asio::any_io_executor> proc;
  pid_t pid = -1;
  std::optional<asio::posix::stream_descriptor> out, err;
  std::optional<ExitStatus> status;
};

ChildProcess::ChildProcess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChildProcess::ChildProcess(ChildProcess&&) noexcept = default;
ChildProcess& ChildProcess::operator=(ChildProcess&&) noexcept = default;

ChildProcess::~ChildProcess() {
  // Boost's own destructor then SIGKILLs the leader and reaps it (blocking, but it is already dying).
  if (impl_ && !impl_->status && impl_->pid > 0) ::kill(-impl_->pid, SIGKILL);
}

Result<ChildProcess> ChildProcess::launch(const asio::any_io_executor& exec, LaunchOptions options) {
  if (options.argv.empty() || options.argv[0].empty()) return fail("cannot start a process: empty argv");
  const std::string& program = options.argv[0];
  auto cannot = [&](const std::string& why) { return fail("cannot start " + program + ": " + why); };

  std::string executable = program;
  if (program.find('/') == std::string::npos) {
    auto found = find_on_path(program, options.env);
    if (!found) return cannot("not found on PATH");
    executable = *found;
  }
  if (!options.working_dir.empty()) {
    struct stat st {};
    if (::stat(options.working_dir.c_str(), &st) != 0)
      return cannot("working directory " + options.working_dir + ": " + errno_text(errno));
    if (!S_ISDIR(st.st_mode)) return cannot("working directory " + options.working_dir + ": not a directory");
  }

  Fd in = above_stdio(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!in) return cannot("/dev/null: " + errno_text(errno));
  Fd out_read, err_read;
  auto out_write = open_output(options.out, out_read);
  if (!out_write) return cannot(out_write.error().message);
  auto err_write = open_output(options.err, err_read);
  if (!err_write) return cannot(err_write.error().message);

  std::vector<std::string> env_entries;
  env_entries.reserve(options.env.size());
  for (const auto& [name, value] : options.env) env_entries.push_back(name + "=" + value);
  std::vector<const char*> envp;
  for (const auto& e : env_entries) envp.push_back(e.c_str());
  envp.push_back(nullptr);
  std::vector<const char*> argv;
  for (const auto& a : options.argv) argv.push_back(a.c_str());
  argv.push_back(nullptr);

  // posix_spawn (CLONE_VM|CLONE_VFORK) rather than Boost's fork-based launcher: no copy of the agent's page
  // tables, no code of the agent in the child, no io_context notify_fork; a failed exec is reported here
  // and glibc reaps that child. Boost.Process only attaches to the pid for SIGCHLD-based waiting.
  SpawnSetup setup;
  if (int rc = setup.prepare(in.get(), out_write->get(), err_write->get(),
                             options.working_dir.empty() ? nullptr : options.working_dir.c_str(), options.grouping))
    return cannot(errno_text(rc));
  pid_t pid = -1;
  if (int rc = ::posix_spawn(&pid, executable.c_str(), setup.actions(), setup.attributes(),
                             const_cast<char* const*>(argv.data()), const_cast<char* const*>(envp.data())))
    return cannot(errno_text(rc));
  bp::basic_process<asio::any_io_executor> proc(exec, pid);

  auto impl = std::make_unique<Impl>(Impl{std::move(proc), pid, std::nullopt, std::nullopt, std::nullopt});
  if (out_read) impl->out.emplace(exec, out_read.release());
  if (err_read) impl->err.emplace(exec, err_read.release());
  if (impl->out) impl->out->non_blocking(true);
  if (impl->err) impl->err->non_blocking(true);
  return ChildProcess(std::move(impl));
}

pid_t ChildProcess::pid() const {
  return impl_ ? impl_->pid : -1;
}

asio::posix::stream_descriptor* ChildProcess::out() {
  return impl_ && impl_->out ? &*impl_->out : nullptr;
}
asio::posix::stream_descriptor* ChildProcess::err() {
  return impl_ && impl_->err ? &*impl_->err : nullptr;
}

bool ChildProcess::signal_group(int sig) noexcept {
  return pid() > 0 && ::kill(-pid(), sig) == 0;
}

bool ChildProcess::group_alive() const noexcept {
  if (pid() <= 0 || (::kill(-pid(), 0) != 0 && errno != EPERM)) return false;
  // kill() also counts zombies, and where nothing reaps orphans (a container without an init) those would
  // stay forever: look for a member that still runs.
  return live_member_of_group(pid());
}

std::optional<ExitStatus> ChildProcess::exit_status() const {
  return impl_ ? impl_->status : std::nullopt;
}

asio::awaitable<ExitStatus> ChildProcess::wait() {
  Impl& s = *impl_;
  if (s.status) co_return *s.status;
  auto [ec, evaluated] = co_await s.proc.async_wait(use_tuple);
  (void)evaluated;  // Boost's evaluate_exit_code() turns a signal into an exit code: use the raw status
  if (ec == asio::error::operation_aborted) throw boost::system::system_error(ec);
  s.status = ec ? ExitStatus{} : ExitStatus::from_wait_status(s.proc.native_exit_code());
  // Reaped: forget the pid so Boost's destructor cannot signal a recycled one.
  s.proc.detach();
  co_return *s.status;
}

namespace {

// wait() for the left side of `||`: when it loses it is cancelled, which is not an error here.
asio::awaitable<void> wait_quietly(ChildProcess* child) {
  try {
    co_await child->wait();
  } catch (const boost::system::system_error&) {
    // cancelled: the status is collected by a later wait()
  }
}

}  // namespace

asio::awaitable<ExitStatus> ChildProcess::terminate(milliseconds grace) {
  // Cleanup must still await after the caller was cancelled.
  const bool throw_before = co_await asio::this_coro::throw_if_cancelled();
  co_await asio::this_coro::throw_if_cancelled(false);

  Impl& s = *impl_;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  if (!s.status || group_alive()) {
    signal_group(SIGTERM);
    if (!s.status) {
      timer.expires_at(deadline);
      co_await (wait_quietly(this) || timer.async_wait(use_tuple));
    }
    // The leader is gone (or the grace is over): give what is left of the group the rest of the grace.
    // (Polled: nothing signals the exit of processes that are not our children.)
    for (auto step = group_poll_first; s.status && group_alive() && std::chrono::steady_clock::now() < deadline;
         step = std::min(step * 2, group_poll_max)) {
      timer.expires_at(std::min(std::chrono::steady_clock::now() + step, deadline));
      co_await timer.async_wait(use_tuple);
    }
    if (group_alive()) signal_group(SIGKILL);
  }
  ExitStatus status = co_await wait();
  co_await asio::this_coro::throw_if_cancelled(throw_before);
  co_return status;
}

// --- run_command ----------------------------------------------------------------------------------------

namespace {

// Shared by the readers and the supervisor of one run_command call.
struct Capture {
  explicit Capture(const asio::any_io_executor& exec) : all_read(exec, std::chrono::steady_clock::time_point::max()) {}
  int readers = 0;
  bool final_drain = false;     // writers are gone or escaped: read what is buffered, then stop
  asio::steady_timer all_read;  // cancelled when the last reader finishes
};

// Reads `sd` to EOF into `into` (keeping at most `max` bytes).
asio::awaitable<void> read_bounded(asio::posix::stream_descriptor* sd, std::string* into, bool* truncated,
                                   std::size_t max, Capture* cap) {
  char buf[16384];
  std::size_t final_budget = 1024 * 1024;
  for (;;) {
    error_code ec;
    std::size_t n = sd->read_some(asio::buffer(buf), ec);
    if (!ec) {
      std::size_t keep = std::min(n, max - std::min(max, into->size()));
      into->append(buf, keep);
      if (keep < n) *truncated = true;
      if (cap->final_drain && (final_budget -= std::min(final_budget, n)) == 0) break;
      continue;
    }
    if (ec != asio::error::would_block && ec != asio::error::try_again) break;  // EOF or error
    if (cap->final_drain) break;
    co_await sd->async_wait(asio::posix::stream_descriptor::wait_read, use_tuple);
  }
  if (--cap->readers == 0) cap->all_read.cancel();
}

// After the group is gone, waits up to `grace` for the readers to reach EOF; then (a process that left the
// group still holds a pipe) lets them take what is buffered and stop.
asio::awaitable<void> finish_reading(ChildProcess* child, Capture* cap, milliseconds grace) {
  if (cap->readers > 0) {
    asio::steady_timer timer(co_await asio::this_coro::executor, grace);
    co_await (cap->all_read.async_wait(use_tuple) || timer.async_wait(use_tuple));
  }
  if (cap->readers > 0) {
    cap->final_drain = true;
    if (child->out()) child->out()->cancel();
    if (child->err()) child->err()->cancel();
  }
  while (cap->readers > 0) {
    cap->all_read.expires_at(std::chrono::steady_clock::time_point::max());
    co_await cap->all_read.async_wait(use_tuple);
  }
}

asio::awaitable<void> supervise_command(ChildProcess* child, CommandResult* result, milliseconds timeout,
                                        milliseconds grace, Capture* cap) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto first = co_await (wait_quietly(child) || timer.async_wait(use_tuple));
  result->timed_out = first.index() == 1;
  result->status = co_await child->terminate(grace);
  co_await finish_reading(child, cap, grace);
}

}  // namespace

asio::awaitable<Result<CommandResult>> run_command(std::vector<std::string> argv, Environment env, milliseconds timeout,
                                                   CommandOptions options) {
  auto exec = co_await asio::this_coro::executor;
  LaunchOptions launch{std::move(argv), std::move(env), options.working_dir};
  auto child = ChildProcess::launch(exec, std::move(launch));
  if (!child) co_return child.error();

  CommandResult result;
  Capture cap(exec);
  cap.readers = 2;
  co_await (read_bounded(child->out(), &result.out, &result.out_truncated, options.max_output, &cap) &&
            read_bounded(child->err(), &result.err, &result.err_truncated, options.max_output, &cap) &&
            supervise_command(&*child, &result, timeout, options.kill_grace, &cap));
  co_return result;
}

asio::awaitable<Result<CommandResult>> run_command(std::vector<std::string> argv, Environment env,
                                                   milliseconds timeout) {
  // A plain function: the coroutine's CommandOptions is a named local here, never a default argument.
  CommandOptions options;
  return run_command(std::move(argv), std::move(env), timeout, std::move(options));
}

}  // namespace nymph::runners
