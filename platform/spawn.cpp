#include "platform/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;

namespace nymph::platform {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd above_stdio(int fd) {
  if (fd < 0 || fd > 2) return Fd(fd);
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return Fd(moved);
}

SpawnSetup::SpawnSetup() {
  ::posix_spawnattr_init(&attr_);
  ::posix_spawn_file_actions_init(&actions_);
}

SpawnSetup::~SpawnSetup() {
  ::posix_spawn_file_actions_destroy(&actions_);
  ::posix_spawnattr_destroy(&attr_);
}

int SpawnSetup::prepare(int in, int out, int err, const char* working_dir, Grouping grouping) {
  in_ = in;
  out_ = out;
  err_ = err;
  if (working_dir != nullptr) working_dir_ = working_dir;
  grouping_ = grouping;
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

namespace {

struct LinuxDirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];  // NUL-terminated, d_reclen bounds the record
};

// In the forked child: closes every descriptor from 3 on but `keep`, with system calls only (close_range, or
// a getdents64 walk of /proc/self/fd on kernels without it). Returns an errno value, 0 on success.
int close_all_but(int keep) {
  bool ranged = ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) == 0 &&
                ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0;
  if (keep <= 3) ranged = ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0;
  if (ranged) return 0;
  int dir = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return errno;
  alignas(LinuxDirent64) char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n < 0) return errno;
    if (n == 0) break;
    for (long at = 0; at < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + at);
      at += d->d_reclen;
      int fd = 0;
      bool number = d->d_name[0] != '\0';
      for (const char* c = d->d_name; *c; ++c) {
        if (*c < '0' || *c > '9') number = false;
        else fd = fd * 10 + (*c - '0');
      }
      if (number && fd > 2 && fd != keep && fd != dir) ::syscall(SYS_close, fd);
    }
  }
  ::syscall(SYS_close, dir);
  return 0;
}

// posix_spawn's job done by hand for die_with_parent(): fork (all signals blocked), in the child only system
// calls: default dispositions, own group or session, PR_SET_PDEATHSIG, standard streams, no other descriptor,
// working directory, empty mask, execve; a failed step's errno goes back through a close-on-exec pipe.
int fork_exec(pid_t& pid, const char* executable, const SpawnSetup& setup, int in, int out, int err,
              const char* working_dir, Grouping grouping, char* const* argv, char* const* envp) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
  Fd report_read = above_stdio(fds[0]);
  Fd report_write = above_stdio(fds[1]);
  if (!report_read || !report_write) return errno ? errno : EMFILE;
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    const int report = report_write.get();
    auto die = [report](int e) {
      ::write(report, &e, sizeof e);
      ::_exit(127);
    };
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // EINVAL for KILL/STOP: fine
    if ((grouping == Grouping::session ? ::setsid() : ::setpgid(0, 0)) < 0) die(errno);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(errno);
    if (::getppid() != parent) ::_exit(127);  // the agent died before the prctl took effect
    if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) die(errno);
    if (int e = close_all_but(report)) die(e);
    if (working_dir != nullptr && ::chdir(working_dir) != 0) die(errno);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(executable, argv, envp);
    die(errno);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  (void)setup;
  if (child < 0) return fork_errno;
  report_write = Fd();  // our copy: the read below ends at the child's exec (close-on-exec) or report
  int child_errno = 0;
  ssize_t n;
  do n = ::read(report_read.get(), &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return child_errno != 0 ? child_errno : ECHILD;
  }
  pid = child;
  return 0;
}

}  // namespace

int spawn(pid_t& pid, const std::string& executable, const SpawnSetup& setup, const std::vector<std::string>& argv,
          const std::optional<Environment>& env) {
  std::vector<const char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(a.c_str());
  args.push_back(nullptr);
  std::vector<std::string> entries;
  std::vector<const char*> envp;
  if (env) {
    entries.reserve(env->size());
    for (const auto& [name, value] : *env) entries.push_back(name + "=" + value);
    for (const auto& e : entries) envp.push_back(e.c_str());
    envp.push_back(nullptr);
  }
  if (setup.dies_with_parent())
    return fork_exec(pid, executable.c_str(), setup, setup.in_, setup.out_, setup.err_,
                     setup.working_dir_ ? setup.working_dir_->c_str() : nullptr, setup.grouping_,
                     const_cast<char* const*>(args.data()), env ? const_cast<char* const*>(envp.data()) : environ);
  return ::posix_spawn(&pid, executable.c_str(), setup.actions(), setup.attributes(),
                       const_cast<char* const*>(args.data()),
                       env ? const_cast<char* const*>(envp.data()) : environ);
}

}  // namespace nymph::platform
