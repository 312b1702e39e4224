#pragma once
// The running generation's part in a kept launch: records its start and end in chain.json, and submits the
// next generation (`sbatch --parsable <chain.sbatch> <generation + 1>`) when SuccessorPolicy says so, backing off
// and pausing the chain as it says. A thin coroutine around the policy; docs/install.md "Kept launches".
#include <spdlog/logger.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "agent/config.hpp"
#include "agent/daemon.hpp"
#include "agent/successor_policy.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::agent {

struct ChainKeeperSettings {
  std::filesystem::path launch_dir;  // where chain.json is (the daemon's working directory)
  std::filesystem::path script;      // the launch's sbatch script (absolute)
  int generation = 1;                // this allocation's
  std::string slurm_job_id;          // this allocation's job
  Clock::time_point serving_end;     // the allocation's end minus the walltime lead
  SuccessorConfig policy;
  std::string sbatch = "sbatch", scancel = "scancel";
  std::chrono::milliseconds command_timeout{30'000};
  std::chrono::milliseconds recheck{5'000};  // how often the worker's idleness and stop are looked at
};

// The [chain] rules of a kept launch's config as the policy takes them.
SuccessorConfig successor_config(const ChainSection& chain);

// One successor to submit: generation `next` of the kept launch in `dir`, from `script`.
struct SuccessorSubmission {
  std::filesystem::path dir, script;
  int next = 2;
  std::string submitted_by;  // "allocation" or "manager", recorded with the generation
  std::string sbatch = "sbatch", scancel = "scancel";
  std::chrono::milliseconds command_timeout{30'000};
  std::string log_prefix = "kept launch";  // starts every log line
};

// Runs `sbatch --parsable <script> <next>` for `policy`, which must be due, and records the outcome in chain.json:
// the new generation (job id, submission time, submitted_by), or the failure, its count and, once the policy pauses,
// the paused chain. A successor submitted while `nymph kill` ran, or while another job was recorded for `next`, is
// cancelled again. The caller and the generation's keeper share this, so both paths behave the same. Returns the
// job id of the successor that stands, or "". Never throws for expected failures (they are logged and recorded).
boost::asio::awaitable<std::string> submit_successor(SuccessorSubmission s, SuccessorPolicy& policy,
                                                     slurm::CommandRunner& commands,
                                                     std::shared_ptr<spdlog::logger> log);

class ChainKeeper {
 public:
  // `commands` and `daemon` must outlive the keeper.
  ChainKeeper(boost::asio::any_io_executor ex, ChainKeeperSettings settings, slurm::CommandRunner& commands,
              Daemon& daemon, std::shared_ptr<spdlog::logger> log);

  // Records this generation's start (job id, start time) in chain.json, then submits the successor when it is
  // due, until the policy is done or finish() was called; then records this generation's end and what the chain
  // does next. A submission already running when finish() is called completes (bounded by command_timeout) and
  // is recorded. When chain.json asks for a stop (nymph kill), no successor is submitted, and one submitted
  // meanwhile is cancelled. Never throws for expected failures (they are logged and recorded).
  boost::asio::awaitable<void> run();

  // The daemon exited: stop waiting, record the end. Safe at any time.
  void finish();

 private:
  boost::asio::awaitable<void> submit();
  void publish();
  void record_start();
  void record_end();

  ChainKeeperSettings settings_;
  slurm::CommandRunner& commands_;
  Daemon& daemon_;
  std::shared_ptr<spdlog::logger> log_;
  boost::asio::steady_timer wake_;
  std::unique_ptr<SuccessorPolicy> policy_;
  std::string successor_job_id_;
  bool finished_ = false;
};

}  // namespace nymph::agent
