#pragma once
// `nymph run`: the composition of config, logger, token, probe, runners, control plane and daemon.
#include <filesystem>
#include <string>
#include <vector>

namespace nymph::agent {

struct RunArgs {
  std::filesystem::path config_file;
  std::vector<std::string> training_profiles;  // "name=/abs/script", added to [profiles]
  bool replace = false;                        // --replace: make the running manager of this identity hand over
  int generation = 1;                          // --generation: this allocation's place in a kept launch ([chain])
};

// Runs the daemon in the foreground until it exits. Returns the process exit status: 2 for a start-up
// error (printed to stderr, naming the problem), 1 when another manager of the same identity holds the manager
// lease (one line naming its host, pid and launch), otherwise exit_status() of the exit reason.
// A manager (outside a Slurm allocation) acquires the lease of its identity before it registers (with
// `replace`: after making the holder hand over), heartbeats it every [manager] heartbeat_interval, drains when
// the lease is lost or another manager asks for it, and releases it at exit.
int run_main(const RunArgs& args);

}  // namespace nymph::agent
