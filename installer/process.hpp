#pragma once
// Blocking process helpers for the short-lived `nymph install / launches / kill` commands (never for the daemon):
// run a command with a deadline, start the detached daemon, and check what a pid is running. Processes are
// started with nymph::platform's pieces.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "platform/command.hpp"

namespace nymph::installer {

// Runs argv (argv[0] looked up on PATH) with this process's environment and `input` on its standard input, and
// waits at most `timeout`: platform::run_command on a private io_context (own process group, default signal
// dispositions, no file descriptors beyond 0-2, bounded output). Errors: it cannot be started, or it did not
// finish in time (its group is then killed and reaped). Never throws. For these short-lived commands only.
Result<platform::CommandResult> run_bounded(std::vector<std::string> argv, std::string input,
                                            std::chrono::milliseconds timeout);

// Starts argv[0] (an absolute path) detached from this session: a new session (setsid), standard input from
// /dev/null, standard output and error appended to `log` (created 0600 if missing), working directory `cwd`,
// default signal dispositions, no file descriptors beyond 0-2. The process is this process's child (reap it or
// exit). Returns its pid; an Error when it could not be started (exec failure included). Never throws.
Result<pid_t> spawn_detached(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                             const std::filesystem::path& log);

// The command line of `pid` from /proc/<pid>/cmdline, or nullopt when it is gone or unreadable.
std::optional<std::vector<std::string>> read_cmdline(pid_t pid);

// True when `pid` exists and its command line is exactly `argv` (guards against a recycled pid).
bool runs_command(pid_t pid, const std::vector<std::string>& argv);

// The last `max_lines` lines of the file at `path` (at most the last 64 KiB), or "" when unreadable.
std::string tail_file(const std::filesystem::path& path, int max_lines);

}  // namespace nymph::installer
