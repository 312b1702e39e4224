#pragma once
// The /v1 URL space, written once: every endpoint with its method, path pattern, who may call it, what body it
// takes and whether the server may hold it open. The server dispatches with match_route, takes its body limits
// and held-request rule from the matched Route, and clients build their request targets with route_path.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "protocol/types.hpp"

namespace nymph::protocol {

enum class Method { get, post, put };

// Wire name: "GET", "POST", "PUT"; parse_method returns nullopt for anything else.
std::string_view to_string(Method m);
std::optional<Method> parse_method(std::string_view m);

// Every endpoint of the protocol (docs/protocol.md sections 4-8).
enum class Endpoint {
  healthz,          // GET  /healthz
  metrics,          // GET  /metrics
  list_workers,     // GET  /v1/workers
  register_worker,  // POST /v1/workers
  poll,             // POST /v1/workers/{worker}/poll
  worker_exit,      // POST /v1/workers/{worker}/exit
  kill_worker,      // POST /v1/workers/{worker}/kill
  drain_worker,     // POST /v1/workers/{worker}/drain
  list_jobs,        // GET  /v1/jobs
  submit_job,       // POST /v1/jobs
  get_job,          // GET  /v1/jobs/{job}
  job_events,       // POST /v1/jobs/{job}/events
  cancel_job,       // POST /v1/jobs/{job}/cancel
  get_log,          // GET  /v1/jobs/{job}/logs/{stream}
  put_log,          // PUT  /v1/jobs/{job}/logs/{stream}
  list_tokens,      // GET  /v1/tokens
  revoke_token,     // POST /v1/tokens/revoke
  purge,            // POST /v1/purge
};

// Whose bearer credential an endpoint needs (docs/protocol.md section 2): none, an agent token (registration
// only), the worker credential issued at registration (that worker's own operations), or an admin token.
enum class Caller { anyone, agent, worker, admin };

// What the request body is.
enum class BodyKind { none, json, log_bytes };

// When the server may hold the request open (answer later, watching the connection meanwhile).
enum class Hold { never, always, with_wait_param };  // with_wait_param: only when the query has waitS=

struct Route {
  Endpoint endpoint;
  Method method;
  std::string_view pattern;  // literal segments and {worker}, {job}, {stream}
  Caller caller;
  BodyKind body;
  Hold hold;
};

// The table itself, in docs/protocol.md order.
inline constexpr std::array<Route, 18> kRoutes{{
    {Endpoint::healthz, Method::get, "/healthz", Caller::anyone, BodyKind::none, Hold::never},
    {Endpoint::metrics, Method::get, "/metrics", Caller::anyone, BodyKind::none, Hold::never},
    {Endpoint::list_workers, Method::get, "/v1/workers", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::register_worker, Method::post, "/v1/workers", Caller::agent, BodyKind::json, Hold::never},
    {Endpoint::poll, Method::post, "/v1/workers/{worker}/poll", Caller::worker, BodyKind::json, Hold::always},
    {Endpoint::worker_exit, Method::post, "/v1/workers/{worker}/exit", Caller::worker, BodyKind::json, Hold::never},
    {Endpoint::kill_worker, Method::post, "/v1/workers/{worker}/kill", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::drain_worker, Method::post, "/v1/workers/{worker}/drain", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::list_jobs, Method::get, "/v1/jobs", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::submit_job, Method::post, "/v1/jobs", Caller::admin, BodyKind::json, Hold::never},
    {Endpoint::get_job, Method::get, "/v1/jobs/{job}", Caller::admin, BodyKind::none, Hold::with_wait_param},
    {Endpoint::job_events, Method::post, "/v1/jobs/{job}/events", Caller::worker, BodyKind::json, Hold::never},
    {Endpoint::cancel_job, Method::post, "/v1/jobs/{job}/cancel", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::get_log, Method::get, "/v1/jobs/{job}/logs/{stream}", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::put_log, Method::put, "/v1/jobs/{job}/logs/{stream}", Caller::worker, BodyKind::log_bytes,
     Hold::never},
    {Endpoint::list_tokens, Method::get, "/v1/tokens", Caller::admin, BodyKind::none, Hold::never},
    {Endpoint::revoke_token, Method::post, "/v1/tokens/revoke", Caller::admin, BodyKind::json, Hold::never},
    {Endpoint::purge, Method::post, "/v1/purge", Caller::admin, BodyKind::json, Hold::never},
}};

// The route of an endpoint (every Endpoint has exactly one).
const Route& route_of(Endpoint e);

// Path parameters, by name.
struct PathParams {
  std::string worker;  // {worker}
  std::string job;     // {job}
  std::string stream;  // {stream}, as written in the path
};

// What match_route found for a method and a path (no query string).
struct RouteMatch {
  enum class Outcome {
    found,               // `route` and `params` are set
    not_found,           // no pattern matches the path
    method_not_allowed,  // patterns match, none with this method: `allowed` lists theirs ("GET, POST")
  };
  Outcome outcome = Outcome::not_found;
  const Route* route = nullptr;
  PathParams params;
  std::string allowed;
  bool needs_token = false;  // found: the route's caller is not `anyone`; method_not_allowed: any match's is not
};

// Finds the route for `method` (the request line's text, e.g. "GET") and `path` (decoded segments joined by
// '/', without the query). Ids and stream names are captured as written; check them with is_valid_id and
// parse_log_stream.
RouteMatch match_route(std::string_view method, std::string_view path);
// The same for a path already split into decoded segments ("/v1/jobs/a%2Fb" is {"v1", "jobs", "a/b"}).
RouteMatch match_route(std::string_view method, const std::vector<std::string>& decoded);

// The request target of `e` with `params` filled in. Ids are used verbatim: they consist of [0-9A-Za-z_-]
// (is_valid_id), which needs no escaping.
std::string route_path(Endpoint e, const PathParams& params = {});

// Request paths, built from the table. Named for the call sites' convenience.
std::string workers_path();                                            // /v1/workers
std::string poll_path(std::string_view worker_id);                     // /v1/workers/{id}/poll
std::string exit_path(std::string_view worker_id);                     // /v1/workers/{id}/exit
std::string kill_path(std::string_view worker_id);                     // /v1/workers/{id}/kill
std::string drain_path(std::string_view worker_id);                    // /v1/workers/{id}/drain
std::string jobs_path();                                               // /v1/jobs
std::string job_path(std::string_view job_id);                         // /v1/jobs/{id}
std::string events_path(std::string_view job_id);                      // /v1/jobs/{id}/events
std::string cancel_path(std::string_view job_id);                      // /v1/jobs/{id}/cancel
std::string tokens_path();                                             // /v1/tokens
std::string revoke_path();                                             // /v1/tokens/revoke
std::string purge_path();                                              // /v1/purge
// GET targets of one page of a list: /v1/workers?limit=N[&cursor=C], /v1/jobs?limit=N[&state=S][&cursor=C].
// A cursor is the previous page's nextCursor, which consists of URL-safe characters (docs/protocol.md 8.7).
std::string workers_page_target(int limit, const std::optional<std::string>& cursor = std::nullopt);
std::string jobs_page_target(int limit, std::optional<JobState> state = std::nullopt,
                             const std::optional<std::string>& cursor = std::nullopt);
// PUT target: /v1/jobs/{id}/logs/{stream}?offset=N&lease=L.
std::string log_put_target(std::string_view job_id, LogStream stream, std::uint64_t offset,
                           std::string_view lease_id);
// GET target: /v1/jobs/{id}/logs/{stream}?offset=N[&attempt=K]
std::string log_get_target(std::string_view job_id, LogStream stream, std::uint64_t offset,
                           std::optional<int> attempt = std::nullopt);

// Reply headers of GET /v1/jobs/{id}/logs/{stream}.
inline constexpr std::string_view kLogSizeHeader = "X-Nymph-Log-Size";          // bytes stored so far
inline constexpr std::string_view kLogAttemptHeader = "X-Nymph-Attempt";        // attempt the bytes belong to
inline constexpr std::string_view kLogCompleteHeader = "X-Nymph-Log-Complete";  // "true" once final

// True when `id` is 1..128 characters of [0-9A-Za-z_-] (worker, job, lease and launch ids).
bool is_valid_id(std::string_view id);

// is_valid_id for a peer's value: an Error "field 'FIELD': 'VALUE' is not an id (1-128 characters of
// [0-9A-Za-z_-])" otherwise, the value shown with printable_excerpt (so it cannot forge a log line).
Result<void> check_id(std::string_view field, std::string_view id);

}  // namespace nymph::protocol
