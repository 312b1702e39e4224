#pragma once
// `nymph launches [--json]`, `nymph launches prune`, `nymph kill <launch-id | worker label | worker id>`.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "agent/chain_record.hpp"
#include "common/error.hpp"
#include "installer/launch_record.hpp"

namespace nymph::installer {

// Where launches live and how to reach Slurm.
struct ManageContext {
  std::filesystem::path state_dir;        // <state-dir>; launches are in <state-dir>/launches/<ULID>
  std::string hostname;                   // short host name: pids are only checked on the install's host
  std::string squeue = "squeue", scancel = "scancel";
  std::chrono::milliseconds command_timeout{30'000};
};

// A kept launch's chain as `nymph launches` shows it: chain.json and squeue's view of each generation.
struct ChainView {
  agent::ChainRecord record;
  std::vector<LaunchState> states;        // per generation of record.generations, from squeue
  // The newest generation that has a job and has not started (its job queued): the next one to serve.
  std::optional<agent::ChainGeneration> next;
};

// One launch as `nymph launches` shows it.
struct LaunchInfo {
  std::string launch_id;                  // the directory name
  std::filesystem::path dir;
  std::optional<LaunchRecord> record;     // nullopt when launch.json is missing or damaged (see problem)
  std::optional<StatusSnapshot> status;   // nullopt until the daemon wrote status.json (kept launch: the status of the
                                          // newest generation that started)
  std::optional<ChainView> chain;         // kept launches (--keep) only
  LaunchState state = LaunchState::unknown;  // kept launch: running while any generation runs, else queued while
                                             // one is queued
  std::string problem;                    // why the state is unknown, if it is
};

// Every launch under the state directory, oldest first (ULID order), each classified from its record, its
// status.json, /proc (local launches on this host) and one squeue call (Slurm launches). A missing state
// directory is an empty list. Never throws.
std::vector<LaunchInfo> list_launches(const ManageContext& ctx);

// JSON of one launch / of the whole list ({"launches": [...]}).
boost::json::object launch_json(const LaunchInfo& l);
boost::json::object launches_json(const std::vector<LaunchInfo>& launches);

// A table a person can read, one launch per line.
std::string launches_text(const std::vector<LaunchInfo>& launches);

// Finds the launch whose ID (any case) or worker label is `target`, or, for a `wrk_...` target, whose daemon
// registered as that worker (the workerId in its status.json, or in any generation's of a kept launch). An exact launch ID wins over a label, a label
// over a worker ID. Never throws.
Result<LaunchInfo> find_launch(const ManageContext& ctx, const std::string& target);

// True when find_launch would find `target` (reads launch.json and status.json only: no squeue). Never throws.
bool launch_exists(const ManageContext& ctx, const std::string& target);

struct KillOutcome {
  LaunchInfo launch;                      // as found before the kill
  bool was_running = false;               // false: it had already stopped, nothing was signalled
  bool stopped = false;                   // it is gone now
  std::optional<std::string> exit_reason; // from status.json afterwards
};

// Stops a launch: for a local launch, SIGTERM to the recorded pid only after /proc/<pid>/cmdline shows that
// launch's exact daemon command line (so a recycled pid is never signalled); for a Slurm launch, scancel of
// its job; for a kept launch, the chain's stop request in chain.json first (no generation submits a successor any
// more), then scancel of every job of the launch's job name (the queued successor and the running generation,
// which drains), and once they are gone a second scancel by name for a successor submitted meanwhile. Then waits up to `timeout` for it to go away and reads exitReason. Errors: no such launch, a local
// launch of another host, signal or scancel failures. Not stopping within `timeout` is reported through
// `stopped`, not as an Error. Never throws.
Result<KillOutcome> kill_launch(const ManageContext& ctx, const std::string& target,
                                std::chrono::milliseconds timeout);

struct PruneOutcome {
  std::vector<std::string> removed;       // launch IDs whose directory and log were removed
  std::vector<std::string> kept;          // "<ULID>: running" etc.: launches that were refused
  std::vector<std::string> errors;        // removals that failed
};

// Removes the directory and log file of every exited launch; running, queued and unknown launches are kept
// and listed, and so is an exited launch whose directory holds a job directory of a Slurm job that may still be
// queued or running (an entry not marked done in the Slurm journal inside a launch directory, or in a manager
// identity's journal under <state-dir>/managers/*/slurm). The identity state directories themselves
// (<state-dir>/managers) are never touched. Leftover temporary directories of interrupted installs older than an hour are removed too.
// The log is only removed when launch.json names <...>/nymph-<ULID>.log for that launch. Never throws.
PruneOutcome prune_launches(const ManageContext& ctx);

}  // namespace nymph::installer
