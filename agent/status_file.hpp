#pragma once
// status.json: what `nymph launches` and `nymph kill` read about a running or finished daemon.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "common/error.hpp"

namespace nymph::agent {

// A kept launch's chain, as the running generation sees it (status.json "chain").
struct ChainStatus {
  std::int64_t generation = 1;
  std::string state;                      // waiting | retrying | submitted | paused | ended | manager
                                          // (ChainPhase, agent/successor_policy.hpp)
  std::string reason;                     // why paused or ended; the last submission error while retrying
  std::string successor_job_id;           // the next generation's Slurm job, once submitted
};

struct DaemonStatus {
  int pid = 0;
  std::string launch_id;
  std::string label;
  std::string worker_id;                  // empty until registered
  std::string state = "starting";         // starting | registering | serving | draining | exited
  std::optional<std::string> exit_reason; // set once the daemon decided to exit
  std::string message;
  std::chrono::system_clock::time_point started_at;
  std::chrono::system_clock::time_point updated_at;
  int running_jobs = 0;
  std::map<std::string, std::string> runner_trouble;  // runner name → Runner::trouble(), for those that have one
  std::optional<ChainStatus> chain;       // kept launches only
};

// How hard write_status_file makes a write stick.
enum class StatusDurability {
  synced,     // fsync before the rename: survives a power loss (a change of state or exit reason)
  unsynced,   // rename only: readers still never see a torn file (counter updates, once per finished job)
};

// Writes `status` to `path` atomically (temporary file in the same directory, rename), mode 0600.
Result<void> write_status_file(const std::filesystem::path& path, const DaemonStatus& status,
                               StatusDurability durability);

// Reads a status file written by write_status_file.
Result<DaemonStatus> read_status_file(const std::filesystem::path& path);

}  // namespace nymph::agent
