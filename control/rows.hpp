#pragma once
// Rows of the control plane's tables (control/schema.cpp) as wire structs, and the JSON text kept in some
// columns. Each `*_columns` constant lists, in order, what the matching `*_from` reads from a statement's
// current row. A value this code would never have written (a corrupt row) throws std::runtime_error: not a
// storage outage, so a request that meets one is answered 500.
#include <cstdint>
#include <map>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

#include "control/policy.hpp"
#include "control/sql.hpp"
#include "protocol/protocol.hpp"

namespace nymph::control::rows {

// `SELECT <kWorkerColumns> FROM workers`: worker_from fills everything but running_jobs.
inline constexpr const char* kWorkerColumns =
    "id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, capacity, profiles, slurm, "
    "status, exit_reason, exit_message, directive, registered_at, last_seen, identity, generation";
protocol::WorkerInfo worker_from(const sql::Statement& q);

// `SELECT <kCapsColumns> FROM workers` (from column `first` on): what the worker offers, for dispatch.
inline constexpr const char* kCapsColumns = "runners, tags, profiles, slurm";
WorkerCaps caps_from(const sql::Statement& q, int first);

// `SELECT <kJobColumns> FROM jobs`: job_from fills everything but attempts and events.
inline constexpr const char* kJobColumns =
    "id, state, runner, kind, spec, required_tags, max_attempts, attempts, worker_id, cancel_requested, "
    "exit_code, signal, message, result, created_at, updated_at, finished_at";
protocol::JobInfo job_from(const sql::Statement& q);

// `SELECT <kAttemptColumns> FROM attempts`.
inline constexpr const char* kAttemptColumns =
    "attempt, lease_id, worker_id, state, exit_code, signal, message, slurm_job_id, assigned_at, finished_at";
protocol::AttemptInfo attempt_from(const sql::Statement& q);

// `SELECT <kEventColumns> FROM events`.
inline constexpr const char* kEventColumns =
    "attempt, lease_id, seq, state, exit_code, signal, message, slurm_job_id, result, at, received_at, reason";
protocol::EventInfo event_from(const sql::Statement& q);

// An attempt with what the store's rules need of its job.
struct AttemptRow {
  std::string lease_id;
  std::string job_id;
  int attempt = 0;
  std::string worker_id;
  protocol::AttemptState state = protocol::AttemptState::assigned;
  std::int64_t last_seq = 0;
  // From the job:
  protocol::JobState job_state = protocol::JobState::queued;
  std::optional<std::string> current_lease;
  bool cancel_requested = false;
  int attempts_made = 0;      // attempts that count against max_attempts
  int uncounted_attempts = 0; // attempts refused overCapacity that did not count
  int max_attempts = 0;
  std::string runner;
  bool runner_auto = false;   // submitted without a runner: requeued as 'auto', chosen again at dispatch
  std::optional<std::string> profile;
  std::string required_tags;  // JSON text
  std::optional<double> timeout_s;  // the job's timeoutS

  // The attempt still runs: assigned, pending or running.
  bool live() const {
    using enum protocol::AttemptState;
    return state == assigned || state == pending || state == running;
  }
  // The attempt is still its job's attempt (not lost, and the job's current lease): its lease may be
  // renewed and its events and logs accepted.
  bool current() const { return state != protocol::AttemptState::lost && current_lease == lease_id; }
};

// `SELECT <kAttemptRowColumns> FROM attempts a JOIN jobs j ON j.id=a.job_id`.
inline constexpr const char* kAttemptRowColumns =
    "a.lease_id, a.job_id, a.attempt, a.worker_id, a.state, a.last_seq, j.state, j.current_lease, "
    "j.cancel_requested, j.attempts - j.uncounted_attempts, j.max_attempts, j.runner, j.profile, j.required_tags, "
    "j.uncounted_attempts, j.runner_auto, json_extract(j.spec, '$.timeoutS')";
AttemptRow attempt_row_from(const sql::Statement& q);

// One page of a list. `candidates` are (cursor, id) pairs in list order, up to one more than `limit`. Loads
// each with `load(id)` (an optional Item) into `out` until `limit` items are taken or the next one would take
// their JSON past `max_bytes` (the first one is always taken). Returns the cursor of the last item taken when
// candidates are left over (the next page starts after it), nullopt when this is the last page.
template <class Item, class Load>
std::optional<std::string> fill_page(const std::vector<std::pair<std::string, std::string>>& candidates, int limit,
                                     std::size_t max_bytes, Load load, std::vector<Item>& out) {
  std::size_t bytes = 0;
  std::optional<std::string> last;
  for (const auto& [cursor, id] : candidates) {
    if (static_cast<int>(out.size()) >= limit) return last;
    std::optional<Item> item = load(id);
    if (!item) continue;
    std::size_t size = protocol::to_json_text(*item).size();
    if (!out.empty() && bytes + size > max_bytes) return last;
    bytes += size;
    out.push_back(std::move(*item));
    last = cursor;
  }
  return std::nullopt;
}

// JSON text of `x` for a TEXT column.
template <class T>
std::string to_text(const T& x) {
  return boost::json::serialize(boost::json::value_from(x));
}

// The readers of JSON text columns (written by to_text). Throw std::runtime_error on text that is not JSON
// or not a JobSpec; entries of the wrong type in the containers are skipped.
protocol::JobSpec spec_from(const std::string& text);
std::vector<std::string> strings_from(const std::string& text);
std::map<std::string, std::string> string_map_from(const std::string& text);
std::map<std::string, int> int_map_from(const std::string& text);

}  // namespace nymph::control::rows
