#include "platform/child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
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
#include <cstring>
#include <utility>

namespace nymph::platform {

namespace asio = boost::asio;
namespace bp = boost::process::v2;
using asio::experimental::awaitable_operators::operator||;
using std::chrono::milliseconds;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr milliseconds group_poll_first{5};
constexpr milliseconds group_poll_max{250};

std::string errno_text(int err) {
  return std::strerror(err);
}

// A pipe as two descriptors above 0-2, or an Error.
Result<std::pair<Fd, Fd>> make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return fail("pipe: " + errno_text(errno));
  Fd r = above_stdio(p[0]);
  Fd w = above_stdio(p[1]);
  if (!r || !w) return fail("pipe: " + errno_text(errno));
  return std::make_pair(std::move(r), std::move(w));
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
  auto pipe = make_pipe();
  if (!pipe) return pipe.error();
  read_end = std::move(pipe->first);
  return std::move(pipe->second);
}

// The child's stdin: /dev/null, or the read end of a pipe whose write end goes to `write_end`.
Result<Fd> open_input(bool input_pipe, Fd& write_end) {
  if (!input_pipe) {
    Fd fd = above_stdio(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!fd) return fail("/dev/null: " + errno_text(errno));
    return fd;
  }
  auto pipe = make_pipe();
  if (!pipe) return pipe.error();
  write_end = std::move(pipe->second);
  return std::move(pipe->first);
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

// Where the program is: argv[0] itself when it names a path, else its PATH match.
Result<std::string> executable_of(const LaunchOptions& options) {
  const std::string& program = options.argv[0];
  if (program.find('/') != std::string::npos) return program;
  auto found = find_on_path(program, search_path(options.env));
  if (!found) return fail("not found on PATH");
  return *found;
}

// execve takes C strings: an argument or variable with a NUL byte in it would be cut short without a word
// ("rm -rf /important\0 --dry-run" would run without --dry-run). Values are not shown: they may be secrets.
Result<void> check_no_nul(const LaunchOptions& options) {
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  for (std::size_t i = 0; i < options.argv.size(); ++i)
    if (has_nul(options.argv[i])) return fail("argv[" + std::to_string(i) + "] contains a NUL byte");
  for (const auto& [name, value] : options.env)
    if (has_nul(name) || has_nul(value)) return fail("an environment variable contains a NUL byte");
  return {};
}

Result<void> check_working_dir(const std::string& dir) {
  if (dir.empty()) return {};
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return fail("working directory " + dir + ": " + errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return fail("working directory " + dir + ": not a directory");
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------

ExitStatus ExitStatus::from_wait_status(int status) {
  ExitStatus s;
  if (WIFEXITED(status))
    s.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    s.signal = WTERMSIG(status);
  return s;
}

int ExitStatus::shell_code() const {
  if (exit_code) return *exit_code;
  if (signal) return 128 + *signal;
  return -1;
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
  std::optional<asio::posix::stream_descriptor> out, err, in;
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

  if (auto ok = check_no_nul(options); !ok)  // named up to its NUL, as exec would have seen it
    return fail("cannot start " + program.substr(0, program.find('\0')) + ": " + ok.error().message);
  auto executable = executable_of(options);
  if (!executable) return cannot(executable.error().message);
  if (auto wd = check_working_dir(options.working_dir); !wd) return cannot(wd.error().message);

  Fd in_write, out_read, err_read;
  auto in = open_input(options.input_pipe, in_write);
  if (!in) return cannot(in.error().message);
  auto out_write = open_output(options.out, out_read);
  if (!out_write) return cannot(out_write.error().message);
  auto err_write = open_output(options.err, err_read);
  if (!err_write) return cannot(err_write.error().message);

  // Boost.Process only attaches to the pid for SIGCHLD-based waiting: no fork of the agent, no io_context
  // notify_fork, and glibc reaps a child whose exec failed.
  SpawnSetup setup;
  if (int rc = setup.prepare(in->get(), out_write->get(), err_write->get(),
                             options.working_dir.empty() ? nullptr : options.working_dir.c_str(), options.grouping))
    return cannot(errno_text(rc));
  if (options.die_with_parent) setup.die_with_parent();
  pid_t pid = -1;
  const std::optional<Environment> env(std::move(options.env));
  if (int rc = spawn(pid, *executable, setup, options.argv, env)) return cannot(errno_text(rc));
  bp::basic_process<asio::any_io_executor> proc(exec, pid);

  auto impl = std::make_unique<Impl>(Impl{std::move(proc), pid, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  if (out_read) impl->out.emplace(exec, out_read.release());
  if (err_read) impl->err.emplace(exec, err_read.release());
  if (in_write) impl->in.emplace(exec, in_write.release());
  for (auto* sd : {&impl->out, &impl->err, &impl->in})
    if (*sd) (*sd)->non_blocking(true);
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
asio::posix::stream_descriptor* ChildProcess::in() {
  return impl_ && impl_->in && impl_->in->is_open() ? &*impl_->in : nullptr;
}

void ChildProcess::close_input() noexcept {
  if (!impl_ || !impl_->in || !impl_->in->is_open()) return;
  boost::system::error_code ignored;
  impl_->in->close(ignored);
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

asio::awaitable<void> wait_quietly(ChildProcess& child) {
  try {
    co_await child.wait();
  } catch (const boost::system::system_error&) {
    // cancelled: the status is collected by a later wait()
  }
}

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
      co_await (wait_quietly(*this) || timer.async_wait(use_tuple));
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

}  // namespace nymph::platform
