#include "control/service.hpp"

#include <new>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include "common/duration.hpp"
#include "common/text.hpp"
#include "control/service_detail.hpp"
#include "control/storage_error.hpp"

namespace nymph::control {

namespace asio = boost::asio;
namespace json = boost::json;
using Steady = std::chrono::steady_clock;
using protocol::Directive;
using namespace detail;

HttpReply reply_for_exception(spdlog::logger& log, const HttpRequest& req) {
  auto method = printable_excerpt(req.method, 256);
  auto target = printable_excerpt(req.target, 256);
  try {
    throw;
  } catch (const StorageError& e) {
    log.error("{} {}: storage unavailable: {}", method, target, printable_excerpt(e.what(), 1024));
    return error_reply(503, "unavailable", "storage unavailable; retry later");
  } catch (const std::bad_alloc&) {
    log.error("{} {}: out of memory", req.method, req.target);
    return error_reply(503, "unavailable", "out of memory; retry later");
  } catch (const std::exception& e) {
    log.error("{} {}: internal error: {}", method, target, printable_excerpt(e.what(), 1024));
  } catch (...) {
    log.error("{} {}: internal error: an exception that is not a std::exception", method, target);
  }
  return error_reply(500, "internal", "internal error (the control plane's log has the details)");
}

HttpReply error_reply(unsigned status, std::string code, std::string message) {
  return reply_for(ApiError{status, std::move(code), std::move(message), {}});
}

Service::Service(asio::any_io_executor ex, DbWorker& db, ServiceConfig config, std::shared_ptr<spdlog::logger> log)
    : ex_(ex),
      db_(db),
      config_(config),
      log_(std::move(log)),
      liveness_(config.lease_ttl, config.stale_after,
                {config.runner_lease_ttl.begin(), config.runner_lease_ttl.end()}),
      clock_timer_(ex),
      purge_timer_(ex) {}

void Service::load_state() {
  LiveState s = db_.run_blocking([](Store& st) { return st.live_state(); });
  auto now = Steady::now();
  for (const auto& w : s.active_workers) liveness_.worker_seen(w, now);
  for (const auto& l : s.live_leases) liveness_.lease_renewed(l.lease_id, now, l.runner);
  log_->info("loaded {} active workers and {} live leases", s.active_workers.size(), s.live_leases.size());
}

void Service::stop() {
  if (stopping_) return;
  stopping_ = true;
  hub_.wake_all_for_shutdown();
  wake_all_job_waiters();
  clock_timer_.cancel();
  purge_timer_.cancel();
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
  for (std::size_t i = 0; i < expired.lost_leases.size(); ++i) {
    const std::string& lease = expired.lost_leases[i];
    std::string why = "lease not renewed for " +
                      format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(expired.lost_lease_ttls[i]));
    auto op = [lease, why](Store& s) { return s.expire_lease(lease, why, wall_now()); };
    auto x = co_await db_.run(std::move(op));
    if (!x.expired) continue;
    log_->warn("lease {} of worker {} expired; attempt lost{}", lease, x.worker_id, x.requeued ? ", job re-queued" : "");
    if (x.requeued) hub_.wake_one_for(*x.requeued, wall_now());
    wake_all_job_waiters();
  }
}

void Service::wake_job_waiters(const std::string& job_id, const std::optional<protocol::JobInfo>& job) {
  auto [first, last] = job_waiters_.equal_range(job_id);
  for (auto it = first; it != last; ++it) {
    *it->second.handed = job;
    it->second.timer->cancel();
  }
}

void Service::wake_all_job_waiters() {
  for (auto& [job, waiter] : job_waiters_) waiter.timer->cancel();
}

// ---------------------------------------------------------------------------------------------------------
// Entry point and routing

namespace {

// How long the last use of a token is kept in memory before it is written (tokens' last_used_at).
constexpr auto kTokenUseResolution = std::chrono::minutes(1);

bool may_hold(const protocol::Route& route, const Target& target) {
  switch (route.hold) {
    case protocol::Hold::never: return false;
    case protocol::Hold::always: return true;
    case protocol::Hold::with_wait_param: return target.params.contains("waitS");
  }
  return false;
}

std::string_view kind_name(protocol::Caller c) {
  switch (c) {
    case protocol::Caller::anyone: return "anyone";
    case protocol::Caller::agent: return "an agent token";
    case protocol::Caller::worker: return "the worker credential issued at registration (workerToken)";
    case protocol::Caller::admin: return "an admin token";
  }
  return "?";
}

bool is_kind(const Principal& who, protocol::Caller c) {
  switch (c) {
    case protocol::Caller::anyone: return true;
    case protocol::Caller::agent: return who.kind == Principal::Kind::agent;
    case protocol::Caller::worker: return who.kind == Principal::Kind::worker;
    case protocol::Caller::admin: return who.kind == Principal::Kind::admin;
  }
  return false;
}

}  // namespace

asio::awaitable<boost::system::result<AdmittedRequest, HttpReply>> Service::admit(HttpRequest head) {
  try {
    co_return co_await check_head(head);
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted) throw;  // cancelled: the client went away
    co_return reply_for_exception(*log_, head);
  } catch (...) {
    co_return reply_for_exception(*log_, head);
  }
}

asio::awaitable<HttpReply> Service::handle(AdmittedRequest req) {
  try {
    co_return co_await call(req);
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted) throw;
    co_return reply_for_exception(*log_, req.request);
  } catch (...) {
    co_return reply_for_exception(*log_, req.request);
  }
}

asio::awaitable<HttpReply> Service::handle(HttpRequest req) {
  std::string body = std::move(req.body);
  auto admitted = co_await admit(std::move(req));
  if (!admitted) co_return admitted.error();
  if (body.size() > admitted->body_limit)
    co_return error_reply(413, "bodyTooLarge", "request body exceeds " + std::to_string(admitted->body_limit) + " bytes");
  admitted->request.body = std::move(body);
  co_return co_await handle(std::move(*admitted));
}

asio::awaitable<std::optional<Principal>> Service::authenticate(const std::string& authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || !authorization.starts_with(kBearer)) co_return std::nullopt;
  std::string secret = authorization.substr(kBearer.size());
  std::string hash = token_hash(secret);
  if (auto it = credentials_.find(hash); it != credentials_.end()) co_return it->second;
  auto op = [secret](Store& s) -> std::optional<Principal> {
    if (auto t = s.find_token(secret))
      return Principal{t->role == Role::admin ? Principal::Kind::admin : Principal::Kind::agent, std::move(*t), {}};
    if (auto w = s.find_worker_credential(secret))
      return Principal{Principal::Kind::worker, std::move(w->token), std::move(w->worker_id)};
    return std::nullopt;
  };
  auto found = co_await db_.run(std::move(op));
  if (!found) co_return std::nullopt;  // unknown secrets are not cached: the cache holds only real credentials
  credentials_.emplace(hash, *found);
  if (found->kind == Principal::Kind::worker) worker_credential_[found->worker_id] = hash;
  co_return found;
}

asio::awaitable<void> Service::note_use(const TokenRecord& token) {
  auto now = Steady::now();
  auto [it, first] = token_used_.try_emplace(token.hash, now);
  if (!first && now - it->second < kTokenUseResolution) co_return;
  it->second = now;
  auto op = [hash = token.hash](Store& s) { return s.touch_token(hash, wall_now()); };
  co_await db_.run(std::move(op));
}

void Service::forget_worker_credential(const std::string& worker_id) {
  auto it = worker_credential_.find(worker_id);
  if (it == worker_credential_.end()) return;
  credentials_.erase(it->second);
  worker_credential_.erase(it);
}

void Service::forget_token(const std::string& hash) {
  std::erase_if(credentials_, [&](const auto& kv) { return kv.second.token.hash == hash; });
  std::erase_if(worker_credential_, [&](const auto& kv) { return !credentials_.contains(kv.second); });
}

asio::awaitable<boost::system::result<AdmittedRequest, HttpReply>> Service::check_head(HttpRequest& head) {
  using protocol::RouteMatch;
  auto t = parse_target(head.target);
  if (!t) co_return error_reply(400, "badRequest", "invalid request target");
  auto m = protocol::match_route(head.method, t->segments);
  if (m.outcome == RouteMatch::Outcome::not_found)
    co_return error_reply(404, "notFound", "no such endpoint: " + printable_excerpt(head.target, 256));
  Principal who;
  if (m.needs_token) {
    auto found = co_await authenticate(head.authorization);
    if (!found) co_return error_reply(401, "unauthorized", "missing or unknown bearer token");
    if (found->token.revoked) co_return error_reply(401, "revoked", "this credential was revoked");
    who = std::move(*found);
    co_await note_use(who.token);
  }
  if (m.outcome == RouteMatch::Outcome::method_not_allowed)
    co_return error_reply(405, "methodNotAllowed", "use " + m.allowed);
  if (auto bad = check_caller(*m.route, m.params, who)) co_return *bad;
  if (auto bad = check_path_params(m.params)) co_return *bad;
  bool log_bytes = m.route->body == protocol::BodyKind::log_bytes;
  AdmittedRequest a{std::move(head), m.route->endpoint, std::move(m.params), std::move(who),
                    log_bytes ? config_.limits.max_log_chunk : config_.limits.max_json_body, may_hold(*m.route, *t)};
  co_return a;
}

std::optional<HttpReply> Service::check_caller(const protocol::Route& route, const protocol::PathParams& params,
                                               const Principal& who) {
  if (!is_kind(who, route.caller))
    return error_reply(403, "forbidden", "this endpoint needs " + std::string(kind_name(route.caller)));
  if (route.caller == protocol::Caller::worker && !params.worker.empty() && params.worker != who.worker_id)
    return error_reply(403, "forbidden", "this credential acts for another worker");
  return std::nullopt;
}

std::optional<HttpReply> Service::check_path_params(const protocol::PathParams& p) {
  if (!p.worker.empty() && !protocol::is_valid_id(p.worker))
    return error_reply(404, "unknownWorker", "malformed id '" + printable_excerpt(p.worker, 128) + "'");
  if (!p.job.empty() && !protocol::is_valid_id(p.job))
    return error_reply(404, "unknownJob", "malformed id '" + printable_excerpt(p.job, 128) + "'");
  if (!p.stream.empty() && !protocol::parse_log_stream(p.stream))
    return error_reply(400, "badRequest",
                       "unknown log stream '" + printable_excerpt(p.stream, 128) + "' (stdout or stderr)");
  return std::nullopt;
}

asio::awaitable<HttpReply> Service::call(AdmittedRequest& a) {
  using protocol::Endpoint;
  const auto& p = a.params;
  HttpRequest& req = a.request;
  switch (a.endpoint) {
    case Endpoint::healthz: co_return HttpReply{200, "application/json", R"({"status":"ok"})", {}};
    case Endpoint::metrics: co_return co_await metrics();
    case Endpoint::list_workers: co_return co_await list_workers(req);
    case Endpoint::register_worker: co_return co_await register_worker(a.principal, req);
    case Endpoint::poll: co_return co_await poll(p.worker, req);
    case Endpoint::worker_exit: co_return co_await worker_exit(p.worker, req);
    case Endpoint::kill_worker: co_return co_await directive(p.worker, Directive::kill);
    case Endpoint::drain_worker: co_return co_await directive(p.worker, Directive::drain);
    case Endpoint::list_jobs: co_return co_await list_jobs(req);
    case Endpoint::submit_job: co_return co_await submit(req);
    case Endpoint::get_job: co_return co_await get_job(p.job, req);
    case Endpoint::job_events: co_return co_await event(p.job, a.principal.worker_id, req);
    case Endpoint::cancel_job: co_return co_await cancel_job(p.job);
    case Endpoint::get_log: co_return co_await get_log(p.job, p.stream, req);
    case Endpoint::put_log: co_return co_await put_log(p.job, p.stream, a.principal.worker_id, req);
    case Endpoint::list_tokens: co_return co_await list_tokens();
    case Endpoint::revoke_token: co_return co_await revoke_token(req);
    case Endpoint::purge: co_return co_await purge_now(req);
  }
  co_return error_reply(404, "notFound", "no such endpoint");
}

// ---------------------------------------------------------------------------------------------------------
// Worker endpoints

asio::awaitable<HttpReply> Service::register_worker(const Principal& by, const HttpRequest& req) {
  auto body = decode<protocol::RegisterRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  if (auto why = scope_violation(by.token.scope, body->tags, body->runners))
    co_return error_reply(403, "outOfScope", *why);
  auto op = [b = *body, token = by.token](Store& s) { return s.register_worker(b, token, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  forget_worker_credential(r->reply.worker_id);  // a new registration replaces the worker's credential
  auto now = Steady::now();
  liveness_.worker_seen(r->reply.worker_id, now);
  for (const auto& l : r->lost_leases) liveness_.lease_forget(l);
  for (const auto& l : r->renewed_leases) liveness_.lease_renewed(l.lease_id, now, l.runner);
  rearm_clocks();
  for (const auto& w : r->replaced_workers) {
    // Gone, its credential void (401 from now on): its held poll is answered (empty) and it is no longer
    // watched for staleness.
    forget_worker_credential(w);
    liveness_.worker_forget(w);
    cancels_sent_.erase(w);
    hub_.wake_worker(w);
  }
  for (const auto& needs : r->requeued) hub_.wake_one_for(needs, wall_now());
  if (!r->lost_leases.empty()) wake_all_job_waiters();
  if (!r->replaced_workers.empty() || !r->adopted_leases.empty())
    log_->info("worker {} took over from {} worker(s) of identity '{}': {} attempt(s) adopted, {} lost",
               r->reply.worker_id, r->replaced_workers.size(), printable_excerpt(body->identity.value_or(""), 200),
               r->adopted_leases.size(), r->lost_leases.size());
  r->reply.poll_timeout_s = std::chrono::duration<double>(config_.poll_timeout).count();
  r->reply.lease_ttl_s = std::chrono::duration<double>(config_.lease_ttl).count();
  for (const auto& runner : body->runners)
    if (auto it = config_.runner_lease_ttl.find(runner); it != config_.runner_lease_ttl.end())
      r->reply.runner_lease_ttl_s[runner] = std::chrono::duration<double>(it->second).count();
  r->reply.stale_after_s = std::chrono::duration<double>(config_.stale_after).count();
  log_->info("worker {} {} (launch {}, host {}, runners {}, token {})", r->reply.worker_id,
             r->created ? "registered" : "re-registered", body->launch_id, printable_excerpt(body->hostname, 256),
             body->runners.size(), printable_excerpt(by.token.name, 64));
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
  for (const auto& l : out.renewed_leases) liveness_.lease_renewed(l.lease_id, now, l.runner);
  for (const auto& j : out.reply.jobs) liveness_.lease_renewed(j.lease_id, now, j.runner);
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
  ParkGuard(PollHub& hub, PollHub::Waiter& w, Liveness& live, const std::vector<LeaseRef>& leases)
      : hub_(hub), w_(w), live_(live), leases_(leases) {
    live_.worker_hold(w_.worker_id);
    for (const auto& l : leases_) live_.lease_hold(l.lease_id, l.runner);
    hub_.park(w_);
  }
  ~ParkGuard() {
    hub_.unpark(w_);
    auto now = Steady::now();
    live_.worker_release(w_.worker_id, now);
    for (const auto& l : leases_) live_.lease_release(l.lease_id, now);
  }
  ParkGuard(const ParkGuard&) = delete;
  ParkGuard& operator=(const ParkGuard&) = delete;

 private:
  PollHub& hub_;
  PollHub::Waiter& w_;
  Liveness& live_;
  const std::vector<LeaseRef>& leases_;
};
}  // namespace

asio::awaitable<HttpReply> Service::poll(std::string worker_id, const HttpRequest& req) {
  ++poll_requests_;
  auto body = decode<protocol::PollRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  const auto deadline = Steady::now() + config_.poll_timeout;
  bool woken = false;
  std::optional<PollOutcome> handed;  // computed for this poll by a submission or final event (PollHub::hand)
  bool look_again = false;            // something concerned the worker while its poll was claimed
  for (;;) {
    std::optional<ApiResult<PollOutcome>> r;
    if (handed) r.emplace(std::move(*handed));
    else r.emplace(co_await run_poll(worker_id, *body));
    handed.reset();
    if (!*r) {
      // The worker exited while its poll was parked: answer the poll, do not ask it to re-register.
      if (woken && r->error().status == 404) co_return json_reply(200, protocol::PollResponse{});
      co_return reply_for(r->error());
    }
    PollOutcome& out = **r;
    for (auto& j : out.reply.jobs) j.lease_ttl_s = std::chrono::duration<double>(liveness_.lease_ttl(j.runner)).count();
    if (stopping_ || has_news(worker_id, out, body->draining) || Steady::now() >= deadline) {
      settle_poll(worker_id, out);
      co_return json_reply(200, out.reply);
    }
    if (std::exchange(look_again, false)) continue;
    asio::steady_timer timer(ex_, deadline);
    PollHub::Waiter waiter{worker_id, out.caps, *body, !out.draining, [&timer] { timer.cancel(); }};
    {
      ParkGuard guard(hub_, waiter, liveness_, out.renewed_leases);
      rearm_clocks();
      // A claimed poll outlives its deadline until its outcome is handed to it or it is released: its lease
      // may already be committed.
      for (;;) {
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (waiter.why != PollHub::Why::claimed) break;
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) break;
        timer.expires_at(Steady::time_point::max());
      }
    }
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) {
      // The client closed the connection: that ends its contact. Recorded by a coroutine of its own, since
      // every further co_await of this cancelled one throws.
      asio::co_spawn(ex_, note_contact(worker_id), asio::detached);
      throw boost::system::system_error(asio::error::operation_aborted);
    }
    if (waiter.why == PollHub::Why::handed) {
      woken = true;
      handed = std::move(waiter.handed);
      *body = std::move(waiter.request);  // the free slots the handed outcome was computed from
      look_again = waiter.rewake;
      continue;
    }
    if (waiter.why != PollHub::Why::woken) {
      // Timed out, superseded by a newer poll, or shutting down: the last outcome still stands (no news).
      // Its reply ends the worker's contact: lastSeen is the end of the held poll, not its start.
      if (!stopping_) co_await note_contact(worker_id);
      co_return json_reply(200, out.reply);
    }
    woken = true;
    *body = std::move(waiter.request);  // slots freed by final events while parked (PollHub::slot_freed)
  }
}

asio::awaitable<ApiResult<PollOutcome>> Service::run_poll(const std::string& worker_id,
                                                          const protocol::PollRequest& req) {
  auto op = [worker_id, req](Store& s) { return s.poll(worker_id, req, wall_now()); };
  co_return co_await db_.run(std::move(op));
}

asio::awaitable<void> Service::note_contact(std::string worker_id) {
  try {
    auto op = [worker_id](Store& s) { return s.touch_worker(worker_id, wall_now()); };
    co_await db_.run(std::move(op));
  } catch (const std::exception& e) {
    log_->warn("cannot record the end of worker {}'s poll (lastSeen): {}", worker_id, printable_excerpt(e.what(), 1024));
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
  log_->info("worker {} exited: {} {}", worker_id, protocol::to_string(body->exit_reason),
             printable_excerpt(body->message, 1024));
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

asio::awaitable<HttpReply> Service::list_workers(const HttpRequest& req) {
  auto t = parse_target(req.target);
  auto page = page_of(*t, kWorkersPageDefault, config_.limits.max_workers_page, config_.limits.max_page_bytes);
  if (!page) co_return page.error();
  std::optional<std::string> after;
  if (auto it = t->params.find("cursor"); it != t->params.end()) {
    if (!protocol::is_valid_id(it->second)) co_return bad_cursor();  // a worker id
    after = it->second;
  }
  auto op = [after, p = *page](Store& s) { return s.list_workers(after, p); };
  auto r = co_await db_.run(std::move(op));
  co_return json_reply(200, r);
}

}  // namespace nymph::control

