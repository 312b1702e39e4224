#pragma once
// Wire types of the control-plane protocol /v1: the enumerations and the message structs, as plain values.
// docs/protocol.md is the normative description; protocol/json.hpp converts these to and from JSON and
// protocol/routes.hpp names the URL space they travel on.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>


namespace nymph::protocol {

// The protocol version this code speaks (sent as `protocol` at registration; the path prefix is /v1).
inline constexpr int kVersion = 1;

// Limits a /v1 server states and enforces (docs/protocol.md, "Limits"). A request beyond one of them gets
// 413 (body) or 400 (the rest) with a message naming the limit.
struct Limits {
  std::size_t max_json_body = 4 * 1024 * 1024;  // bytes of one JSON request body
  std::size_t max_log_chunk = 8 * 1024 * 1024;  // bytes of one log PUT body
  std::size_t max_header_bytes = 16 * 1024;     // request line + headers
  int max_depth = 32;                           // JSON nesting
  std::size_t max_string = 2 * 1024 * 1024;     // bytes of any JSON string (job parameters may be large)
  std::size_t max_array = 10'000;               // elements of any JSON array, members of any JSON object
  std::size_t max_name = 256;                   // ids, labels, runner/profile names, tag keys and values
  // Log bytes stored per job, both streams of all its attempts together: an upload past it gets 413
  // logCapReached and stores nothing.
  std::uint64_t max_log_bytes_per_job = std::uint64_t{1} << 30;
  // Pages of GET /v1/jobs and GET /v1/workers: the largest `limit` (400 beyond), and the JSON size after which
  // a page ends early, with a nextCursor (it always holds at least one item).
  int max_jobs_page = 10'000;
  int max_workers_page = 1000;
  std::size_t max_page_bytes = 8 * 1024 * 1024;
};
inline constexpr Limits kLimits{};

// ---------------------------------------------------------------------------------------------------------
// Enumerations (wire names in comments). to_string gives the wire name; parse_* returns nullopt if unknown.

// State reported in an event for one attempt.
enum class EventState { pending, running, succeeded, failed, cancelled, lost };
// Job state as the control plane shows it. queued -> running -> (cancelling ->) final.
enum class JobState { queued, running, cancelling, succeeded, failed, cancelled, lost };
// Attempt state: assigned (leased, no event yet), then what the worker reported, or lost on lease expiry.
enum class AttemptState { assigned, pending, running, succeeded, failed, cancelled, lost };
// Why a poll reply asks the worker to stop an attempt: "user", "leaseLost".
enum class CancelReason { user, lease_lost };
// Directive in a poll reply: "kill" (stop now, exitReason killed) or "drain" (no new jobs, exit when idle).
enum class Directive { kill, drain };
// Why a worker exited: "sigterm", "sigint", "killed", "walltime", "idle", "error".
enum class ExitReason { sigterm, sigint, killed, walltime, idle, error };
// Worker status: "active", "stale" (no contact for staleAfterS), "gone" (sent /exit).
enum class WorkerStatus { active, stale, gone };
// A job's log stream: "stdout", "stderr" (the {stream} of /v1/jobs/{id}/logs/{stream}).
enum class LogStream { out, err };
// Why a worker reports an attempt `lost` (docs/protocol.md 8.3): "workerStopping" (stopped because the
// worker is going away: SIGTERM, walltime, kill directive, its allocation cancelled), "leaseExpired" (the
// worker's own side of the lease ran out), "overCapacity" (an assignment beyond the worker's advertised
// capacity: refused, never started; it does not count as an attempt).
enum class EventReason { worker_stopping, lease_expired, over_capacity };

std::string_view to_string(EventState s);
std::string_view to_string(JobState s);
std::string_view to_string(AttemptState s);
std::string_view to_string(CancelReason r);
std::string_view to_string(Directive d);
std::string_view to_string(ExitReason r);
std::string_view to_string(WorkerStatus s);
std::string_view to_string(LogStream s);
std::string_view to_string(EventReason r);
std::optional<EventState> parse_event_state(std::string_view s);
std::optional<JobState> parse_job_state(std::string_view s);
std::optional<AttemptState> parse_attempt_state(std::string_view s);
std::optional<CancelReason> parse_cancel_reason(std::string_view s);
std::optional<Directive> parse_directive(std::string_view s);
std::optional<ExitReason> parse_exit_reason(std::string_view s);
std::optional<WorkerStatus> parse_worker_status(std::string_view s);
std::optional<LogStream> parse_log_stream(std::string_view s);
std::optional<EventReason> parse_event_reason(std::string_view s);

// True for succeeded, failed, cancelled, lost.
bool is_final(JobState s);
bool is_final(EventState s);
bool is_final(AttemptState s);

// ---------------------------------------------------------------------------------------------------------
// Shared pieces

// Body of every 4xx/5xx reply: {"error":{"code":"...","message":"...", "expectedOffset": N}}.
// `expected_offset` is set only for code "logGap", `last_seq` only for "outOfOrder".
struct ErrorBody {
  std::string code;
  std::string message;
  std::optional<std::uint64_t> expected_offset;
  std::optional<std::int64_t> last_seq;  // the highest seq applied for that lease
};

// The largest `seq` of an event (docs/protocol.md 8.3): a seq outside 1..kMaxEventSeq is 400.
inline constexpr std::int64_t kMaxEventSeq = 1'000'000;

// One attempt a worker holds: the job and the lease of the attempt.
struct AttemptRef {
  std::string job_id;
  std::string lease_id;
};

// The Slurm allocation a worker itself runs in (registration, only when backend == "slurm").
struct SlurmAllocation {
  std::string job_id;
  std::string partition;
  std::optional<std::string> end_time;  // RFC 3339 UTC; absent for an unlimited job
  // The walltime lead: the worker takes no new work in the last lead_s seconds before end_time (absent: the
  // agent's 120 s, kDefaultWalltimeLeadS). 0 to 86 400.
  std::optional<std::int64_t> lead_s;
};

// The walltime lead of a worker that advertises none (the agent's, agent/lifecycle.hpp).
inline constexpr std::int64_t kDefaultWalltimeLeadS = 120;
// The longest walltime lead a worker may advertise: a day.
inline constexpr std::int64_t kMaxWalltimeLeadS = 86'400;

// kind=training: the approved profile to run and its parameters (a JSON object, passed as data).
struct Payload {
  std::string profile;
  boost::json::object parameters;
};

// The longest job timeout (timeoutS): 100 years, common/duration.hpp's kMaxDuration, in seconds. A longer one is
// refused at submission; a worker treats one from an older server as this long.
inline constexpr double kMaxTimeoutS = 3'153'600'000;

// What to run, as submitted and as handed to the worker. kind=command: exactly one of argv (non-empty) or
// command. kind=training: payload, neither argv nor command.
struct JobSpec {
  std::optional<std::vector<std::string>> argv;
  std::optional<std::string> command;        // run by /bin/sh -c when the worker allows commands
  std::map<std::string, std::string> env;    // names match [A-Za-z_][A-Za-z0-9_]*
  std::optional<double> timeout_s;           // > 0, at most kMaxTimeoutS
  boost::json::object run_config;            // runConfig, e.g. {"slurm":{"partition":"debug"}}
  std::optional<Payload> payload;
};

// ---------------------------------------------------------------------------------------------------------
// Worker endpoints (role agent)

// POST /v1/workers
struct RegisterRequest {
  std::string launch_id;                           // stable across restarts of one launch (a ULID)
  std::string label;
  std::string hostname;
  std::int64_t pid = 0;
  std::string version;                             // agent version
  int protocol = kVersion;
  std::string backend = "local";                   // "local" | "slurm"
  std::vector<std::string> runners;                // e.g. ["process","slurm"]
  std::map<std::string, std::string> tags;         // e.g. {"host":"slurm"}
  std::map<std::string, int> capacity;             // runner -> concurrent attempts
  std::vector<std::string> profiles;               // training profile names
  std::optional<SlurmAllocation> slurm;            // only when backend == "slurm"
  std::vector<AttemptRef> running;                 // attempts still held (after an agent restart)
  // Who this worker acts for beyond one launch: "<unix user>@<cluster>" of a login-node manager (printable
  // ASCII, at most 200 bytes; absent or empty for workers without one, e.g. `nymph run --slurm`). A
  // registration with an identity takes over the other workers of the same agent token and identity
  // (docs/protocol.md 8.1, "Takeover"): they become gone, and the attempts of theirs listed in `running`
  // move to this worker with their lease ids.
  std::optional<std::string> identity;
  // The generation of a kept launch (`nymph install --slurm --keep`): each allocation of the chain registers with
  // the launch's launchId and its own generation, 1 to kMaxGeneration, and is its own worker. Absent: 1.
  std::int64_t generation = 1;
};

// The most generations one kept launch may have.
inline constexpr std::int64_t kMaxGeneration = 1'000'000;

// A stop order for one attempt, in poll and register replies.
struct CancelOrder {
  std::string job_id;
  std::string lease_id;
  CancelReason reason = CancelReason::user;
};

// 201 reply to POST /v1/workers (200 when re-registering an existing launchId).
struct RegisterResponse {
  std::string worker_id;
  // The worker credential: the bearer token of this worker's own operations (poll, exit, events, logs),
  // issued anew at each registration. Empty from a server that does not issue one (then the agent token).
  std::string worker_token;
  double poll_timeout_s = 30;
  double lease_ttl_s = 90;
  // Runner -> lease TTL in seconds, for the worker's runners whose leases have a TTL other than lease_ttl_s.
  std::map<std::string, double> runner_lease_ttl_s;
  double stale_after_s = 60;
  int protocol = kVersion;
  std::vector<CancelOrder> cancel;  // attempts from `running` that the worker must stop
  // leaseId -> the highest event seq applied, for each attempt of `running` that stays with this worker
  // (renewed or taken over): the worker's next event of that lease must use a higher seq (a repeated seq is a
  // duplicate and would be dropped). Absent from servers that do not send it.
  std::map<std::string, std::int64_t> last_seq;
};

// POST /v1/workers/{id}/poll
struct PollRequest {
  std::map<std::string, int> free;   // runner -> free slots now
  std::vector<AttemptRef> running;   // every attempt held whose final event is not acknowledged yet
  bool draining = false;             // true: send no new jobs
};

// One attempt to start.
struct JobAssignment {
  std::string job_id;
  int attempt = 1;
  std::string lease_id;
  std::string runner;
  std::string kind = "command";      // "command" | "training"
  JobSpec spec;
  std::optional<double> lease_ttl_s; // the TTL of this lease (its runner's); absent from an older server
};

// 200 reply to a poll: empty lists and a null directive when the poll timed out.
struct PollResponse {
  std::vector<JobAssignment> jobs;
  std::vector<CancelOrder> cancel;
  std::optional<Directive> directive;
};

// POST /v1/jobs/{id}/events
struct EventRequest {
  std::string lease_id;
  std::int64_t seq = 0;                      // 1..kMaxEventSeq, increasing per lease (gaps allowed)
  EventState state = EventState::running;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  std::optional<std::string> slurm_job_id;
  std::optional<boost::json::value> result;  // training: the checked result.json (succeeded only)
  std::optional<std::string> at;             // RFC 3339 UTC, the worker's clock
  std::optional<EventReason> reason;         // state lost only: why the worker lost the attempt
  // An event that ends the attempt offers the slot it frees for the worker's next job: the reply leases it
  // (jobs) in the event's own transaction, and the worker counts that slot in no poll meanwhile.
  bool take_next = false;
};

// 200 reply to an event.
struct EventResponse {
  bool duplicate = false;                    // (job, lease, seq) had already been recorded
  JobState job_state = JobState::running;    // the job's state after the event
  // Jobs leased to the worker by this event (takeNext); a repeated event gets those of its first application
  // that are still assigned and unstarted (its first reply may have been lost).
  std::vector<JobAssignment> jobs;
  // takeNext only: whether the freed slot, finding no job, was counted on the worker's held poll. When absent
  // or false and `jobs` is empty, no poll knows the slot: the worker polls again to offer it.
  std::optional<bool> slot_held;
};

// 200 reply to PUT /v1/jobs/{id}/logs/{stream}.
struct LogAppendResponse {
  std::uint64_t next_offset = 0;             // bytes stored for that stream of that attempt
};

// POST /v1/workers/{id}/exit
struct ExitRequest {
  ExitReason exit_reason = ExitReason::error;
  std::string message;
};

// ---------------------------------------------------------------------------------------------------------
// User / admin endpoints (role admin)

// POST /v1/jobs. On the wire the JobSpec members are flattened into the submission object.
struct JobSubmission {
  // "" (absent) or "auto": chosen by kind — a training job runs on slurm where a worker with Slurm can take it,
  // a command job on process (docs/protocol.md, "Runner choice"). Otherwise the runner the job is pinned to.
  std::string runner;
  std::string kind = "command";
  JobSpec spec;
  std::map<std::string, std::string> required_tags;
  int max_attempts = 2;                      // 1..10
};

// One event as recorded (GET /v1/jobs/{id}).
struct EventInfo {
  int attempt = 0;
  std::string lease_id;
  std::int64_t seq = 0;
  EventState state = EventState::running;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  std::optional<std::string> slurm_job_id;
  std::optional<boost::json::value> result;
  std::optional<std::string> at;
  std::string received_at;
  std::optional<EventReason> reason;
};

// One attempt of a job.
struct AttemptInfo {
  int attempt = 0;
  std::string lease_id;
  std::string worker_id;
  AttemptState state = AttemptState::assigned;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  std::optional<std::string> slurm_job_id;
  std::string assigned_at;
  std::optional<std::string> finished_at;
};

// A job. `attempts` and `events` are filled by GET /v1/jobs/{id} only.
struct JobInfo {
  std::string id;
  JobState state = JobState::queued;
  std::string runner;
  std::string kind;
  JobSpec spec;
  std::map<std::string, std::string> required_tags;
  int max_attempts = 2;
  int attempt = 0;                           // number of the current (latest) attempt, 0 before dispatch
  std::optional<std::string> worker_id;      // worker of the current attempt
  bool cancel_requested = false;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  std::optional<boost::json::value> result;
  std::string created_at;
  std::string updated_at;
  std::optional<std::string> finished_at;
  std::vector<AttemptInfo> attempts;
  std::vector<EventInfo> events;
};

// GET /v1/jobs: one page.
struct JobList {
  std::vector<JobInfo> jobs;
  std::optional<std::string> next_cursor;    // pass as `cursor` for the next page; absent on the last page
};

// One worker (GET /v1/workers).
struct WorkerInfo {
  std::string id;
  std::string launch_id;
  std::string label;
  std::string hostname;
  std::int64_t pid = 0;
  std::string version;
  int protocol = kVersion;
  std::string backend;
  std::vector<std::string> runners;
  std::map<std::string, std::string> tags;
  std::map<std::string, int> capacity;
  std::vector<std::string> profiles;
  std::optional<SlurmAllocation> slurm;
  std::optional<std::string> identity;       // the registration's identity (absent when it had none)
  std::int64_t generation = 1;               // of its launch: 1, or the allocation's place in a kept launch
  WorkerStatus status = WorkerStatus::active;
  std::optional<ExitReason> exit_reason;     // null unless the worker reported /exit
  std::string exit_message;
  std::optional<Directive> directive;        // pending kill/drain
  std::string registered_at;
  std::string last_seen;
  std::vector<std::string> running_jobs;     // jobs whose current attempt is on this worker and not final
};

// POST /v1/purge
struct PurgeRequest {
  std::optional<double> older_than_s;        // seconds; absent: the server's retention
};

// 200 reply to POST /v1/purge: what was deleted.
struct PurgeResponse {
  std::int64_t jobs = 0;                     // finished jobs, with their attempts, events and logs
  std::int64_t workers = 0;                  // gone or stale workers holding no live attempt
  std::int64_t log_files = 0;                // job-log files removed
  double older_than_s = 0;                   // the age used
};

// GET /v1/workers: one page.
struct WorkerList {
  std::vector<WorkerInfo> workers;
  std::optional<std::string> next_cursor;    // pass as `cursor` for the next page; absent on the last page
};

// One API token as GET /v1/tokens shows it: never the secret.
struct TokenInfo {
  std::string id;                              // the first 12 hex digits of the token's SHA-256
  std::string name;
  std::string role;                            // "agent" or "admin"
  std::map<std::string, std::string> scope_tags;  // agent tokens: tags every worker it registers must carry
  std::vector<std::string> scope_runners;      // agent tokens: the only runners its workers may advertise
  std::string created_at;
  std::optional<std::string> last_used_at;     // to the minute
  std::optional<std::string> revoked_at;
};

// GET /v1/tokens
struct TokenList {
  std::vector<TokenInfo> tokens;
};

// POST /v1/tokens/revoke
struct RevokeRequest {
  std::string token;  // a token's name (every token of that name) or its id
};

// The reply to POST /v1/tokens/revoke: the tokens revoked now and the workers that ended with them.
struct RevokeResponse {
  std::vector<TokenInfo> revoked;
  std::vector<std::string> workers;
};

}  // namespace nymph::protocol
