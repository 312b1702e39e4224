#pragma once
// The real CommandRunner: a thin adapter over platform::run_command (own process group, bounded output,
// SIGTERM → grace → SIGKILL of the group on timeout).
#include <cstddef>

#include "slurm/command_runner.hpp"

namespace nymph::slurm {

class ChildCommandRunner final : public CommandRunner {
 public:
  // The most a command's standard output may hold by default: 64 MiB, a tracking squeue's lines for about 650 000
  // jobs (about 100 bytes each in kSqueueJobFormat: 991 058 bytes for 10 000 array tasks on the lab).
  static constexpr std::size_t kDefaultMaxOutput = std::size_t{64} << 20;

  // Keeps at most `max_output` bytes of each of a command's streams.
  explicit ChildCommandRunner(std::size_t max_output = kDefaultMaxOutput) : max_output_(max_output) {}

  // See CommandRunner::run. A command killed by a signal reports exit_code 128+signal; a timeout is an Error
  // "<program> did not finish within <timeout>"; a standard output longer than max_output is an Error saying so
  // (a cut answer is never read as a whole one). A longer standard error is cut.
  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv, std::optional<Environment> env,
                                                   std::chrono::milliseconds timeout) override;

 private:
  std::size_t max_output_;
};

}  // namespace nymph::slurm
