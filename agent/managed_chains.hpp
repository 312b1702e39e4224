#pragma once
// A login-node manager's part in kept launches: it submits the successors of the chains that were handed to it
// (chain.json `submitter = "manager"`: a generation found no sbatch on its compute node), for the launch
// directories beside its own, with the same SuccessorPolicy a generation uses (its idle rule aside: the manager does
// not see a generation's jobs). docs/install.md "Kept launches".
#include <spdlog/logger.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "agent/successor_policy.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::agent {

struct ManagedChainsSettings {
  std::filesystem::path launches_dir;  // <state-dir>/launches: the kept launches of this user
  std::string sbatch = "sbatch", scancel = "scancel";
  std::chrono::milliseconds command_timeout{30'000};
  std::chrono::milliseconds interval{10'000};  // how often the launch directories are looked at (at least)
};

class ManagedChains {
 public:
  // `commands` must outlive this object.
  ManagedChains(boost::asio::any_io_executor ex, ManagedChainsSettings settings, slurm::CommandRunner& commands,
                std::shared_ptr<spdlog::logger> log);

  // Every interval, and when a tracked successor is due: for each chain handed to the manager that still renews,
  // submits the running generation's
  // successor when it is due (`sbatch --parsable <launch>/chain.sbatch <generation + 1>`), records it in chain.json
  // (submittedBy "manager"), and on failures backs off and pauses the chain as a generation would. Runs until
  // finish(); a submission under way completes first. Never throws for expected failures.
  boost::asio::awaitable<void> run();

  // Stop after the current pass. Safe at any time.
  void finish();

 private:
  struct Tracked {
    int generation = 0;            // the serving generation the policy is for
    std::filesystem::path script;  // the launch's sbatch script
    std::unique_ptr<SuccessorPolicy> policy;
  };
  boost::asio::awaitable<void> scan();
  boost::asio::awaitable<void> submit(const std::filesystem::path& dir, const std::filesystem::path& script, int next,
                                      Tracked& t);

  ManagedChainsSettings settings_;
  slurm::CommandRunner& commands_;
  std::shared_ptr<spdlog::logger> log_;
  boost::asio::steady_timer wake_;
  std::map<std::string, Tracked> chains_;  // by launch directory name
  bool finished_ = false;
};

}  // namespace nymph::agent
