#include "installer/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace nymph::installer {
namespace {

using Clock = std::chrono::steady_clock;

// posix_spawn attributes and file actions, released on scope exit.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup(short extra_flags) {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, static_cast<short>(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | extra_flags));
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int wait_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Moves data between the child's pipes until both outputs closed; false when the deadline passed first.
bool pump(int in, int out, int err, std::string_view input, CommandResult& result, Clock::time_point deadline) {
  std::size_t written = 0;
  if (input.empty() && in >= 0) ::close(std::exchange(in, -1));
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      if (in >= 0) ::close(in);
      return false;
    }
    pollfd fds[3] = {{out_open ? out : -1, POLLIN, 0}, {err_open ? err : -1, POLLIN, 0}, {in, POLLOUT, 0}};
    if (::poll(fds, 3, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR) break;
    char buf[16384];
    for (int k = 0; k < 2; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) (k == 0 ? out_open : err_open) = false;
      else (k == 0 ? result.out : result.err).append(buf, static_cast<std::size_t>(n));
    }
    if (in >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::write(in, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if ((n < 0 && errno != EINTR && errno != EAGAIN) || written == input.size()) ::close(std::exchange(in, -1));
    }
  }
  if (in >= 0) ::close(in);
  return true;
}

}  // namespace

Result<CommandResult> run_bounded(const std::vector<std::string>& argv, std::string_view input,
                                  std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    for (int fd : {in[0], in[1]}) ::close(fd);
    return fail(std::string("pipe: ") + std::strerror(e));
  }
  ::signal(SIGPIPE, SIG_IGN);  // a child that stops reading its input must not kill this command
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  SpawnSetup s(0);
  posix_spawn_file_actions_adddup2(&s.actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&s.actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&s.actions, err[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);
  auto args = c_argv(argv);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &s.actions, &s.attr, args.data(), environ);
  for (int fd : {in[0], out[1], err[1]}) ::close(fd);
  if (rc != 0) {
    for (int fd : {in[1], out[0], err[0]}) ::close(fd);
    return fail("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  CommandResult result;
  bool finished = pump(in[1], out[0], err[0], input, result, deadline);
  ::close(out[0]);
  ::close(err[0]);
  if (!finished) {
    ::kill(pid, SIGKILL);
    wait_status(pid);
    return fail(argv[0] + " did not finish within " + std::to_string(timeout.count() / 1000) + " s");
  }
  result.exit_code = wait_status(pid);
  return result;
}

Result<pid_t> spawn_detached(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                             const std::filesystem::path& log) {
  SpawnSetup s(POSIX_SPAWN_SETSID);
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&s.actions, 1, log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
  posix_spawn_file_actions_adddup2(&s.actions, 1, 2);
  posix_spawn_file_actions_addchdir_np(&s.actions, cwd.c_str());
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);
  auto args = c_argv(argv);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, args[0], &s.actions, &s.attr, args.data(), environ);
  if (rc != 0) return fail("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

std::optional<std::vector<std::string>> read_cmdline(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string raw = buf.str();
  if (raw.empty()) return std::nullopt;  // a zombie or a kernel thread
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < raw.size()) {
    auto end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    out.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool runs_command(pid_t pid, const std::vector<std::string>& argv) {
  if (pid <= 1 || argv.empty()) return false;
  auto cmd = read_cmdline(pid);
  return cmd && *cmd == argv;
}

std::string tail_file(const std::filesystem::path& path, int max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<long long>(in.tellg());
  in.seekg(std::max(0LL, size - 65536));
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t pos = text.size();
  for (int i = 0; i < max_lines && pos != std::string::npos && pos > 0; ++i) pos = text.rfind('\n', pos - 1);
  if (pos != std::string::npos && pos < text.size()) text.erase(0, pos + 1);
  return text.empty() ? text : text + "\n";
}

}  // namespace nymph::installer
