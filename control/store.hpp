#pragma once
// The control plane's domain store: the rules of workers, jobs, attempts, events and logs over one SQLite
// file (control/sql.hpp, tables in control/schema.cpp) and the job-log files beside it
// (control/log_files.hpp). Synchronous: used only on the DB thread (control/db_worker.hpp), which wraps each
// operation in a savepoint of a batched transaction. Operations return ApiResult for protocol errors (404,
// 409, ...); they throw StorageError when the storage fails (an outage) and std::runtime_error or
// std::logic_error for anything else (a corrupt row, a bug).
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/logging.hpp"
#include "common/ulid.hpp"
#include "protocol/protocol.hpp"
#include "control/api_error.hpp"
#include "control/log_files.hpp"
#include "control/policy.hpp"
#include "control/poll_outcome.hpp"
#include "control/sql.hpp"
#include "control/tokens.hpp"

namespace nymph::control {

using WallTime = std::chrono::system_clock::time_point;

// An API token as the server knows it (never its secret).
struct TokenRecord {
  std::string hash;   // token_hash() of the secret
  std::string name;
  Role role = Role::agent;
  TokenScope scope;
  bool revoked = false;
};

// A worker credential: the worker it acts for and the agent token that worker registered with.
struct WorkerCredential {
  std::string worker_id;
  TokenRecord token;
};

// The tokens a revocation ended and the workers that were registered with them (now gone).
struct RevokeOutcome {
  protocol::RevokeResponse reply;
  std::vector<std::string> token_hashes;
};


struct RegisterOutcome {
  protocol::RegisterResponse reply;          // worker_id and cancel filled; durations by the caller
  bool created = false;                      // first registration of this launchId
  std::vector<LeaseRef> renewed_leases;      // listed attempts that carry on (adopted ones included)
  WorkerCaps caps;
  // Takeover (a registration with an identity, docs/protocol.md 8.1):
  std::vector<std::string> replaced_workers; // the predecessors, now gone
  std::vector<std::string> adopted_leases;   // listed attempts of theirs, now this worker's (same lease ids)
  std::vector<std::string> lost_leases;      // their other live attempts, now lost
  std::vector<JobNeeds> requeued;            // the jobs of those that went back to the queue
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

// What one purge deleted.
struct PurgeOutcome {
  std::int64_t jobs = 0;
  std::int64_t workers = 0;
  std::int64_t log_files = 0;
  std::vector<std::string> worker_ids;       // the workers deleted
  bool more = false;                         // a batch was full: there may be more to delete
};

// How large a page of a list may get.
struct PageSpec {
  int limit = 500;                          // items at most
  std::size_t max_bytes = 8 * 1024 * 1024;  // ends early once the items' JSON would pass this (never empty)
};

// What the clocks must track after a restart.
struct LiveState {
  std::vector<std::string> active_workers;
  std::vector<LeaseRef> live_leases;         // with their runners: a lease keeps its runner's TTL
};

// Jobs by state and workers by status: the /metrics gauges, or a change of them (deltas).
struct StateCounts {
  std::array<std::int64_t, static_cast<std::size_t>(protocol::JobState::lost) + 1> jobs{};
  std::array<std::int64_t, static_cast<std::size_t>(protocol::WorkerStatus::gone) + 1> workers{};

  std::int64_t& operator[](protocol::JobState s) { return jobs[static_cast<std::size_t>(s)]; }
  std::int64_t operator[](protocol::JobState s) const { return jobs[static_cast<std::size_t>(s)]; }
  std::int64_t& operator[](protocol::WorkerStatus s) { return workers[static_cast<std::size_t>(s)]; }
  std::int64_t operator[](protocol::WorkerStatus s) const { return workers[static_cast<std::size_t>(s)]; }
  // Adds every count of `d`.
  StateCounts& operator+=(const StateCounts& d);
  friend bool operator==(const StateCounts&, const StateCounts&) = default;
};

namespace rows {
struct AttemptRow;
}

class Store {
 public:
  // Opens (creating if needed) the database at `path` (WAL, synchronous=FULL, 5 s busy timeout) and migrates
  // it to kSchemaVersion (control/schema.hpp). The database, -wal and -shm files are 0600 whatever the
  // umask: a new database is created so, looser existing ones are tightened with a warning on `log`
  // (make_database_private). Job logs are files in the directory `<path>.logs` (created 0700 by the first
  // upload); the database holds how many bytes of each are committed. Throws StorageError naming the file
  // when it cannot be created or opened, std::runtime_error when it has a newer schema than this code.
  // `ids` makes the worker, job and lease ids (a ULID after a prefix: wrk_, job_, lse_).
  static std::unique_ptr<Store> open(const std::string& path, UlidGenerator ids = {},
                                     std::shared_ptr<spdlog::logger> log = null_logger());
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs SQL without results (BEGIN, SAVEPOINT, COMMIT, ...: the DB thread's transactions). Throws as
  // sql::Connection::exec.
  void exec(const char* sql);

  // Creates a token of `role` named `name` (agent tokens limited to `scope`); returns the token text (only
  // its hash is stored). Names need not be unique: revoking a name revokes every token of that name.
  std::string create_token(Role role, const std::string& name, WallTime now, const TokenScope& scope = {});
  // The API token whose secret is `token` (revoked ones included), or nullopt when unknown.
  std::optional<TokenRecord> find_token(const std::string& token);
  // The worker credential whose secret is `token`, with its agent token, or nullopt when unknown (or
  // replaced by a newer registration of its worker).
  std::optional<WorkerCredential> find_worker_credential(const std::string& token);
  // Records that the token with hash `hash` was used at `now`. False when there is no such token.
  bool touch_token(const std::string& hash, WallTime now);
  // Every token, oldest first, without secrets.
  protocol::TokenList list_tokens();
  // Revokes every token named `selector`, or the one whose id (first 12 hex digits of its hash) it is, and
  // ends the workers registered with them (gone, exitReason error, the message says revoked). unknownToken
  // (404) when no token has that name or id; revoking a revoked token changes nothing.
  ApiResult<RevokeOutcome> revoke_tokens(const std::string& selector, WallTime now);

  // Registers a worker under the agent token `by`, or re-registers the one with the same launchId (keeping
  // its id, clearing a gone worker's directive); issues the worker a new credential (reply.worker_token,
  // replacing the previous one) and reconciles the attempts it lists as running. forbidden (403) when the
  // launchId was registered with another token.
  // Takeover, when `req.identity` is not empty: every other worker registered with the same token and
  // identity that is not gone (a predecessor) becomes gone (exitReason killed, "replaced by worker ...") and
  // its credential stops working;
  // the listed attempts of any other worker of that token and identity (gone ones included) that are still
  // their job's current attempt move to this worker with the same lease id; a predecessor's other live
  // attempts are lost (the job re-queued while attempts remain).
  ApiResult<RegisterOutcome> register_worker(const protocol::RegisterRequest& req, const TokenRecord& by,
                                             WallTime now);
  // Records contact, reconciles `running`, and assigns queued jobs unless draining or a directive is set.
  // unknownWorker (404) for an unknown or gone worker.
  ApiResult<PollOutcome> poll(const std::string& worker_id, const protocol::PollRequest& req, WallTime now);
  // Marks the worker gone with its exit reason. unknownWorker (404) when there is no such worker.
  ApiResult<void> worker_exit(const std::string& worker_id, const protocol::ExitRequest& req, WallTime now);
  // Sets a kill or drain directive (a kill is never downgraded); returns the worker. unknownWorker (404).
  ApiResult<protocol::WorkerInfo> set_directive(const std::string& worker_id, protocol::Directive d);
  // One page of workers in id order (ids are ULIDs: registration order), after the worker id `after` (the
  // previous page's next_cursor) or from the first; next_cursor is set when more follow.
  protocol::WorkerList list_workers(const std::optional<std::string>& after = std::nullopt, const PageSpec& page = {});
  // Records contact with `worker_id` at `now` (its lastSeen, kept to the second: nothing is written when the
  // stored value is less than a second older). Returns true when it wrote. Any status; an unknown id is no-op.
  bool touch_worker(const std::string& worker_id, WallTime now);
  // Marks `worker_id` stale if it is active. Returns true when it changed.
  bool mark_stale(const std::string& worker_id);

  // Queues a job (already validated); returns it and what it needs of a worker.
  SubmitOutcome submit(const protocol::JobSubmission& sub, WallTime now);
  // One page of jobs, newest first, only those in `state` when given (without attempts and events), submitted
  // before the job whose sequence number is `before` (the previous page's next_cursor, a decimal number) or
  // from the newest; next_cursor is set when more follow.
  protocol::JobList list_jobs(std::optional<protocol::JobState> state, std::optional<std::int64_t> before,
                              const PageSpec& page);
  // One job with its attempts and events. unknownJob (404).
  ApiResult<protocol::JobInfo> get_job(const std::string& job_id);
  // Cancels a queued job at once, or asks the worker of a running one to stop it (wake_worker).
  // unknownJob (404); jobFinished (409) when it already succeeded, failed or was lost.
  ApiResult<CancelOutcome> cancel_job(const std::string& job_id, WallTime now);
  // Records an event of the attempt holding `ev.lease_id` and moves the attempt and job on. A repeated
  // (lease, seq) is acknowledged as a duplicate. Events of a lease apply in seq order (gaps allowed):
  // outOfOrder (409, with last_seq) for a seq below the highest applied that is not a duplicate.
  // unknownJob (404); leaseLost (409) when the lease is not the job's live attempt; attemptFinished (409)
  // after the attempt's final event.
  // Only the worker holding the lease may report it: forbidden (403) for `worker_id` of another worker.
  ApiResult<EventOutcome> apply_event(const std::string& job_id, const protocol::EventRequest& ev,
                                      const std::string& worker_id, WallTime now);
  // The next queued job `worker_id` can take on `runner`, leased to it now for the one slot that the event
  // (event_lease, event_seq), just applied, freed (takeNext); the lease ids are kept on that event for
  // taken_by_event. None for a gone worker or one with a directive.
  std::vector<protocol::JobAssignment> take_next(const std::string& worker_id, const std::string& runner,
                                                 const std::string& event_lease, std::int64_t event_seq, WallTime now);
  // What take_next leased for the event (event_lease, event_seq) that is still `worker_id`'s current, unstarted
  // attempt (assigned, no event yet): the jobs a repeat of that event hands again.
  std::vector<protocol::JobAssignment> taken_by_event(const std::string& event_lease, std::int64_t event_seq,
                                                      const std::string& worker_id);
  // Appends `bytes`, which start at `offset`, to `stream` of the attempt holding `lease_id`; bytes already
  // stored are skipped. Returns the committed size. unknownJob (404); leaseLost (409); forbidden (403) when
  // the lease is not `worker_id`'s; attemptFinished (409) once the attempt's final event is recorded; logGap
  // (409, with expected_offset) when `offset` is past the end; logCapReached (413) when the new bytes would
  // take the job's logs (all streams and attempts) past `max_job_bytes`. Nothing is stored on an error.
  ApiResult<std::uint64_t> append_log(const std::string& job_id, std::string_view stream, const std::string& lease_id,
                                      const std::string& worker_id, std::uint64_t offset, std::string_view bytes,
                                      std::uint64_t max_job_bytes = protocol::kLimits.max_log_bytes_per_job);
  // Up to `max_bytes` of `stream` of `attempt` (default: the job's current one) from `offset`, with the
  // committed size and whether the job is final. unknownJob (404).
  ApiResult<LogChunk> read_log(const std::string& job_id, std::string_view stream, std::uint64_t offset,
                               std::optional<int> attempt, std::size_t max_bytes);
  // Loses the attempt of `lease_id` if it is still live (lease expiry), re-queueing the job when it has
  // attempts left.
  LeaseExpiry expire_lease(const std::string& lease_id, const std::string& message, WallTime now);

  // Deletes up to `batch` finished jobs (succeeded, failed, cancelled, lost) that finished before `cutoff`, with
  // their attempts, events and logs, and up to `batch` gone or stale workers last seen before `cutoff` that
  // hold no live attempt. The jobs' log files are removed before the commit (a purge must free space on a
  // full disk, where a commit may need it): if the commit fails after all, the rows stay, their logs read as
  // an outage (503), and the next purge deletes them.
  PurgeOutcome purge(WallTime cutoff, int batch);

  // The active workers and live leases, for the clocks after a restart.
  LiveState live_state();
  // Workers by status and jobs by state as stored now (one query), the starting point of the gauges.
  StateCounts counts();
  // What the operations since the last call did to counts(): each job or worker that changed state moved
  // one count from its old state to its new one (a new row only adds, a deleted one only removes). The DB
  // thread takes them after every operation and keeps them only when the operation is committed.
  StateCounts take_changes();

 private:
  Store(sql::Connection db, LogFiles logs, UlidGenerator ids)
      : db_(std::move(db)), logs_(std::move(logs)), ids_(std::move(ids)) {}
  // `prefix` followed by a new ULID. Throws std::runtime_error when the generator fails (no randomness).
  std::string new_id(std::string_view prefix);

  std::optional<rows::AttemptRow> attempt_of(const std::string& lease_id);
  // `worker_id`'s live attempts (assigned, pending, running) that are their job's current one, in one query.
  std::vector<rows::AttemptRow> live_attempts_on(const std::string& worker_id);
  // The attempt holding `lease_id` if it is one of `job_id` and on `worker_id`: unknownJob, leaseLost or
  // forbidden otherwise.
  ApiResult<rows::AttemptRow> attempt_of_job(const std::string& job_id, const std::string& lease_id,
                                             const std::string& worker_id);
  // Answers the attempts a worker lists as running: renewed when live and its own (cancel user when a cancel
  // is pending), cancel leaseLost when not its job's current attempt or another worker's. An attempt of a
  // worker in `adoptable` (takeover) first moves to `worker_id`, keeping its lease id, and is listed in
  // `adopted`. `last_seq` (when given) gets the highest applied seq of each attempt that stays with the worker.
  void reconcile(const std::string& worker_id, const std::vector<protocol::AttemptRef>& running,
                 std::vector<protocol::CancelOrder>& cancel, std::vector<LeaseRef>& renewed,
                 const std::vector<std::string>& adoptable = {}, std::vector<std::string>* adopted = nullptr,
                 std::map<std::string, std::int64_t>* last_seq = nullptr);
  // The takeover half of register_worker (see there) for `worker_id` registering with `identity`.
  void take_over(const std::string& worker_id, const std::string& identity, const TokenRecord& by,
                 const protocol::RegisterRequest& req, RegisterOutcome& out, WallTime now);
  // The capabilities of the active, undirected workers other than `worker_id` that advertise `runner` (slurm: for
  // the runner choice of an unpinned training job; process: for the placement of a job without a timeout).
  std::vector<WorkerCaps> other_workers(const std::string& worker_id, const std::string& runner);
  std::vector<protocol::JobAssignment> dispatch(const std::string& worker_id, const WorkerCaps& caps,
                                                const std::map<std::string, int>& free, WallTime now);
  // Record a state change for take_changes(); nullopt is "no row".
  void job_moved(std::optional<protocol::JobState> from, std::optional<protocol::JobState> to);
  void worker_moved(std::optional<protocol::WorkerStatus> from, std::optional<protocol::WorkerStatus> to);
  std::optional<JobNeeds> lose_attempt(const rows::AttemptRow& a, const std::string& message, WallTime now);
  std::optional<protocol::WorkerInfo> worker(const std::string& worker_id);
  // Deletes a job's rows and log files; returns how many files there were.
  std::int64_t delete_job(const std::string& job_id);
  std::optional<protocol::JobInfo> job(const std::string& job_id);

  std::uint64_t log_size(const std::string& job_id, int attempt, std::string_view stream);
  // Log bytes stored for `job_id`, every stream of every attempt.
  std::uint64_t job_log_bytes(const std::string& job_id);
  bool has_log_chunks(const std::string& job_id, int attempt, std::string_view stream);
  std::string read_log_chunks(const std::string& job_id, int attempt, std::string_view stream, std::uint64_t offset,
                              std::size_t want);

  sql::Connection db_;
  LogFiles logs_;
  UlidGenerator ids_;
  StateCounts changes_;
};

}  // namespace nymph::control
