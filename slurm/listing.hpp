#pragma once
// `nymph slurm jobs`: this user's Slurm jobs, one row each, the way providers list instances.
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include "common/error.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::slurm {

// One listed job.
struct SlurmJobRow {
  std::string id;
  std::string state;        // running | starting | stopping | unknown (see listing_state)
  std::string slurm_state;  // as Slurm said it, e.g. PENDING
  std::string type;         // the partition
  std::string submitted;    // submit time, "YYYY-MM-DDTHH:MM:SS" local time as squeue's %V prints it
  std::string name;         // job name
  std::map<std::string, std::string> tags;  // "account" when Slurm knows one
  friend bool operator==(const SlurmJobRow&, const SlurmJobRow&) = default;
};

// RUNNING → running, PENDING → starting, COMPLETING/STOPPING → stopping, anything else → unknown.
std::string_view listing_state(std::string_view slurm_state);

// Parses `squeue --json` output (openapi v0.0.37/38 and later shapes: state as a string or a list, times as
// numbers or {number}) and keeps only jobs of `user` (Slurm 22.05 ignores --me with --json) that have an id
// (is_job_id). Error when the text is not JSON with a "jobs" array.
Result<std::vector<SlurmJobRow>> parse_squeue_json_jobs(std::string_view json_text, std::string_view user);

// The fallback format: `squeue --me --noheader -o "%i,%T,%P,%V,%j,%a"`.
inline constexpr std::string_view kListFormat = "%i,%T,%P,%V,%j,%a";

// Parses output in kListFormat. The job name is everything between the 5th comma and the last one (names
// may contain commas). An account of "(null)" (no accounting) gives no tag. Error quoting a bad line (also one
// whose id is not is_job_id).
Result<std::vector<SlurmJobRow>> parse_squeue_list(std::string_view text);

struct ListOptions {
  std::string squeue = "squeue";                 // path or name on PATH
  std::chrono::milliseconds timeout{30'000};     // per squeue invocation
  std::string user;                              // whose jobs; empty: the effective user's name
};

// Lists the user's jobs: `squeue --me --json` first, filtered by user; when that fails (JSON unsupported or
// no openapi plugin) `squeue --me --noheader -o kListFormat`. Runs with the Slurm-scrubbed environment.
// Returns an Error with squeue's stderr when both fail or time out. Never throws for those.
boost::asio::awaitable<Result<std::vector<SlurmJobRow>>> list_slurm_jobs(CommandRunner& commands, ListOptions options);

// {"jobs":[{"id","state","slurmState","type","submitted","name","tags":{...}}]} for --json.
boost::json::value listing_to_json(const std::vector<SlurmJobRow>& rows);

// An aligned text table with a header (ID STATE TYPE SUBMITTED NAME TAGS).
std::string listing_to_table(const std::vector<SlurmJobRow>& rows);

}  // namespace nymph::slurm
