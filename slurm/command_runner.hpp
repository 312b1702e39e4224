#pragma once
// The narrow interface through which the Slurm runner, the probe and the doctor run Slurm commands (owned by
// its consumers, so tracking, probing and checks are testable with a fake; slurm/child_command_runner.hpp is
// the real one).
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/error.hpp"
#include "platform/command.hpp"
#include "platform/environment.hpp"

namespace nymph::slurm {

using platform::CommandResult;
using platform::Environment;

// Runs short-lived commands.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs argv[0] (a path, or a name looked up on PATH) with `argv`. `env` replaces the environment when set
  // (nullopt: inherit). Returns the result whatever the exit code; returns an Error when the command cannot
  // be started or does not finish within `timeout` (its process group is then killed). Never throws for
  // those. Not cancellable: `timeout` bounds it.
  virtual boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv,
                                                           std::optional<Environment> env,
                                                           std::chrono::milliseconds timeout) = 0;
};

// This process's environment without the variables that would change what Slurm commands do or print:
// SLURM_*, SBATCH_*, SQUEUE_*, SACCT_*, SCANCEL_* (the manager may itself run inside an allocation).
// SLURM_CONF is kept: it says where the cluster's configuration is, not which job we are in.
Environment scrubbed_environment();

// The same filter applied to a given environment (for tests).
Environment scrub_slurm_variables(Environment env);

}  // namespace nymph::slurm
