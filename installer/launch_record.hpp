#pragma once
// What a launch directory says about itself: launch.json (written by `nymph install`) and status.json
// (written by the daemon), and the state a launch is in given what can be observed about it now.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/value.hpp>

#include "common/error.hpp"

namespace nymph::installer {

// launch.json: what `nymph install` did. Written atomically (0600) before the daemon starts, then again with
// its pid or Slurm job id.
struct LaunchRecord {
  std::string launch_id;
  std::string worker_label;
  std::string mode;                        // "local" | "slurm"
  std::string host;                        // short host name of the install (a pid only means something there)
  std::string server;
  std::filesystem::path config_path;
  std::filesystem::path log_path;
  std::vector<std::string> command;        // the daemon's argv (local) or the argv of `exec` in the script
  std::int64_t created_at_ms = 0;
  std::optional<int> pid;                  // local: the daemon's pid once started
  std::string slurm_job_id;                // slurm: once submitted
  std::string start_error;                 // set when the daemon did not come up
  bool keep = false;                       // slurm: a kept launch (chain.json lists its generations)
};

// The daemon's status.json, as far as launches and kill need it (unknown fields are ignored).
struct StatusSnapshot {
  int pid = 0;
  std::string state;                       // starting | registering | serving | draining | exited
  std::string worker_id;
  std::optional<std::string> exit_reason;
  std::string message;
  std::map<std::string, std::string> runner_trouble;  // "runnerTrouble": runner name → what is wrong with its backend
  boost::json::value chain;                // "chain" of a kept launch's generation, as written; null when absent
};

// JSON form of a record (camelCase keys, null for absent pid / job id).
boost::json::value to_json(const LaunchRecord& record);

// Parses a record; an Error names the missing or mistyped key. Never throws.
Result<LaunchRecord> launch_record_from_json(const boost::json::value& value);

// Reads <dir>/launch.json. Never throws.
Result<LaunchRecord> read_launch_record(const std::filesystem::path& dir);

// Writes <dir>/launch.json atomically (temporary file, fsync, rename), mode 0600. Never throws.
Result<void> write_launch_record(const std::filesystem::path& dir, const LaunchRecord& record);

// Parses status.json text leniently: `pid` and `state` are required, the rest optional. Never throws.
Result<StatusSnapshot> parse_status(std::string_view text);

// Reads <dir>/status.json (or `file` in dir); an Error when it is missing or unreadable. Never throws.
Result<StatusSnapshot> read_status(const std::filesystem::path& dir, const std::string& file = "status.json");

enum class LaunchState { running, queued, exited, unknown };

// "running", "queued", "exited", "unknown".
const char* to_string(LaunchState state);

// What can be observed about a launch right now.
struct Observation {
  bool on_this_host = true;                // the record's host is this host
  bool process_running = false;            // local: the recorded pid is alive and runs the recorded command
  std::optional<std::string> slurm_state;  // slurm: squeue's %T for the job; "" = not in the queue;
                                           // nullopt = squeue could not be asked
};

// The state of a launch: local launches are running while their process is, and unknown on another host or
// without a pid; Slurm launches are queued (PENDING, REQUEUED...), running (RUNNING, CONFIGURING, COMPLETING,
// SUSPENDED...) or exited (gone from the queue or in a final state), unknown when squeue failed. A launch
// whose start failed is exited.
LaunchState classify(const LaunchRecord& record, const Observation& observation);

}  // namespace nymph::installer
