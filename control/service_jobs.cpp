// The Service's job, log and metrics endpoints (the worker endpoints and routing are in service.cpp).
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "common/duration.hpp"
#include "common/text.hpp"
#include "control/service.hpp"
#include "control/service_detail.hpp"

namespace nymph::control {

namespace asio = boost::asio;
namespace json = boost::json;
using Steady = std::chrono::steady_clock;
using namespace detail;

// ---------------------------------------------------------------------------------------------------------
// Tokens

asio::awaitable<HttpReply> Service::list_tokens() {
  auto op = [](Store& s) { return s.list_tokens(); };
  co_return json_reply(200, co_await db_.run(std::move(op)));
}

asio::awaitable<HttpReply> Service::revoke_token(const HttpRequest& req) {
  auto body = decode<protocol::RevokeRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  auto op = [b = *body](Store& s) { return s.revoke_tokens(b.token, wall_now()); };
  auto r = co_await db_.run(std::move(op));
  if (!r) co_return reply_for(r.error());
  for (const auto& hash : r->token_hashes) forget_token(hash);
  for (const auto& w : r->reply.workers) {
    liveness_.worker_forget(w);
    cancels_sent_.erase(w);
    hub_.wake_worker(w);
  }
  log_->warn("revoked {} token(s) named or with id '{}'; {} worker(s) ended", r->reply.revoked.size(),
             printable_excerpt(body->token, 128), r->reply.workers.size());
  co_return json_reply(200, r->reply);
}

// ---------------------------------------------------------------------------------------------------------
// Job endpoints

namespace {

// A DB operation's outcome and, when it claimed a held poll, that poll's outcome from the same transaction.
template <class T>
struct WithPoll {
  T first;
  std::optional<ApiResult<PollOutcome>> poll;
  std::optional<protocol::JobInfo> job;  // the job as the operation left it, when someone waits for it
  // The operation is rolled back as a whole when its own part failed (DbWorker).
  bool has_error() const {
    if constexpr (requires { first.has_error(); }) return first.has_error();
    else return false;
  }
};

// Releases a claimed poll unless hand_or_release() took it: an operation that throws leaves no poll claimed.
class ClaimGuard {
 public:
  ClaimGuard(PollHub& hub, std::optional<PollHub::Claim> claim) : hub_(hub), claim_(std::move(claim)) {}
  ~ClaimGuard() {
    if (claim_) hub_.release(*claim_);
  }
  ClaimGuard(const ClaimGuard&) = delete;
  ClaimGuard& operator=(const ClaimGuard&) = delete;
  const std::optional<PollHub::Claim>& get() const { return claim_; }
  PollHub::Claim take() { return std::exchange(claim_, std::nullopt).value(); }

 private:
  PollHub& hub_;
  std::optional<PollHub::Claim> claim_;
};

bool leased(const std::optional<ApiResult<PollOutcome>>& poll, const std::string& job_id) {
  if (!poll || !*poll) return false;
  const auto& jobs = (*poll)->reply.jobs;
  return std::any_of(jobs.begin(), jobs.end(), [&](const auto& j) { return j.job_id == job_id; });
}

}  // namespace

void Service::hand_or_release(const PollHub::Claim& claim, std::optional<ApiResult<PollOutcome>> outcome,
                              protocol::PollRequest asked) {
  if (!outcome || !*outcome) {
    hub_.release(claim);
    return;
  }
  std::size_t jobs = (*outcome)->reply.jobs.size();
  if (!hub_.hand(claim, std::move(**outcome), std::move(asked)) && jobs > 0)
    log_->warn("worker {}'s poll ended before {} job(s) leased to it could be sent; their leases expire",
               claim.worker_id, jobs);
}

asio::awaitable<HttpReply> Service::submit(const HttpRequest& req) {
  auto body = decode<protocol::JobSubmission>(req.body, config_.limits);
  if (!body) co_return body.error();
  // An idle held poll that can take the job leases it in the submission's own transaction (one commit).
  ClaimGuard claim(hub_, hub_.claim_one_for(needs_of(*body), wall_now()));
  auto op = [b = *body, c = claim.get()](Store& s) {
    WithPoll<SubmitOutcome> out{s.submit(b, wall_now()), std::nullopt, std::nullopt};
    if (c) out.poll = s.poll(c->worker_id, c->request, wall_now());
    return out;
  };
  auto r = co_await db_.run(std::move(op));
  bool taken = leased(r.poll, r.first.job.id);
  if (claim.get()) {
    auto asked = claim.get()->request;
    hand_or_release(claim.take(), std::move(r.poll), std::move(asked));
  }
  if (!taken) hub_.wake_one_for(r.first.needs, wall_now());
  log_->info("job {} submitted (runner {}, kind {}){}", r.first.job.id, printable_excerpt(r.first.job.runner, 256),
             r.first.job.kind, taken ? ", leased at once" : "");
  co_return json_reply(201, r.first.job);
}

asio::awaitable<HttpReply> Service::list_jobs(const HttpRequest& req) {
  auto t = parse_target(req.target);
  std::optional<protocol::JobState> state;
  if (auto it = t->params.find("state"); it != t->params.end()) {
    state = protocol::parse_job_state(it->second);
    if (!state) co_return error_reply(400, "badRequest", "unknown job state '" + it->second.substr(0, 64) + "'");
  }
  auto page = page_of(*t, kJobsPageDefault, config_.limits.max_jobs_page, config_.limits.max_page_bytes);
  if (!page) co_return page.error();
  std::optional<std::int64_t> before;
  if (auto it = t->params.find("cursor"); it != t->params.end()) {
    auto seq = parse_u64(it->second);  // a job's sequence number
    if (!seq || *seq > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) co_return bad_cursor();
    before = static_cast<std::int64_t>(*seq);
  }
  auto op = [state, before, p = *page](Store& s) { return s.list_jobs(state, before, p); };
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
  std::optional<protocol::JobInfo> handed;  // the job as the final event that woke this wait committed it
  for (;;) {
    std::optional<ApiResult<protocol::JobInfo>> r;
    if (handed) {
      r.emplace(std::move(*handed));
    } else {
      auto op = [job_id](Store& s) { return s.get_job(job_id); };
      r.emplace(co_await db_.run(std::move(op)));
    }
    handed.reset();
    if (!*r) co_return reply_for(r->error());
    const protocol::JobInfo& job = **r;
    if (!deadline || protocol::is_final(job.state) || stopping_ || Steady::now() >= *deadline)
      co_return json_reply(200, job);
    asio::steady_timer timer(ex_, *deadline);
    auto parked = job_waiters_.emplace(job_id, JobWaiter{&timer, &handed});
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

asio::awaitable<HttpReply> Service::event(std::string job_id, std::string worker_id, const HttpRequest& req) {
  auto body = decode<protocol::EventRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  // takeNext: the slot the event frees takes the next queued job in the event's own transaction, handed in its
  // reply. Otherwise a final event frees a slot of the worker's held poll, which takes the next queued job in
  // the same way (one commit for "done" and the next lease either way).
  const bool take_next = body->take_next;
  ClaimGuard claim(hub_, protocol::is_final(body->state) && !take_next ? hub_.claim_worker(worker_id) : std::nullopt);
  // Someone waits for this job (GET ?waitS=): the event's transaction reads it for them, as it commits it.
  const bool awaited = job_waiters_.contains(job_id);
  auto op = [job_id, worker_id, b = *body, c = claim.get(), awaited](Store& s) {
    s.touch_worker(worker_id, wall_now());  // an event is contact (lastSeen), whatever it is answered
    WithPoll<ApiResult<EventOutcome>> out{s.apply_event(job_id, b, worker_id, wall_now()), std::nullopt, std::nullopt};
    auto& r = out.first;
    if (awaited && r && r->attempt_ended)
      if (auto job = s.get_job(job_id)) out.job = std::move(*job);
    if (r && r->reply.duplicate) {
      r->reply.jobs = s.taken_by_event(b.lease_id, b.seq, worker_id);
    } else if (r && r->freed_slot && b.take_next) {
      r->reply.jobs = s.take_next(worker_id, r->freed_slot->second, b.lease_id, b.seq, wall_now());
    } else if (c && r && r->freed_slot) {
      protocol::PollRequest asked = c->request;
      ++asked.free[r->freed_slot->second];
      out.poll = s.poll(worker_id, asked, wall_now());
    }
    return out;
  };
  auto both = co_await db_.run(std::move(op));
  auto& r = both.first;
  if (claim.get()) {
    protocol::PollRequest asked = claim.get()->request;
    if (r && r->freed_slot) ++asked.free[r->freed_slot->second];
    bool handed = both.poll && *both.poll;
    hand_or_release(claim.take(), std::move(both.poll), std::move(asked));
    if (handed && r) r->freed_slot.reset();  // counted in the handed poll's request
  }
  if (!r) co_return reply_for(r.error());
  if (r->attempt_ended) {
    liveness_.lease_forget(body->lease_id);
    rearm_clocks();
  }
  if (!r->reply.jobs.empty()) settle_handed_leases(r->reply.jobs);
  if (r->requeued) hub_.wake_one_for(*r->requeued, wall_now());
  if (take_next) {
    // The slot went to a job in this reply, or (none queued) to the held poll if there is one; the worker
    // learns which, so that it offers the slot again when no poll counts it.
    bool held = r->freed_slot && r->reply.jobs.empty() &&
                hub_.slot_freed_quietly(r->freed_slot->first, r->freed_slot->second);
    r->reply.slot_held = held;
  } else if (r->freed_slot) {
    hub_.slot_freed(r->freed_slot->first, r->freed_slot->second);
  }
  if (r->attempt_ended) wake_job_waiters(job_id, both.job);
  co_return json_reply(200, r->reply);
}

void Service::settle_handed_leases(std::vector<protocol::JobAssignment>& jobs) {
  auto now = Steady::now();
  for (auto& j : jobs) {
    j.lease_ttl_s = std::chrono::duration<double>(liveness_.lease_ttl(j.runner)).count();
    liveness_.lease_renewed(j.lease_id, now, j.runner);  // its clock starts as the reply carrying it is sent
  }
  rearm_clocks();
}

asio::awaitable<HttpReply> Service::put_log(std::string job_id, std::string stream, std::string worker_id,
                                            const HttpRequest& req) {
  auto t = parse_target(req.target);
  auto off = t->params.find("offset");
  auto lease = t->params.find("lease");
  std::optional<std::uint64_t> offset;
  if (off != t->params.end()) offset = parse_u64(off->second);
  if (!offset) co_return error_reply(400, "badRequest", "query parameter 'offset' must be a non-negative integer");
  if (lease == t->params.end() || !protocol::is_valid_id(lease->second))
    co_return error_reply(400, "badRequest", "query parameter 'lease' must be a lease id");
  auto op = [job_id, stream, worker_id, l = lease->second, o = *offset, bytes = req.body,
             cap = config_.limits.max_log_bytes_per_job](Store& s) {
    s.touch_worker(worker_id, wall_now());  // a log upload is contact (lastSeen), whatever it is answered
    return s.append_log(job_id, stream, l, worker_id, o, bytes, cap);
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
  // From memory only: an unauthenticated scraper must not queue work on the one DB thread.
  const StateCounts c = db_.gauges();
  std::string out;
  out += "# HELP nymph_workers Workers by status.\n# TYPE nymph_workers gauge\n";
  for (std::size_t i = 0; i < c.workers.size(); ++i) {
    auto s = static_cast<protocol::WorkerStatus>(i);
    out += "nymph_workers{status=\"" + std::string(protocol::to_string(s)) + "\"} " + std::to_string(c[s]) + "\n";
  }
  out += "# HELP nymph_jobs Jobs by state.\n# TYPE nymph_jobs gauge\n";
  for (std::size_t i = 0; i < c.jobs.size(); ++i) {
    auto s = static_cast<protocol::JobState>(i);
    out += "nymph_jobs{state=\"" + std::string(protocol::to_string(s)) + "\"} " + std::to_string(c[s]) + "\n";
  }
  out += "# HELP nymph_queue_depth Jobs waiting for a worker.\n# TYPE nymph_queue_depth gauge\n";
  out += "nymph_queue_depth " + std::to_string(c[protocol::JobState::queued]) + "\n";
  out += "# HELP nymph_held_polls Polls held open now.\n# TYPE nymph_held_polls gauge\n";
  out += "nymph_held_polls " + std::to_string(hub_.size()) + "\n";
  out += "# HELP nymph_held_job_waits GET /v1/jobs/{id}?waitS= requests held open now.\n"
         "# TYPE nymph_held_job_waits gauge\n";
  out += "nymph_held_job_waits " + std::to_string(job_waiters_.size()) + "\n";
  out += "# HELP nymph_poll_requests_total Worker polls received.\n# TYPE nymph_poll_requests_total counter\n";
  out += "nymph_poll_requests_total " + std::to_string(poll_requests_) + "\n";
  out += "# HELP nymph_db_commits_total Database batches committed.\n# TYPE nymph_db_commits_total counter\n";
  out += "nymph_db_commits_total " + std::to_string(db_.batches()) + "\n";
  out += "# HELP nymph_db_operations_total Database operations committed.\n# TYPE nymph_db_operations_total counter\n";
  out += "nymph_db_operations_total " + std::to_string(db_.committed_ops()) + "\n";
  co_return HttpReply{200, "text/plain; version=0.0.4", std::move(out), {}};
}

}  // namespace nymph::control
