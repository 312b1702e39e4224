#pragma once
// The /v1 API without sockets: routes a parsed HTTP request to the store (through the DB thread), parks held
// polls in the PollHub, and keeps the lease/stale clocks. The HTTP server (control/http_server.hpp) feeds it.
#include <chrono>
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

namespace nymph::control {

// Timing knobs of the service (docs/protocol.md section 5); tests use milliseconds.
struct ServiceConfig {
  std::chrono::milliseconds poll_timeout{30'000};
  std::chrono::milliseconds lease_ttl{90'000};
  std::chrono::milliseconds stale_after{60'000};
  protocol::Limits limits = protocol::kLimits;
};

// A request as the HTTP layer hands it over.
struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // origin form: path and query
  std::string authorization;  // the Authorization header value, or empty
  std::string body;
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

class Service {
 public:
  // `db` must outlive the service. Nothing runs until start().
  Service(boost::asio::any_io_executor ex, DbWorker& db, ServiceConfig config, std::shared_ptr<spdlog::logger> log);

  // Loads the live workers and leases from the database and gives each a full staleAfter/leaseTtl from now
  // (restart rule, docs/protocol.md section 5). Throws on a storage error (start-up).
  void load_state();

  // The lease-expiry and stale-detection loop. Runs until stop(); spawn it once.
  boost::asio::awaitable<void> run_clocks();

  // Handles one request and returns the reply. Request problems are 4xx replies; a storage outage (a
  // StorageError, control/storage_error.hpp) is 503 `unavailable`, which clients retry; any other exception
  // is a bug: 500 `internal`, which clients must not retry as an outage. Both are logged at error level with
  // the method, target and exception text (the reply carries no exception text). Only cancellation (the
  // client went away) propagates.
  boost::asio::awaitable<HttpReply> handle(HttpRequest req);

  // True when `req` may be held open (a poll): the HTTP layer watches the connection meanwhile and cancels
  // the handler when the peer closes it.
  static bool may_hold(const HttpRequest& req);

  // Largest body accepted for `method` + `target` (log uploads get a larger limit).
  std::size_t body_limit(std::string_view method, std::string_view target) const;

  // Answers every held poll (empty) and ends run_clocks. Idempotent.
  void stop();

  std::size_t held_polls() const { return hub_.size(); }
  const ServiceConfig& config() const { return config_; }

 private:
  // Routes by protocol::match_route: 404 for an unknown path, then the token (401), the method (405), the
  // token's role (403), the path's ids and stream (404/400), then the endpoint's handler.
  boost::asio::awaitable<HttpReply> dispatch(HttpRequest& req);
  static std::optional<HttpReply> check_path_params(const protocol::PathParams& p);
  boost::asio::awaitable<HttpReply> call(protocol::Endpoint e, const protocol::PathParams& p, HttpRequest& req);
  boost::asio::awaitable<std::optional<Role>> authenticate(const std::string& authorization);

  boost::asio::awaitable<HttpReply> register_worker(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> poll(std::string worker_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> worker_exit(std::string worker_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> directive(std::string worker_id, protocol::Directive d);
  boost::asio::awaitable<HttpReply> list_workers();
  boost::asio::awaitable<HttpReply> submit(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> list_jobs(const HttpRequest& req);
  boost::asio::awaitable<HttpReply> get_job(std::string job_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> cancel_job(std::string job_id);
  boost::asio::awaitable<HttpReply> event(std::string job_id, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> put_log(std::string job_id, std::string stream, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> get_log(std::string job_id, std::string stream, const HttpRequest& req);
  boost::asio::awaitable<HttpReply> metrics();

  // Starts the clocks of a poll that was answered now.
  void settle_poll(const std::string& worker_id, const PollOutcome& out);
  // True when the reply carries something the worker has not been told yet.
  bool has_news(const std::string& worker_id, const PollOutcome& out, bool draining) const;
  void rearm_clocks();
  boost::asio::awaitable<void> expire(Liveness::Expired expired);
  // Wakes the `GET /v1/jobs/{id}?waitS=` requests waiting on one job (or on every job), which read it again.
  void wake_job_waiters(const std::string& job_id);
  void wake_all_job_waiters();

  boost::asio::any_io_executor ex_;
  DbWorker& db_;
  ServiceConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  PollHub hub_;
  Liveness liveness_;
  boost::asio::steady_timer clock_timer_;
  bool stopping_ = false;
  std::unordered_map<std::string, Role> token_cache_;
  std::unordered_multimap<std::string, boost::asio::steady_timer*> job_waiters_;  // job id -> parked GET
  // Cancels already delivered per worker (lease -> reason): repeated in replies but no reason to answer early.
  std::unordered_map<std::string, std::unordered_map<std::string, protocol::CancelReason>> cancels_sent_;
};

}  // namespace nymph::control
