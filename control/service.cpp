#include "control/service.hpp"

#include <charconv>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/url/parse.hpp>

#include "common/duration.hpp"
#include "control/storage_error.hpp"
#include "control/validate.hpp"

namespace nymph::control {

namespace asio = boost::asio;
namespace json = boost::json;
using Steady = std::chrono::steady_clock;
using protocol::Directive;

namespace {

constexpr std::size_t kMaxLogRead = 4 * 1024 * 1024;
constexpr std::uint64_t kMaxJobWaitS = 60;  // GET /v1/jobs/{id}?waitS=

WallTime wall_now() { return std::chrono::system_clock::now(); }

template <class T>
HttpReply json_reply(unsigned status, const T& x) {
  return HttpReply{status, "application/json", json::serialize(json::value_from(x)), {}};
}

HttpReply reply_for(const ApiError& e) {
  protocol::ErrorBody b{e.code, e.message, e.expected_offset};
  return HttpReply{e.status, "application/json", protocol::error_document(b), {}};
}

// Decodes a JSON body into T and validates it; the error is a ready 400 reply.
template <class T>
boost::system::result<T, HttpReply> decode(const std::string& body, const protocol::Limits& limits) {
  auto v = protocol::parse_json(body, limits);
  if (!v) return error_reply(400, "invalidJson", v.error().message);
  auto x = protocol::from_json<T>(*v);
  if (!x) return error_reply(400, "invalidField", x.error().message);
  if constexpr (requires { validate(*x, limits); }) {
    if (auto ok = validate(*x, limits); !ok) return error_reply(400, "invalidField", ok.error().message);
  }
  return std::move(*x);
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parsed origin-form target: decoded path segments and query parameters.
struct Target {
  std::vector<std::string> segments;
  std::map<std::string, std::string> params;
};

std::optional<Target> parse_target(std::string_view target) {
  auto u = boost::urls::parse_origin_form(target);
  if (!u) return std::nullopt;
  Target t;
  for (auto seg : u->segments()) t.segments.push_back(std::string(seg));
  for (auto p : u->params()) t.params[std::string(p.key)] = std::string(p.value);
  return t;
}

// The reply for `req` while the exception its handling threw is being handled: 503 `unavailable` for a
// storage outage (StorageError), which clients retry; 500 `internal` for anything else, a bug, which they
// must not retry as an outage. Both are logged with the request and the exception text, which the client
// does not get.
HttpReply reply_for_exception(spdlog::logger& log, const HttpRequest& req) {
  try {
    throw;
  } catch (const StorageError& e) {
    log.error("{} {}: storage unavailable: {}", req.method, req.target, e.what());
    return error_reply(503, "unavailable", "storage unavailable; retry later");
  } catch (const std::exception& e) {
    log.error("{} {}: internal error: {}", req.method, req.target, e.what());
  } catch (...) {
    log.error("{} {}: internal error: an exception that is not a std::exception", req.method, req.target);
  }
  return error_reply(500, "internal", "internal error (the control plane's log has the details)");
}

}  // namespace

HttpReply error_reply(unsigned status, std::string code, std::string message) {
  return reply_for(ApiError{status, std::move(code), std::move(message), {}});
}

Service::Service(asio::any_io_executor ex, DbWorker& db, ServiceConfig config, std::shared_ptr<spdlog::logger> log)
    : ex_(ex),
      db_(db),
      config_(config),
      log_(std::move(log)),
      liveness_(config.lease_ttl, config.stale_after),
      clock_timer_(ex) {}

void Service::load_state() {
  LiveState s = db_.run_blocking([](Store& st) { return st.live_state(); });
  auto now = Steady::now();
  for (const auto& w : s.active_workers) liveness_.worker_seen(w, now);
  for (const auto& l : s.live_leases) liveness_.lease_renewed(l, now);
  log_->info("loaded {} active workers and {} live leases", s.active_workers.size(), s.live_leases.size());
}

void Service::stop() {
  if (stopping_) return;
  stopping_ = true;
  hub_.wake_all_for_shutdown();
  wake_all_job_waiters();
  clock_timer_.cancel();
}

bool Service::may_hold(const HttpRequest& req) {
  auto path = std::string_view(req.target).substr(0, req.target.find('?'));
  auto m = protocol::match_route(req.method, path);
  if (m.outcome != protocol::RouteMatch::Outcome::found) return false;
  switch (m.route->hold) {
    case protocol::Hold::never: return false;
    case protocol::Hold::always: return true;
    case protocol::Hold::with_wait_param: {
      auto t = parse_target(req.target);
      return t && t->params.contains("waitS");
    }
  }
  return false;
}

std::size_t Service::body_limit(std::string_view method, std::string_view target) const {
  auto m = protocol::match_route(method, target.substr(0, target.find('?')));
  bool log_bytes = m.outcome == protocol::RouteMatch::Outcome::found && m.route->body == protocol::BodyKind::log_bytes;
  return log_bytes ? config_.limits.max_log_chunk : config_.limits.max_json_body;
}

// ---------------------------------------------------------------------------------------------------------
// Clocks

void Service::rearm_clocks() {
  auto next = liveness_.next_deadline();
  if (next && *next < clock_timer_.expiry()) clock_timer_.cancel();
}

asio::awaitable<void> Service::run_clocks() {
  while (!stopping_) {
    auto next = liveness_.next_deadline();
    clock_timer_.expires_at(next ? *next : Steady::time_point::max());
    co_await clock_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (stopping_) break;
    auto expired = liveness_.take_expired(Steady::now());
    if (!expired.stale_workers.empty() || !expired.lost_leases.empty()) co_await expire(std::move(expired));
  }
}

asio::awaitable<void> Service::expire(Liveness::Expired expired) {
  for (const auto& w : expired.stale_workers) {
    auto op = [w](Store& s) { return s.mark_stale(w); };
    bool changed = co_await db_.run(std::move(op));
    if (changed) log_->warn("worker {} is stale: no contact for {}", w, format_duration(config_.stale_after));
  }
  std::string why = "lease not renewed for " + format_duration(config_.lease_ttl);
  for (const auto& lease : expired.lost_leases) {
    auto op = [lease, why](Store& s) { return s.expire_lease(lease, why, wall_now()); };
    auto x = co_await db_.run(std::move(op));
    if (!x.expired) continue;
    log_->warn("lease {} of worker {} expired; attempt lost{}", lease, x.worker_id, x.requeued ? ", job re-queued" : "");
    if (x.requeued) hub_.wake_one_for(*x.requeued);
    wake_all_job_waiters();
  }
}

void Service::wake_job_waiters(const std::string& job_id) {
  auto [first, last] = job_waiters_.equal_range(job_id);
  for (auto it = first; it != last; ++it) it->second->cancel();
}

void Service::wake_all_job_waiters() {
  for (auto& [job, timer] : job_waiters_) timer->cancel();
}

// ---------------------------------------------------------------------------------------------------------
// Entry point and routing

asio::awaitable<HttpReply> Service::handle(HttpRequest req) {
  try {
    co_return co_await dispatch(req);
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted) throw;  // cancelled: the client went away
    co_return reply_for_exception(*log_, req);
  } catch (...) {
    co_return reply_for_exception(*log_, req);
  }
}

asio::awaitable<std::optional<Role>> Service::authenticate(const std::string& authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || !authorization.starts_with(kBearer)) co_return std::nullopt;
  std::string token = authorization.substr(kBearer.size());
  if (auto it = token_cache_.find(token); it != token_cache_.end()) co_return it->second;
  auto op = [token](Store& s) { return s.find_token(token); };
  auto role = co_await db_.run(std::move(op));
  if (role) token_cache_.emplace(token, *role);
  co_return role;
}

asio::awaitable<HttpReply> Service::dispatch(HttpRequest& req) {
  using protocol::Caller;
  using protocol::RouteMatch;
  auto t = parse_target(req.target);
  if (!t) co_return error_reply(400, "badRequest", "invalid request target");
  auto m = protocol::match_route(req.method, t->segments);
  if (m.outcome == RouteMatch::Outcome::not_found)
    co_return error_reply(404, "notFound", "no such endpoint: " + req.target);
  std::optional<Role> role;
  if (m.needs_token) {
    role = co_await authenticate(req.authorization);
    if (!role) co_return error_reply(401, "unauthorized", "missing or unknown bearer token");
  }
  if (m.outcome == RouteMatch::Outcome::method_not_allowed)
    co_return error_reply(405, "methodNotAllowed", "use " + m.allowed);
  const Caller caller = m.route->caller;
  if (caller != Caller::anyone && (caller == Caller::admin) != (*role == Role::admin))
    co_return error_reply(403, "forbidden", std::string("this endpoint needs a token with role ") +
                                                (caller == Caller::admin ? "admin" : "agent"));
  if (auto bad = check_path_params(m.params)) co_return *bad;
  co_return co_await call(m.route->endpoint, m.params, req);
}

std::optional<HttpReply> Service::check_path_params(const protocol::PathParams& p) {
  if (!p.worker.empty() && !protocol::is_valid_id(p.worker))
    return error_reply(404, "unknownWorker", "malformed id '" + p.worker.substr(0, 128) + "'");
  if (!p.job.empty() && !protocol::is_valid_id(p.job))
    return error_reply(404, "unknownJob", "malformed id '" + p.job.substr(0, 128) + "'");
  if (!p.stream.empty() && !protocol::parse_log_stream(p.stream))
    return error_reply(400, "badRequest", "unknown log stream '" + p.stream.substr(0, 128) + "' (stdout or stderr)");
  return std::nullopt;
}

asio::awaitable<HttpReply> Service::call(protocol::Endpoint e, const protocol::PathParams& p, HttpRequest& req) {
  using protocol::Endpoint;
  switch (e) {
    case Endpoint::healthz: co_return HttpReply{200, "application/json", R"({"status":"ok"})", {}};
    case Endpoint::metrics: co_return co_await metrics();
    case Endpoint::list_workers: co_return co_await list_workers();
    case Endpoint::register_worker: co_return co_await register_worker(req);
    case Endpoint::poll: co_return co_await poll(p.worker, req);
    case Endpoint::worker_exit: co_return co_await worker_exit(p.worker, req);
    case Endpoint::kill_worker: co_return co_await directive(p.worker, Directive::kill);
    case Endpoint::drain_worker: co_return co_await directive(p.worker, Directive::drain);
    case Endpoint::list_jobs: co_return co_await list_jobs(req);
    case Endpoint::submit_job: co_return co_await submit(req);
    case Endpoint::get_job: co_return co_await get_job(p.job, req);
    case Endpoint::job_events: co_return co_await event(p.job, req);
    case Endpoint::cancel_job: co_return co_await cancel_job(p.job);
    case Endpoint::get_log: co_return co_await get_log(p.job, p.stream, req);
    case Endpoint::put_log: co_return co_await put_log(p.job, p.stream, req);
  }
  co_return error_reply(404, "notFound", "no such endpoint: " + req.target);
}

// ---------------------------------------------------------------------------------------------------------
// Worker endpoints

asio::awaitable<HttpReply> Service::register_worker(const HttpRequest& req) {
  auto body = decode<protocol::RegisterRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  auto op = [b = *body](Store& s) { return s.register_worker(b, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  auto now = Steady::now();
  liveness_.worker_seen(r->reply.worker_id, now);
  for (const auto& l : r->renewed_leases) liveness_.lease_renewed(l, now);
  rearm_clocks();
  r->reply.poll_timeout_s = std::chrono::duration<double>(config_.poll_timeout).count();
  r->reply.lease_ttl_s = std::chrono::duration<double>(config_.lease_ttl).count();
  r->reply.stale_after_s = std::chrono::duration<double>(config_.stale_after).count();
  log_->info("worker {} {} (launch {}, host {}, runners {})", r->reply.worker_id,
             r->created ? "registered" : "re-registered", body->launch_id, body->hostname, body->runners.size());
  co_return json_reply(r->created ? 201 : 200, r->reply);
}

bool Service::has_news(const std::string& worker_id, const PollOutcome& out, bool draining) const {
  if (!out.reply.jobs.empty()) return true;
  if (out.reply.directive && !draining) return true;
  auto sent = cancels_sent_.find(worker_id);
  for (const auto& c : out.reply.cancel) {
    if (sent == cancels_sent_.end()) return true;
    auto it = sent->second.find(c.lease_id);
    if (it == sent->second.end() || it->second != c.reason) return true;
  }
  return false;
}

void Service::settle_poll(const std::string& worker_id, const PollOutcome& out) {
  auto now = Steady::now();
  liveness_.worker_seen(worker_id, now);
  for (const auto& l : out.renewed_leases) liveness_.lease_renewed(l, now);
  for (const auto& j : out.reply.jobs) liveness_.lease_renewed(j.lease_id, now);
  rearm_clocks();
  auto& sent = cancels_sent_[worker_id];
  sent.clear();
  for (const auto& c : out.reply.cancel) sent[c.lease_id] = c.reason;
  if (sent.empty()) cancels_sent_.erase(worker_id);
}

namespace {
// While a poll is parked: the worker and its listed leases are held; released (clocks start) on every exit path,
// including cancellation when the client goes away.
class ParkGuard {
 public:
  ParkGuard(PollHub& hub, PollHub::Waiter& w, Liveness& live, const std::vector<std::string>& leases)
      : hub_(hub), w_(w), live_(live), leases_(leases) {
    live_.worker_hold(w_.worker_id);
    for (const auto& l : leases_) live_.lease_hold(l);
    hub_.park(w_);
  }
  ~ParkGuard() {
    hub_.unpark(w_);
    auto now = Steady::now();
    live_.worker_release(w_.worker_id, now);
    for (const auto& l : leases_) live_.lease_release(l, now);
  }
  ParkGuard(const ParkGuard&) = delete;
  ParkGuard& operator=(const ParkGuard&) = delete;

 private:
  PollHub& hub_;
  PollHub::Waiter& w_;
  Liveness& live_;
  const std::vector<std::string>& leases_;
};
}  // namespace

asio::awaitable<HttpReply> Service::poll(std::string worker_id, const HttpRequest& req) {
  auto body = decode<protocol::PollRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  const auto deadline = Steady::now() + config_.poll_timeout;
  bool woken = false;
  for (;;) {
    auto op = [worker_id, b = *body](Store& s) { return s.poll(worker_id, b, wall_now()); };
    auto r = co_await db_.run(std::move(op));
    if (!r) {
      // The worker exited while its poll was parked: answer the poll, do not ask it to re-register.
      if (woken && r.error().status == 404) co_return json_reply(200, protocol::PollResponse{});
      co_return reply_for(r.error());
    }
    if (stopping_ || has_news(worker_id, *r, body->draining) || Steady::now() >= deadline) {
      settle_poll(worker_id, *r);
      co_return json_reply(200, r->reply);
    }
    asio::steady_timer timer(ex_, deadline);
    PollHub::Waiter waiter{worker_id, r->caps, body->free, !r->draining, [&timer] { timer.cancel(); }};
    {
      ParkGuard guard(hub_, waiter, liveness_, r->renewed_leases);
      rearm_clocks();
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (waiter.why != PollHub::Why::woken) {
      // Timed out, superseded by a newer poll, or shutting down: the last outcome still stands (no news).
      co_return json_reply(200, r->reply);
    }
    woken = true;
    body->free = waiter.free;  // slots freed by final events while parked (PollHub::slot_freed)
  }
}

asio::awaitable<HttpReply> Service::worker_exit(std::string worker_id, const HttpRequest& req) {
  auto body = decode<protocol::ExitRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  auto op = [worker_id, b = *body](Store& s) { return s.worker_exit(worker_id, b, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  liveness_.worker_forget(worker_id);
  cancels_sent_.erase(worker_id);
  hub_.wake_worker(worker_id);
  log_->info("worker {} exited: {} {}", worker_id, protocol::to_string(body->exit_reason), body->message);
  co_return HttpReply{200, "application/json", "{}", {}};
}

asio::awaitable<HttpReply> Service::directive(std::string worker_id, Directive d) {
  auto op = [worker_id, d](Store& s) { return s.set_directive(worker_id, d); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  hub_.wake_worker(worker_id);
  log_->info("directive {} for worker {}", protocol::to_string(d), worker_id);
  co_return json_reply(200, *r);
}

asio::awaitable<HttpReply> Service::list_workers() {
  auto op = [](Store& s) { return s.list_workers(); };
  auto r = co_await db_.run(std::move(op));
  co_return json_reply(200, r);
}

// ---------------------------------------------------------------------------------------------------------
// Job endpoints

asio::awaitable<HttpReply> Service::submit(const HttpRequest& req) {
  auto body = decode<protocol::JobSubmission>(req.body, config_.limits);
  if (!body) co_return body.error();
  auto op = [b = *body](Store& s) { return s.submit(b, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  hub_.wake_one_for(r.needs);
  log_->info("job {} submitted (runner {}, kind {})", r.job.id, r.job.runner, r.job.kind);
  co_return json_reply(201, r.job);
}

asio::awaitable<HttpReply> Service::list_jobs(const HttpRequest& req) {
  auto t = parse_target(req.target);
  std::optional<protocol::JobState> state;
  int limit = 1000;
  if (auto it = t->params.find("state"); it != t->params.end()) {
    state = protocol::parse_job_state(it->second);
    if (!state) co_return error_reply(400, "badRequest", "unknown job state '" + it->second.substr(0, 64) + "'");
  }
  if (auto it = t->params.find("limit"); it != t->params.end()) {
    auto n = parse_u64(it->second);
    if (!n || *n < 1 || *n > 10'000) co_return error_reply(400, "badRequest", "limit must be 1..10000");
    limit = static_cast<int>(*n);
  }
  auto op = [state, limit](Store& s) { return s.list_jobs(state, limit); };
  auto r = co_await db_.run(std::move(op));
  co_return json_reply(200, r);
}

asio::awaitable<HttpReply> Service::get_job(std::string job_id, const HttpRequest& req) {
  auto t = parse_target(req.target);
  std::optional<Steady::time_point> deadline;
  if (auto it = t->params.find("waitS"); it != t->params.end()) {
    auto w = parse_u64(it->second);
    if (!w || *w < 1 || *w > kMaxJobWaitS)
      co_return error_reply(400, "badRequest", "query parameter 'waitS' must be 1.." + std::to_string(kMaxJobWaitS));
    deadline = Steady::now() + std::chrono::seconds(*w);
  }
  for (;;) {
    auto op = [job_id](Store& s) { return s.get_job(job_id); };
    auto r = co_await db_.run(std::move(op));
    if (!r) co_return reply_for(r.error());
    if (!deadline || protocol::is_final(r->state) || stopping_ || Steady::now() >= *deadline)
      co_return json_reply(200, *r);
    asio::steady_timer timer(ex_, *deadline);
    auto parked = job_waiters_.emplace(job_id, &timer);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    job_waiters_.erase(parked);
    // The client went away (the server cancels a held request when its connection closes).
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) throw boost::system::system_error(asio::error::operation_aborted);
  }
}

asio::awaitable<HttpReply> Service::cancel_job(std::string job_id) {
  auto op = [job_id](Store& s) { return s.cancel_job(job_id, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  if (r->wake_worker) hub_.wake_worker(*r->wake_worker);
  wake_job_waiters(job_id);
  log_->info("job {} cancel requested: now {}", job_id, protocol::to_string(r->job.state));
  co_return json_reply(200, r->job);
}

asio::awaitable<HttpReply> Service::event(std::string job_id, const HttpRequest& req) {
  auto body = decode<protocol::EventRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  auto op = [job_id, b = *body](Store& s) { return s.apply_event(job_id, b, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  if (r->attempt_ended) {
    liveness_.lease_forget(body->lease_id);
    rearm_clocks();
  }
  if (r->requeued) hub_.wake_one_for(*r->requeued);
  if (r->freed_slot) hub_.slot_freed(r->freed_slot->first, r->freed_slot->second);
  if (r->attempt_ended) wake_job_waiters(job_id);
  co_return json_reply(200, r->reply);
}

asio::awaitable<HttpReply> Service::put_log(std::string job_id, std::string stream, const HttpRequest& req) {
  auto t = parse_target(req.target);
  auto off = t->params.find("offset");
  auto lease = t->params.find("lease");
  std::optional<std::uint64_t> offset;
  if (off != t->params.end()) offset = parse_u64(off->second);
  if (!offset) co_return error_reply(400, "badRequest", "query parameter 'offset' must be a non-negative integer");
  if (lease == t->params.end() || !protocol::is_valid_id(lease->second))
    co_return error_reply(400, "badRequest", "query parameter 'lease' must be a lease id");
  auto op = [job_id, stream, l = lease->second, o = *offset, bytes = req.body](Store& s) {
    return s.append_log(job_id, stream, l, o, bytes);
  };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  co_return json_reply(200, protocol::LogAppendResponse{*r});
}

asio::awaitable<HttpReply> Service::get_log(std::string job_id, std::string stream, const HttpRequest& req) {
  auto t = parse_target(req.target);
  std::uint64_t offset = 0;
  std::optional<int> attempt;
  if (auto it = t->params.find("offset"); it != t->params.end()) {
    auto o = parse_u64(it->second);
    if (!o) co_return error_reply(400, "badRequest", "query parameter 'offset' must be a non-negative integer");
    offset = *o;
  }
  if (auto it = t->params.find("attempt"); it != t->params.end()) {
    auto a = parse_u64(it->second);
    if (!a || *a < 1 || *a > 1000) co_return error_reply(400, "badRequest", "query parameter 'attempt' must be 1..1000");
    attempt = static_cast<int>(*a);
  }
  auto op = [job_id, stream, offset, attempt](Store& s) {
    return s.read_log(job_id, stream, offset, attempt, kMaxLogRead);
  };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  HttpReply out{200, "application/octet-stream", std::move(r->data), {}};
  out.headers.emplace_back(protocol::kLogSizeHeader, std::to_string(r->size));
  out.headers.emplace_back(protocol::kLogAttemptHeader, std::to_string(r->attempt));
  out.headers.emplace_back(protocol::kLogCompleteHeader, r->complete ? "true" : "false");
  co_return out;
}

asio::awaitable<HttpReply> Service::metrics() {
  auto op = [](Store& s) { return s.counts(); };
  auto c = co_await db_.run(std::move(op));
  std::string out;
  out += "# HELP nymph_workers Workers by status.\n# TYPE nymph_workers gauge\n";
  for (const auto& [k, n] : c.workers_by_status) out += "nymph_workers{status=\"" + k + "\"} " + std::to_string(n) + "\n";
  out += "# HELP nymph_jobs Jobs by state.\n# TYPE nymph_jobs gauge\n";
  for (const auto& [k, n] : c.jobs_by_state) out += "nymph_jobs{state=\"" + k + "\"} " + std::to_string(n) + "\n";
  out += "# HELP nymph_queue_depth Jobs waiting for a worker.\n# TYPE nymph_queue_depth gauge\n";
  out += "nymph_queue_depth " + std::to_string(c.jobs_by_state["queued"]) + "\n";
  out += "# HELP nymph_held_polls Polls held open now.\n# TYPE nymph_held_polls gauge\n";
  out += "nymph_held_polls " + std::to_string(hub_.size()) + "\n";
  out += "# HELP nymph_held_job_waits GET /v1/jobs/{id}?waitS= requests held open now.\n"
         "# TYPE nymph_held_job_waits gauge\n";
  out += "nymph_held_job_waits " + std::to_string(job_waiters_.size()) + "\n";
  out += "# HELP nymph_db_commits_total Database batches committed.\n# TYPE nymph_db_commits_total counter\n";
  out += "nymph_db_commits_total " + std::to_string(db_.batches()) + "\n";
  out += "# HELP nymph_db_operations_total Database operations committed.\n# TYPE nymph_db_operations_total counter\n";
  out += "nymph_db_operations_total " + std::to_string(db_.committed_ops()) + "\n";
  co_return HttpReply{200, "text/plain; version=0.0.4", std::move(out), {}};
}

}  // namespace nymph::control
