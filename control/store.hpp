#pragma once
// The control plane's durable state in one SQLite file (WAL). Synchronous: used only on the DB thread
// (control/db_worker.hpp), which wraps each operation in a savepoint of a batched transaction. Operations
// return ApiResult for protocol errors (404, 409, ...) and throw std::runtime_error on storage failures.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "protocol/protocol.hpp"
#include "control/api_error.hpp"
#include "control/policy.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace nymph::control {

using WallTime = std::chrono::system_clock::time_point;

enum class Role { agent, admin };
std::string_view to_string(Role r);
std::optional<Role> parse_role(std::string_view s);

// Schema version this code creates and understands (PRAGMA user_version).
inline constexpr int kSchemaVersion = 1;

struct RegisterOutcome {
  protocol::RegisterResponse reply;          // worker_id and cancel filled; durations by the caller
  bool created = false;                      // first registration of this launchId
  std::vector<std::string> renewed_leases;   // listed attempts that carry on
  WorkerCaps caps;
};

struct PollOutcome {
  protocol::PollResponse reply;
  std::vector<std::string> renewed_leases;   // listed attempts that are live
  WorkerCaps caps;
  bool draining = false;                     // draining flag or a directive: takes no jobs
};

struct EventOutcome {
  protocol::EventResponse reply;
  bool attempt_ended = false;                // the lease needs no clock any more
  std::optional<JobNeeds> requeued;          // the job went back to the queue
  // When the attempt ended: its worker and runner, whose slot is free again.
  std::optional<std::pair<std::string, std::string>> freed_slot;
};

struct SubmitOutcome {
  protocol::JobInfo job;
  JobNeeds needs;
};

struct CancelOutcome {
  protocol::JobInfo job;
  std::optional<std::string> wake_worker;    // worker holding the attempt to stop
};

struct LeaseExpiry {
  bool expired = false;                      // the attempt was live and is now lost
  std::string worker_id;
  std::optional<JobNeeds> requeued;
};

struct LogChunk {
  std::string data;
  std::uint64_t size = 0;                    // bytes stored for that stream of that attempt
  int attempt = 0;
  bool complete = false;                     // the job is final
};

// What the clocks must track after a restart.
struct LiveState {
  std::vector<std::string> active_workers;
  std::vector<std::string> live_leases;
};

// Row counts for /metrics.
struct Counts {
  std::map<std::string, long long> workers_by_status;
  std::map<std::string, long long> jobs_by_state;
};

class Store {
 public:
  // Opens (creating if needed) the database at `path`, sets WAL + synchronous=FULL + busy_timeout, and
  // migrates the schema to kSchemaVersion. Throws std::runtime_error naming the file on failure, or when the
  // file has a newer schema than this code knows. Job logs are files in the directory `<path>.logs`
  // (created 0700 on the first upload); the database holds how many bytes of each are committed.
  static std::unique_ptr<Store> open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs SQL without results (BEGIN, SAVEPOINT, ...). Throws on error.
  void exec(const char* sql);
  // PRAGMA user_version.
  int schema_version();

  // Creates a token of `role`; returns the token text (only its SHA-256 is stored).
  std::string create_token(Role role, const std::string& name, WallTime now);
  // The role of `token`, or nullopt when unknown.
  std::optional<Role> find_token(const std::string& token);

  ApiResult<RegisterOutcome> register_worker(const protocol::RegisterRequest& req, WallTime now);
  // Records contact, reconciles `running`, and assigns queued jobs unless draining or a directive is set.
  ApiResult<PollOutcome> poll(const std::string& worker_id, const protocol::PollRequest& req, WallTime now);
  ApiResult<void> worker_exit(const std::string& worker_id, const protocol::ExitRequest& req, WallTime now);
  ApiResult<protocol::WorkerInfo> set_directive(const std::string& worker_id, protocol::Directive d);
  protocol::WorkerList list_workers();
  // Marks `worker_id` stale if it is active. Returns true when it changed.
  bool mark_stale(const std::string& worker_id);

  SubmitOutcome submit(const protocol::JobSubmission& sub, WallTime now);
  protocol::JobList list_jobs(std::optional<protocol::JobState> state, int limit);
  ApiResult<protocol::JobInfo> get_job(const std::string& job_id);
  ApiResult<CancelOutcome> cancel_job(const std::string& job_id, WallTime now);
  ApiResult<EventOutcome> apply_event(const std::string& job_id, const protocol::EventRequest& ev, WallTime now);
  ApiResult<std::uint64_t> append_log(const std::string& job_id, std::string_view stream, const std::string& lease_id,
                                      std::uint64_t offset, std::string_view bytes);
  ApiResult<LogChunk> read_log(const std::string& job_id, std::string_view stream, std::uint64_t offset,
                               std::optional<int> attempt, std::size_t max_bytes);
  // Loses the attempt of `lease_id` if it is still live (lease expiry).
  LeaseExpiry expire_lease(const std::string& lease_id, const std::string& message, WallTime now);

  LiveState live_state();
  Counts counts();

 private:
  class Stmt;
  Store(sqlite3* db, std::filesystem::path log_dir);
  void migrate();
  sqlite3_stmt* prepared(const char* sql);
  Stmt query(const char* sql);

  struct AttemptRow;
  std::optional<AttemptRow> attempt_of(const std::string& lease_id);
  void reconcile(const std::string& worker_id, const std::vector<protocol::AttemptRef>& running,
                 std::vector<protocol::CancelOrder>& cancel, std::vector<std::string>& renewed);
  std::vector<protocol::JobAssignment> dispatch(const std::string& worker_id, const WorkerCaps& caps,
                                                const std::map<std::string, int>& free, WallTime now);
  std::optional<JobNeeds> lose_attempt(const AttemptRow& a, const std::string& message, WallTime now);
  std::optional<protocol::WorkerInfo> worker(const std::string& worker_id);
  std::optional<protocol::JobInfo> job(const std::string& job_id);

  bool has_log_chunks(const std::string& job_id, int attempt, std::string_view stream);
  std::filesystem::path log_file(const std::string& job_id, int attempt, std::string_view stream) const;

  sqlite3* db_;
  std::filesystem::path log_dir_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
};

}  // namespace nymph::control
