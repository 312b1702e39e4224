#pragma once
// The one way to run a short-lived command: argv (never a shell), an explicit environment, a timeout, bounded
// output, optional standard input. Used by the agent (Slurm commands, the allocation probe, the doctor) on its
// io_context, and by the short-lived installer commands through run_command_blocking.
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "platform/child_process.hpp"
#include "platform/environment.hpp"

namespace nymph::platform {

// Options of run_command beyond argv, environment and timeout.
struct CommandOptions {
  std::string working_dir;                     // empty: the caller's
  std::chrono::milliseconds kill_grace{2000};  // on timeout: SIGTERM, this long, then SIGKILL
  std::size_t max_output = 1024 * 1024;        // bytes kept per stream; the rest is read and dropped
  std::string input;                           // written to stdin, which is then closed; empty: /dev/null
};

// What a finished command printed and how it ended. Fakes of a command runner fill in exit_code, out and err.
struct CommandResult {
  int exit_code = 0;           // status.shell_code(): the exit status, 128 + N when killed by signal N
  std::string out;             // stdout, at most max_output bytes (the first ones)
  std::string err;             // stderr, likewise
  ExitStatus status;           // how it ended exactly (a signal stays a signal)
  bool out_truncated = false;  // stdout was longer than max_output
  bool err_truncated = false;
  bool timed_out = false;  // the timeout expired and the group was terminated (status is then the signal)
};

// Runs `argv` (argv[0] found as LaunchOptions says) with exactly `env` in its own process group, stdin from
// options.input or /dev/null, and captures stdout and stderr concurrently (bounded). On `timeout` the whole
// group gets SIGTERM, then SIGKILL after options.kill_grace; the result then has timed_out = true. Background
// grandchildren left in the group after the program exits are terminated the same way, and a child that stops
// reading its input does not stop the call (nor raise SIGPIPE), so it always returns. Returns an Error only when
// the program cannot be started (message names it). Not cancellable: bound it with `timeout`.
boost::asio::awaitable<Result<CommandResult>> run_command(std::vector<std::string> argv, Environment env,
                                                          std::chrono::milliseconds timeout, CommandOptions options);

// run_command with default CommandOptions. (An overload, not a default argument: GCC 12 destroys a
// defaulted class-type argument twice when the call is made inside a coroutine.)
boost::asio::awaitable<Result<CommandResult>> run_command(std::vector<std::string> argv, Environment env,
                                                          std::chrono::milliseconds timeout);

// run_command on a private io_context, for short-lived command-line tools only (it blocks the calling thread
// until the command has ended; never call it on an io_context thread). Same results and errors.
Result<CommandResult> run_command_blocking(std::vector<std::string> argv, Environment env,
                                           std::chrono::milliseconds timeout, CommandOptions options);

// `r` with a timeout turned into the Error "<program> did not finish within <timeout>", for callers that treat a
// command that hung like one that could not run. Anything else is returned as it is.
Result<CommandResult> timeout_as_error(Result<CommandResult> r, std::string_view program,
                                       std::chrono::milliseconds timeout);

}  // namespace nymph::platform
