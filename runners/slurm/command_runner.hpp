#pragma once
// The narrow interface the Slurm runner uses to run sbatch/squeue/sacct/scancel (owned by its consumer, so
// tracking and submission are testable with a fake; the real one adapts runners/child_process.hpp).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/error.hpp"

namespace nymph::runners::slurm {

// What a finished command printed and how it exited.
struct CommandResult {
  int exit_code = 0;  // exit status; 128+N when killed by signal N
  std::string out;    // standard output
  std::string err;    // standard error
};

// Runs short-lived commands.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs argv[0] (a path, or a name looked up on PATH) with `argv`. `env` replaces the environment when set
  // (nullopt: inherit). Returns the result whatever the exit code; returns an Error when the command cannot
  // be started or does not finish within `timeout` (its process group is then killed). Never throws for
  // those. Not cancellable: `timeout` bounds it.
  virtual boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv,
                                                           std::optional<std::map<std::string, std::string>> env,
                                                           std::chrono::milliseconds timeout) = 0;
};

// This process's environment without the variables that would change what Slurm commands do or print:
// SLURM_*, SBATCH_*, SQUEUE_*, SACCT_*, SCANCEL_* (the manager may itself run inside an allocation).
// SLURM_CONF is kept: it says where the cluster's configuration is, not which job we are in.
std::map<std::string, std::string> scrubbed_environment();

// The same filter applied to a given environment (for tests).
std::map<std::string, std::string> scrub_slurm_variables(std::map<std::string, std::string> env);

}  // namespace nymph::runners::slurm
