#pragma once
// chain.json: the record of a kept launch (`nymph install --slurm --keep`), in its launch directory. Every
// generation is one Slurm job of the same script; the record lists them, says whether the chain still renews
// itself, and why not. Written by `nymph install` (generation 1), by each generation's daemon (its start and end,
// its successor) and by `nymph kill` (the stop request); every change is a read-modify-write under an exclusive
// flock on <dir>/chain.lock, written atomically (0600, fsync), so concurrent writers never lose an update.
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace nymph::agent {

inline constexpr const char* kChainFile = "chain.json";
inline constexpr const char* kChainScript = "chain.sbatch";

// One allocation of the chain.
struct ChainGeneration {
  int generation = 0;
  std::string slurm_job_id;                     // empty until known
  std::optional<std::int64_t> submitted_at_ms;  // unix ms, when sbatch accepted it
  std::optional<std::int64_t> started_at_ms;    // when its daemon started (its queue wait ends)
  std::optional<std::int64_t> serving_end_ms;   // when it stops taking work (its allocation's end minus the lead)
  std::optional<std::int64_t> ended_at_ms;      // when its daemon exited
  std::string exit_reason;                      // its daemon's exitReason, once ended
  std::string submitted_by;                     // "install", "allocation" (its predecessor) or "manager"
};

struct ChainRecord {
  std::vector<ChainGeneration> generations;  // by generation, ascending
  // "renewing" (each generation submits its successor), "paused" (submissions kept failing), "ended" (no successor
  // by rule: max_generations, idle, stopped).
  std::string state = "renewing";
  std::string reason;  // why paused or ended; the last submission error while renewing
  int failures = 0;    // failed successor submissions in a row
  // Who submits successors: "allocation" (each generation, from its compute node) or "manager" (the login-node
  // manager of this user, because a generation found no sbatch on its compute node).
  std::string submitter = "allocation";
  bool stop_requested = false;  // `nymph kill`: no generation submits a successor any more

  // The entry of generation `n`, created (in order) when missing.
  ChainGeneration& at(int n);
  // The entry of generation `n`, or nullptr.
  const ChainGeneration* find(int n) const;
  // Queue waits (submission to start) of the generations that have both, oldest first.
  std::vector<std::chrono::seconds> queue_waits() const;
};

boost::json::value to_json(const ChainRecord& r);

// Parses a record; an Error names what is missing or mistyped. Never throws.
Result<ChainRecord> chain_record_from_json(const boost::json::value& v);

// Reads <dir>/chain.json; nullopt when there is none (not a kept launch). Never throws.
Result<std::optional<ChainRecord>> read_chain_record(const std::filesystem::path& dir);

// Applies `change` to <dir>/chain.json (an empty record when missing) under the chain's lock and writes it back;
// returns the record as written. The lock is held for the read, `change` and the write only. Never throws
// (`change` must not).
Result<ChainRecord> update_chain_record(const std::filesystem::path& dir,
                                        const std::function<void(ChainRecord&)>& change);

// The status file of a launch's daemon: status.json, and status-<N>.json for generation N >= 2 of a kept launch
// (generations overlap in one launch directory).
std::string status_file_name(std::int64_t generation);

// Unix milliseconds of a wall-clock time.
std::int64_t unix_ms(std::chrono::system_clock::time_point t);

}  // namespace nymph::agent
