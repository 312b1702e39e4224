#include "agent/delivery.hpp"

#include <algorithm>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>

#include "agent/deadline.hpp"
#include "agent/job_mapping.hpp"
#include "common/coroutine_warning.hpp"

namespace nymph::agent {

namespace asio = boost::asio;

namespace {

// Sends one upload. An event that ends the attempt offers its slot when the attempt does (takeNext), noting the
// daemon's poll count as it goes; whatever an event's reply hands over is kept on the attempt for the daemon.
asio::awaitable<CallResult<void>> upload(const DeliveryContext& ctx, Attempt& a, const Upload& u) {
  ControlPlane& cp = ctx.cp;
  if (u.kind == Upload::Kind::event) {
    const OutboxEvent& e = *u.event;
    auto request = to_event(a.lease_id, e.seq, e.update, e.at);
    request.take_next = a.offers_slot && runners::is_final(e.update.state);
    if (request.take_next) a.offered_at_poll = ctx.polls_sent;
    auto r = co_await cp.send_event(a.job_id, std::move(request));
    if (!r) co_return r.error();
    if (!r->jobs.empty() && !a.handed) a.handed = std::make_unique<std::vector<protocol::JobAssignment>>();
    for (auto& job : r->jobs) a.handed->push_back(std::move(job));
    a.slot_held = r->slot_held.value_or(false);
    co_return CallResult<void>{};
  }
  auto r = co_await cp.put_log(a.job_id, to_log_stream(u.stream), u.offset, a.lease_id, std::string(u.bytes));
  if (!r) co_return r.error();
  co_return CallResult<void>{};
}

// Applies a failed upload's meaning to the attempt, except a transient one and a refused token.
void on_upload_failure(Attempt& a, const Upload& u, const CallError& err, spdlog::logger& log) {
  switch (err.kind) {
    case CallFailure::fenced:
      log.warn("job {}: lease {} is no longer current ({}); stopping the attempt", a.job_id, a.lease_id, err.message);
      a.fenced = true;
      if (a.run_active) a.runner->stop(a.job_id, runners::StopReason::lease_lost);
      break;
    case CallFailure::log_gap:
      if (!a.outbox.expected_offset(u.stream, *err.expected_offset)) {
        log.error("job {}: control plane expects {} offset {}, which this agent no longer has", a.job_id,
                  protocol::to_string(to_log_stream(u.stream)), *err.expected_offset);
        a.fenced = true;
      }
      break;
    case CallFailure::closed:
      if (u.kind == Upload::Kind::log) {
        // Logged once per stream: nothing more of it is queued, so no upload of it comes back here.
        log.warn("job {}: the control plane takes no more {} ({}); dropping the rest of it", a.job_id,
                 protocol::to_string(to_log_stream(u.stream)), err.message);
        a.outbox.close_stream(u.stream);
        a.drained.notify();
        break;
      }
      [[fallthrough]];
    case CallFailure::rejected:
    case CallFailure::worker_unknown:
      log.error("job {}: dropping an upload the control plane rejects: {}", a.job_id, err.message);
      a.outbox.acknowledged(u);
      break;
    case CallFailure::unauthorized:
    case CallFailure::transient: break;
  }
}

}  // namespace

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<DeliveryEnd> deliver(Attempt& a, DeliveryContext ctx) {
  Backoff retry(ctx.retry);
  while (!a.stopped()) {
    // Not cancelled at the exit deadline: the uploads in flight are, and each freed slot resumes a waiter that
    // finds its attempt abandoned.
    auto slot = co_await ctx.upload_slots.acquire();
    if (a.stopped()) break;
    auto u = a.outbox.next_upload(Clock::now());
    if (!u) {
      slot.reset();
      if (a.outbox.finished() || (!a.run_active && !a.outbox.has_final())) break;
      const auto held = a.outbox.held_until(Clock::now());
      // Nothing to send while the run goes on: this delivery ends, and the next upload queued starts another
      // (Attempt::queued), so an attempt holds no frames here while it has nothing to say.
      if (!held && a.run_active) break;
      co_await a.wake.wait(held);
      continue;
    }
    auto sent = co_await cancellable(co_await asio::this_coro::executor, upload(ctx, a, *u), a.cancel_upload);
    slot.reset();
    if (a.stopped() || !sent) break;
    auto& r = *sent;
    if (r) {
      // Others may be waiting out a backoff against the same control plane: it answers again.
      if (retry.failures() > 0) ctx.state_changed.notify();
      retry.reset();
      a.outbox.acknowledged(*u);
      a.drained.notify();
      if (!ctx.waiting_turns.empty() && !a.outbox.finished()) co_return DeliveryEnd{DeliveryEnd::Kind::turn_over};
      continue;
    }
    if (r.error().kind == CallFailure::unauthorized)
      co_return DeliveryEnd{DeliveryEnd::Kind::token_refused, r.error().message};
    if (r.error().kind == CallFailure::transient) {
      auto delay = retry.next_delay();
      ctx.log.warn("job {}: {}; retrying in {} ms", a.job_id, r.error().message, delay.count());
      auto until = Clock::now() + delay;
      if (ctx.exit_deadline) until = std::min(until, *ctx.exit_deadline);
      using asio::experimental::awaitable_operators::operator||;
      co_await (a.wake.wait(until) || ctx.state_changed.wait(until));
      continue;
    }
    on_upload_failure(a, *u, r.error(), ctx.log);
  }
  co_return DeliveryEnd{};
}
NYMPH_GCC_PR109224_END

}  // namespace nymph::agent
