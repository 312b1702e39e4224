#pragma once
// posix_spawn's building blocks, shared by every way this project starts a process (ChildProcess, the
// installer's detached daemon): an owned descriptor, moving one above 0-2, and the attributes and file
// actions of a clean child. posix_spawn (CLONE_VM|CLONE_VFORK in glibc) runs none of the parent's code in the
// child, copies no page tables, reports a failed exec to the caller and reaps that child itself.
#include <spawn.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "platform/environment.hpp"

namespace nymph::platform {

// An owned file descriptor, closed on destruction. Not copyable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  int get() const { return fd_; }
  // Gives up ownership and returns the descriptor.
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// `fd` moved above 0-2 (close-on-exec), so a dup2 onto a standard stream in the child can never clobber another
// source descriptor when this process runs with a closed stdin/stdout/stderr. Takes ownership of `fd`; an
// invalid Fd (errno set) when `fd` < 0 or the move fails.
Fd above_stdio(int fd);

// How a child is detached from this process's own process group.
enum class Grouping {
  process_group,  // setpgid(0, 0): its own group in this session (jobs, commands)
  session,        // setsid(): its own session and group, no controlling terminal (detached daemons)
};

// posix_spawn's attributes and file actions, destroyed with the object. Not copyable.
class SpawnSetup {
 public:
  SpawnSetup();
  ~SpawnSetup();
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  // Standard streams from `in`/`out`/`err` (descriptors above 2, close-on-exec); every other descriptor closed
  // (glibc uses close_range, or walks /proc/self/fd on kernels without it); the working directory when not
  // null; its own process group or session; default signal dispositions and an empty signal mask (ignored
  // dispositions and the mask would otherwise survive exec). Returns an errno value, 0 on success.
  int prepare(int in, int out, int err, const char* working_dir, Grouping grouping);

  // A5 (issue 15): the child gets PR_SET_PDEATHSIG(SIGKILL): it is killed when the thread that spawned it
  // exits (the agent's io_context thread, i.e. the agent), so a SIGKILLed agent leaves no job running while
  // the control plane re-queues it. Only the child itself: its descendants are not covered (they survive
  // unless the child's death ends them). posix_spawn cannot do this, so spawn() then does posix_spawn's work
  // itself, as glibc does (clone with CLONE_VM | CLONE_VFORK: no page table copied, no code but system calls
  // in the child) and reports a failed exec the same way. Call after prepare().
  void die_with_parent() { die_with_parent_ = true; }
  bool dies_with_parent() const { return die_with_parent_; }

  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attributes() const { return &attr_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
  // What prepare() was given, for die_with_parent()'s own clone path.
  int in_ = -1, out_ = -1, err_ = -1;
  std::optional<std::string> working_dir_;
  Grouping grouping_ = Grouping::process_group;
  bool die_with_parent_ = false;

  friend int spawn(pid_t&, const std::string&, const SpawnSetup&, const std::vector<std::string>&,
                   const std::optional<Environment>&);
};

// Starts `executable` (a path, not searched on PATH) with `argv` as `setup` prepared it, with exactly `env`, or
// this process's own environment when `env` is nullopt. Returns 0 and sets `pid`, or an errno value (a failed
// exec included: ENOENT, EACCES, ...). Never throws but bad_alloc.
int spawn(pid_t& pid, const std::string& executable, const SpawnSetup& setup, const std::vector<std::string>& argv,
          const std::optional<Environment>& env);

}  // namespace nymph::platform
