#pragma once
// Blocking helpers for tests only (never for daemon code): run a command and capture its output.
#include <string>
#include <vector>

namespace nymph::test {

struct CommandOutput {
  int exit_code = -1;   // exit status, or 128+signal when killed by a signal
  std::string out;      // standard output
  std::string err;      // standard error
};

// Runs argv[0] (looked up on PATH) with `argv`, waits for it, and returns its status and output.
// `input` is written to its standard input. Throws std::runtime_error if it cannot be started.
CommandOutput run_command(const std::vector<std::string>& argv, const std::string& input = {});

// Like run_command, but as the user `user` (via runuser) from directory "/".
CommandOutput run_as(const std::string& user, const std::vector<std::string>& argv);

}  // namespace nymph::test
