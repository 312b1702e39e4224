#pragma once
// The real CommandRunner: a thin adapter over runners/child_process.hpp's run_command (own process group,
// bounded output, SIGTERM → grace → SIGKILL of the group on timeout).
#include "runners/slurm/command_runner.hpp"

namespace nymph::runners::slurm {

class ChildCommandRunner final : public CommandRunner {
 public:
  // See CommandRunner::run. A command killed by a signal reports exit_code 128+signal; a timeout is an Error
  // "<program> did not finish within <timeout>".
  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv,
                                                   std::optional<std::map<std::string, std::string>> env,
                                                   std::chrono::milliseconds timeout) override;
};

}  // namespace nymph::runners::slurm
