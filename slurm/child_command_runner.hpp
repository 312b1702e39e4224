#pragma once
// The real CommandRunner: a thin adapter over platform::run_command (own process group, bounded output,
// SIGTERM → grace → SIGKILL of the group on timeout).
#include "slurm/command_runner.hpp"

namespace nymph::slurm {

class ChildCommandRunner final : public CommandRunner {
 public:
  // See CommandRunner::run. A command killed by a signal reports exit_code 128+signal; a timeout is an Error
  // "<program> did not finish within <timeout>".
  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv, std::optional<Environment> env,
                                                   std::chrono::milliseconds timeout) override;
};

}  // namespace nymph::slurm
