#include "platform/spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

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

// The child of die_with_parent()'s spawn shares this process's memory (CLONE_VM): it must not write anything
// of it but its own stack and ChildPlan::failed_errno, so it runs only these functions, uninstrumented (a
// sanitizer's shadow writes from the child would stay behind in the parent), with raw system calls (no libc
// wrapper that keeps state; errno is the suspended calling thread's, which nothing reads meanwhile).
#define NYMPH_SHARED_MEMORY_CHILD __attribute__((no_sanitize("address", "undefined"), noinline))

// In the child: closes every descriptor from 3 on, with system calls only (close_range, or a getdents64 walk
// of /proc/self/fd on kernels without it). Returns an errno value, 0 on success.
NYMPH_SHARED_MEMORY_CHILD int close_from_3() {
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return 0;
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
      if (number && fd > 2 && fd != dir) ::syscall(SYS_close, fd);
    }
  }
  ::syscall(SYS_close, dir);
  return 0;
}

// What the child needs, on the parent's stack (read by the child), and the one word it writes back.
struct ChildPlan {
  const char* executable;
  char* const* argv;
  char* const* envp;
  int in, out, err;
  const char* working_dir;
  Grouping grouping;
  pid_t parent;
  int failed_errno = 0;  // set by the child when a step or the exec fails; read once clone() has returned
};

// The kernel's struct sigaction (rt_sigaction(2)); SIG_DFL needs no restorer.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  unsigned long mask;
};

[[noreturn]] NYMPH_SHARED_MEMORY_CHILD void fail(ChildPlan& plan, int e) {
  plan.failed_errno = e != 0 ? e : ECHILD;
  ::syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

// The child: default dispositions, own group or session, PR_SET_PDEATHSIG, standard streams, no other
// descriptor, working directory, empty mask, execve. Runs with every signal blocked until that last mask.
NYMPH_SHARED_MEMORY_CHILD int child_main(void* arg) {
  auto& plan = *static_cast<ChildPlan*>(arg);
  const KernelSigaction dfl{SIG_DFL, 0, nullptr, 0};
  for (int sig = 1; sig < NSIG; ++sig)
    ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);  // EINVAL for KILL/STOP: fine
  if (::syscall(plan.grouping == Grouping::session ? SYS_setsid : SYS_setpgid, 0, 0) < 0) fail(plan, errno);
  if (::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail(plan, errno);
  if (::syscall(SYS_getppid) != plan.parent) fail(plan, ESRCH);  // the agent died before the prctl took effect
  // in/out/err are above 2 (above_stdio), so dup3 never sees equal descriptors.
  if (::syscall(SYS_dup3, plan.in, 0, 0) < 0 || ::syscall(SYS_dup3, plan.out, 1, 0) < 0 ||
      ::syscall(SYS_dup3, plan.err, 2, 0) < 0)
    fail(plan, errno);
  if (int e = close_from_3()) fail(plan, e);
  if (plan.working_dir != nullptr && ::syscall(SYS_chdir, plan.working_dir) != 0) fail(plan, errno);
  const unsigned long none = 0;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof none);
  ::syscall(SYS_execve, plan.executable, plan.argv, plan.envp);
  fail(plan, errno);
}

// The stack a thread's spawned children run on until they exec: mapped at the thread's first spawn, kept until
// the thread ends (only the pages a child touches cost memory). glibc's posix_spawn maps and unmaps one per
// call, but unmapping memory a child has just run on from another CPU flushes that CPU's TLB by an
// inter-processor call: 6% of the agent's CPU on a short-job run of this project's 2-vCPU (paravirtualised)
// machine. One per thread suffices: a thread stays in clone(CLONE_VFORK) until its child has exec'd or
// exited, so its spawns never overlap.
class ChildStack {
 public:
  static constexpr std::size_t size = 64 * 1024;
  ChildStack() = default;
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  ~ChildStack() {
    if (base_ != nullptr) ::munmap(base_, size);
  }
  // The stack's top (it grows down), or nullptr with errno set when it cannot be mapped.
  char* top() {
    if (base_ == nullptr) {
      void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (m == MAP_FAILED) return nullptr;
      base_ = static_cast<char*>(m);
    }
    return base_ + size;
  }

 private:
  char* base_ = nullptr;
};

// posix_spawn's job done by hand for die_with_parent(), the way glibc does it: clone(CLONE_VM | CLONE_VFORK)
// onto a stack of its own (the calling thread's ChildStack), so no page table is copied and this thread
// resumes once the child has exec'd or exited; a failed step's errno comes back in shared memory, and that
// child is reaped here. All signals are blocked around the clone: no handler of this process ever runs in the
// child.
int fork_exec(pid_t& pid, const char* executable, int in, int out, int err, const char* working_dir,
              Grouping grouping, char* const* argv, char* const* envp) {
  ChildPlan plan{executable, argv, envp, in, out, err, working_dir, grouping, ::getpid()};
  thread_local ChildStack stack;
  char* top = stack.top();
  if (top == nullptr) return errno;
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t child = ::clone(child_main, top, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (child < 0) return clone_errno;
  if (plan.failed_errno != 0) {
    int status;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return plan.failed_errno;
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
    return fork_exec(pid, executable.c_str(), setup.in_, setup.out_, setup.err_,
                     setup.working_dir_ ? setup.working_dir_->c_str() : nullptr, setup.grouping_,
                     const_cast<char* const*>(args.data()), env ? const_cast<char* const*>(envp.data()) : environ);
  return ::posix_spawn(&pid, executable.c_str(), setup.actions(), setup.attributes(),
                       const_cast<char* const*>(args.data()),
                       env ? const_cast<char* const*>(envp.data()) : environ);
}

}  // namespace nymph::platform
