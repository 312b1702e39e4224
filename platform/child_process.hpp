#pragma once
// Child processes: started with posix_spawn (platform/spawn.hpp: no copy of the agent, none of its code runs in
// the child, so Boost.Process 1.81's launcher bugs in TOOLCHAIN.md do not arise) and waited for through
// Boost.Process v2 attached to the pid (SIGCHLD-based, no pidfd_open). argv only (never a shell), an
// explicit environment (replaced, not merged), stdin from /dev/null or a pipe, stdout/stderr to async pipes,
// a file or /dev/null, the child in its own process group (or session), no file descriptor inherited beyond
// 0-2 (close_range, or a /proc/self/fd walk on kernels without it: works on RHEL 7), default signal
// dispositions, and a failed exec reported to the caller with no zombie left.
// Everything here runs on the caller's io_context and never blocks it for longer than a spawn.
#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "platform/environment.hpp"
#include "platform/spawn.hpp"

namespace nymph::platform {

// Where a child's standard output or standard error goes.
struct OutputTarget {
  enum class Kind { pipe, null, file };
  Kind kind = Kind::pipe;
  std::string path;    // Kind::file: created 0600 if missing
  bool append = true;  // Kind::file: append (true) or truncate (false)

  // An async pipe the parent reads through ChildProcess::out() / err().
  static OutputTarget to_pipe() { return {}; }
  // /dev/null.
  static OutputTarget to_null() { return {Kind::null, {}, true}; }
  // The file at `path`, appended to or truncated.
  static OutputTarget to_file(std::string path, bool append = true) { return {Kind::file, std::move(path), append}; }
};

// What to start.
struct LaunchOptions {
  // Program and arguments, passed verbatim (argv[0] included). argv[0] containing '/' is used as a path
  // (relative ones resolve against working_dir); otherwise it is found with find_on_path in
  // search_path(env) (platform/environment.hpp).
  std::vector<std::string> argv;
  Environment env;          // the child's whole environment
  std::string working_dir;  // empty: the agent's working directory
  OutputTarget out = OutputTarget::to_pipe();
  OutputTarget err = OutputTarget::to_pipe();
  Grouping grouping = Grouping::process_group;
  bool input_pipe = false;  // stdin from a pipe the parent writes through ChildProcess::in(); else /dev/null
  // SIGKILL the child when the thread that launched it exits (PR_SET_PDEATHSIG; SpawnSetup::die_with_parent):
  // process jobs, so that a SIGKILLed agent leaves none running. Its descendants are not covered.
  bool die_with_parent = false;
};

// How a process ended: exactly one of exit_code / signal is set, or neither when the status could not be
// collected (another part of the process reaped it).
struct ExitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;

  // Decodes a waitpid() status word (WIFEXITED / WIFSIGNALED; never Boost's evaluate_exit_code).
  static ExitStatus from_wait_status(int status);
  // True iff the process exited with status 0.
  bool success() const { return exit_code == 0; }
  // The shell's number for it: the exit status, 128 + N when killed by signal N, -1 when unknown.
  int shell_code() const;
  // For a person: "exited with status 3", "killed by signal 9 (KILL)", "exit status unknown".
  std::string describe() const;
};

// One started child: the leader of its own process group (its pid is the group id). Not copyable; movable
// while no operation is pending on it. Single-threaded: use it from the executor it was launched on.
class ChildProcess {
 public:
  // Starts `options.argv` on `exec`. Returns an Error naming the program and the reason (a NUL byte in an
  // argument or environment variable, which exec would silently cut short; not found on PATH, exec failure
  // such as ENOENT/EACCES, working directory, pipe or spawn failure); in that case no child
  // is left behind. Never throws for those; throws std::bad_alloc only. Blocks only for the spawn itself
  // (until the child has exec'd).
  static Result<ChildProcess> launch(const boost::asio::any_io_executor& exec, LaunchOptions options);

  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // If the leader has not been reaped yet: SIGKILL to its group, then a blocking waitpid for the leader
  // (immediate in practice). Prefer `co_await terminate(grace)` before letting it go.
  ~ChildProcess();

  // The child's pid, which is also its process group id.
  pid_t pid() const;

  // The read end of the stdout / stderr pipe (non-blocking), or nullptr when that stream was not a pipe.
  // Reading to EOF means every process holding the write end (the child, or grandchildren) has exited.
  boost::asio::posix::stream_descriptor* out();
  boost::asio::posix::stream_descriptor* err();

  // The write end of the stdin pipe (non-blocking) while it is open, or nullptr (no input_pipe, or closed).
  boost::asio::posix::stream_descriptor* in();
  // Closes the stdin pipe (the child reads EOF); a pending wait on it completes with operation_aborted.
  void close_input() noexcept;

  // Sends `sig` to every process of the child's group (kill(-pgid, sig)). Returns false when the group
  // no longer exists or the leader was never started. Never throws.
  bool signal_group(int sig) noexcept;

  // True while a process of the group still runs (zombies don't count: where nothing reaps orphans they
  // would stay forever). Checks kill(-pgid, 0) first, then scans /proc only if that finds members.
  bool group_alive() const noexcept;

  // Waits for the leader to exit and reaps it. Returns at once when it already has. Cancelling it (e.g. the
  // loser of `||`) only stops the wait; it never signals the child. Throws boost::system::system_error
  // with operation_aborted when cancelled.
  boost::asio::awaitable<ExitStatus> wait();

  // The leader's status once wait() has collected it.
  std::optional<ExitStatus> exit_status() const;

  // Ends the whole group and returns the leader's status: SIGTERM to the group; once the leader has exited
  // and the group is empty, or `grace` has passed, SIGKILL to whatever is left; then reaps the leader. If the
  // leader has already exited, only leftover group members (background grandchildren) are handled, and if
  // none remain it returns at once without signalling. Safe to await after a cancellation: it disables
  // throw-on-cancel for its own waits.
  boost::asio::awaitable<ExitStatus> terminate(std::chrono::milliseconds grace);

 private:
  struct Impl;
  explicit ChildProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// child.wait() as the left side of `||`: losing (being cancelled) is not an error here, and the status is
// collected by a later wait() or terminate(). Never throws for a cancellation.
boost::asio::awaitable<void> wait_quietly(ChildProcess& child);

}  // namespace nymph::platform
