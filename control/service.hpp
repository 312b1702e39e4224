#pragma once
// The /v1 API without sockets: routes a parsed HTTP request to the store (through the DB thread), parks held
// polls in the PollHub, and keeps the lease/stale clocks. The HTTP server (control/http_server.hpp) feeds it.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "protocol/protocol.hpp"
#include "control/db_worker.hpp"
#include "control/policy.hpp"
#include "control/poll_hub.hpp"
#include "control/store.hpp"

namespace nymph::control {

// Timing knobs of the service (docs/protocol.md section 5); tests use milliseconds.
struct ServiceConfig {
  std::chrono::milliseconds poll_timeout{30'000};
  std::chrono::milliseconds lease_ttl{90'000};
  // Runner -> the TTL of its leases, when not lease_ttl (serve --runner-lease-ttl RUNNER=DURATION).
  std::map<std::string, std::chrono::milliseconds> runner_lease_ttl;
  std::chrono::milliseconds stale_after{60'000};
  protocol::Limits limits = protocol::kLimits;
  // Finished jobs and gone or stale workers are deleted once older than `retention` (0: kept forever), at
  // start and then every `purge_interval` (run_purges).
  std::chrono::milliseconds retention = std::chrono::hours(24 * 30);
  std::chrono::milliseconds purge_interval = std::chrono::hours(1);
};

// A request as the HTTP layer hands it over.
struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // origin form: path and query
  std::string authorization;  // the Authorization header value, or empty
  std::string body;
};

// Who sent a request, from its bearer credential (docs/protocol.md section 2).
struct Principal {
  enum class Kind { anonymous, admin, agent, worker };
  Kind kind = Kind::anonymous;
  TokenRecord token;      // admin, agent: the token; worker: the agent token the worker registered with
  std::string worker_id;  // worker: the one worker this credential acts for
};

// A request whose head passed every check that needs no body: its route, path parameters and caller.
struct AdmittedRequest {
  HttpRequest request;          // the body is empty until the HTTP layer has read it
  protocol::Endpoint endpoint = protocol::Endpoint::healthz;
  protocol::PathParams params;
  Principal principal;
  std::size_t body_limit = 0;   // the largest body this endpoint accepts
  bool may_hold = false;        // a poll or a waiting GET: the HTTP layer watches the peer meanwhile and
                                // cancels the handler when it closes the connection
};

// A reply to send.
struct HttpReply {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Builds an error reply {"error":{...}} for a status, code and message.
HttpReply error_reply(unsigned status, std::string code, std::string message);

// The reply for `req` while an exception thrown handling it is being handled (call it inside a catch
// block): 503 `unavailable` for an outage that a retry may get past — a storage outage (StorageError) or an
// allocation failure (std::bad_alloc, "out of memory"); 500 `internal` for anything else, a bug, which
// clients must not retry as an outage. Logs the request and the exception text at error level; the reply
// carries no exception text.
HttpReply reply_for_exception(spdlog::logger& log, const HttpRequest& req);

class Service {
 public:
  // `db` must outlive the service. Nothing runs until start().
  Service(boost::asio::any_io_executor ex, DbWorker& db, ServiceConfig config, std::shared_ptr<spdlog::logger> log);

  // Loads the live workers and leases from the database and gives each a full staleAfter/leaseTtl from now
  // (restart rule, docs/protocol.md section 5). Throws on a storage error (start-up).
  void load_state();

  // The lease-expiry and stale-detection loop. Runs until stop(); spawn it once.
  boost::asio::awaitable<void> run_clocks();

  // Purges what is older than the retention at once, then every purge interval, until stop(); returns at once
  // when the retention is 0. A failed purge is logged and tried again next time. Spawn it once.
  boost::asio::awaitable<void> run_purges();

  // First step of a request, before its body is read: matches the route (404, 405), authenticates the
  // bearer credential (401 `unauthorized`, or `revoked`), checks that it may call the endpoint (403) and
  // the path's ids (404/400). Returns the admitted request, or the reply to send without reading the body.
  // `head` carries no body. Errors as for handle().
  boost::asio::awaitable<boost::system::result<AdmittedRequest, HttpReply>> admit(HttpRequest head);

  // Second step: runs the admitted request's handler with its body and returns the reply. Request problems
  // are 4xx replies; a storage outage (a StorageError, control/storage_error.hpp) is 503 `unavailable`,
  // which clients retry; any other exception is a bug: 500 `internal`, which clients must not retry as an
  // outage. Both are logged at error level with the method, target and exception text (the reply carries no
  // exception text). Only cancellation (the client went away) propagates.
  boost::asio::awaitable<HttpReply> handle(AdmittedRequest req);

  // Both steps, for a caller that holds the whole request.
  boost::asio::awaitable<HttpReply> handle(HttpRequest req);

  // Answers every held poll (empty) and ends run_clocks. Idempotent.
  void stop();

  std::size_t held_polls() const { return hub_.size(); }
  const ServiceConfig& config() const { return config_; }

 private:
  // admit() without the exception handling: the checks in the order the protocol states them.
  boost::asio::awaitable<boost::system::result<AdmittedRequest, HttpReply>> check_head(HttpRequest& head);
  static std::optional<HttpReply> check_path_params(const protocol::PathParams& p);
  // 403 when `who` may not call `route` for the worker in `params`.
  static std::optional<HttpReply> check_caller(const protocol::Route& route, const protocol::PathParams& params,
                                               const Principal& who);
  boost::asio::awaitable<HttpReply> call(AdmittedRequest& a);
  // The caller named by an Authorization header: an API token or a worker credential, from the cache or the
  // database. nullopt when the header is missing, malformed or names no credential.
  boost::asio::awaitable<std::optional<Principal>> authenticate(const std::string& authorization);
  // Records the use of `token` at most once a minute (tokens' last_used_at).
  boost::asio::awaitable<void> note_use(const TokenRecord& token);
  // Forgets the cached credentials of `worker_id` (replaced at re-registration) or of revoked tokens.
  void forget_worker_credential(const std::string& worker_id);
  void forget_token(const std::string& hash);

  boost::asio::awaitable<HttpReply> register_worker(const Principal& by, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> poll(std::string worker_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> worker_exit(std::string worker_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> directive(std::string worker_id, protocol::Directive d);
  boost::asio::awaitable<HttpReply> list_workers(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> submit(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> list_jobs(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> get_job(std::string job_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> cancel_job(std::string job_id);
  boost::asio::awaitable<HttpReply> event(std::string job_id, std::string worker_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> put_log(std::string job_id, std::string stream, std::string worker_id,
                                            const HttpRequest& req);
  boost::asio::awaitable<HttpReply> list_tokens();
  boost::asio::awaitable<HttpReply> revoke_token(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> get_log(std::string job_id, std::string stream, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> metrics();
  boost::asio::awaitable<HttpReply> purge_now(const HttpRequest& req);

  // Deletes, batch by batch, the finished jobs and gone or stale workers older than `older_than` (see
  // Store::purge) and logs what it deleted. Throws as DbWorker::run.
  boost::asio::awaitable<protocol::PurgeResponse> purge(std::chrono::milliseconds older_than);

  // Store::poll for `worker_id` as one DB operation.
  boost::asio::awaitable<ApiResult<PollOutcome>> run_poll(const std::string& worker_id, const protocol::PollRequest& req);
  // Gives a claimed poll (PollHub::claim_*) the outcome an operation computed for it, or releases it when there is
  // none (`outcome` empty or an error). A lease handed to a poll that went away meanwhile is left to expire,
  // as the lease of a poll whose client closes the connection while its own operation commits.
  void hand_or_release(const PollHub::Claim& claim, std::optional<ApiResult<PollOutcome>> outcome,
                       protocol::PollRequest asked);

  // Records the end of a worker's contact (its lastSeen, docs/protocol.md 8.11) when a held poll ends. Never
  // throws: a failure is logged (the poll is answered anyway).
  boost::asio::awaitable<void> note_contact(std::string worker_id);
  // Starts the lease clocks of jobs an event's reply hands to its worker now (takeNext), and sets their TTLs.
  void settle_handed_leases(std::vector<protocol::JobAssignment>& jobs);
  // Starts the clocks of a poll that was answered now.
  void settle_poll(const std::string& worker_id, const PollOutcome& out);
  // True when the reply carries something the worker has not been told yet.
  bool has_news(const std::string& worker_id, const PollOutcome& out, bool draining) const;
  void rearm_clocks();
  boost::asio::awaitable<void> expire(Liveness::Expired expired);
  // Wakes the `GET /v1/jobs/{id}?waitS=` requests waiting on one job (or on every job). With `job` (the job as
  // the operation that woke them committed it) they answer with it; otherwise they read the job again.
  void wake_job_waiters(const std::string& job_id, const std::optional<protocol::JobInfo>& job = std::nullopt);
  void wake_all_job_waiters();

  boost::asio::any_io_executor ex_;
  DbWorker& db_;
  ServiceConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  PollHub hub_;
  Liveness liveness_;
  boost::asio::steady_timer clock_timer_;
  boost::asio::steady_timer purge_timer_;
  bool stopping_ = false;
  // Credentials seen, by the hash of their secret (never the secret): API tokens and worker credentials.
  std::unordered_map<std::string, Principal> credentials_;
  std::unordered_map<std::string, std::string> worker_credential_;  // worker id -> hash of its credential
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> token_used_;  // token hash -> last use recorded
  // A parked `GET /v1/jobs/{id}?waitS=`: the timer that wakes it, and where a waking operation may leave the job.
  struct JobWaiter {
    boost::asio::steady_timer* timer;
    std::optional<protocol::JobInfo>* handed;
  };
  std::unordered_multimap<std::string, JobWaiter> job_waiters_;  // job id -> parked GET
  std::uint64_t poll_requests_ = 0;  // polls received (nymph_poll_requests_total)
  // Cancels already delivered per worker (lease -> reason): repeated in replies but no reason to answer early.
  std::unordered_map<std::string, std::unordered_map<std::string, protocol::CancelReason>> cancels_sent_;
};

}  // namespace nymph::control
