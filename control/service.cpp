#include "control/service.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>

#include "common/duration.hpp"
#include "control/service_detail.hpp"
#include "control/storage_error.hpp"

namespace nymph::control {

namespace asio = boost::asio;
namespace json = boost::json;
using Steady = std::chrono::steady_clock;
using protocol::Directive;
using namespace detail;

namespace {

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

}  // namespace nymph::control
