#pragma once
// `nymph run`: the composition of config, logger, token, probe, runners, control plane and daemon.
#include <filesystem>
#include <string>
#include <vector>

namespace nymph::agent {

struct RunArgs {
  std::filesystem::path config_file;
  std::vector<std::string> training_profiles;  // "name=/abs/script", added to [profiles]
};

// Runs the daemon in the foreground until it exits. Returns the process exit status: 2 for a start-up
// error (printed to stderr, naming the problem), otherwise exit_status() of the exit reason.
int run_main(const RunArgs& args);

}  // namespace nymph::agent
