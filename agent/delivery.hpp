#pragma once
// The shipper of one attempt: uploads its events and log chunks in the order its outbox offers them and
// decides what each control-plane failure means for the attempt.
#include <cstdint>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <spdlog/logger.h>

#include "agent/attempt.hpp"
#include "agent/backoff.hpp"
#include "agent/control_plane.hpp"
#include "common/concurrency_limit.hpp"
#include "common/notifier.hpp"

namespace nymph::agent {

// What delivery needs from the daemon; all of it outlives the delivery.
struct DeliveryContext {
  ControlPlane& cp;
  Backoff::Config retry;    // backoff between transient failures
  Notifier& state_changed;  // a retry waits here: any change of the daemon's state retries at once
  // A2: once the worker is stopping, no retry waits past this (the daemon's exit deadline); the daemon then
  // abandons the attempt and cancels its upload in flight (Attempt::cancel_upload).
  const std::optional<Clock::time_point>& exit_deadline;
  spdlog::logger& log;
  const std::uint64_t& polls_sent;  // the daemon's poll count, noted as a final event that offers its slot is sent
  // Uploads on the wire at once, all attempts together: a delivery waits for a slot before it takes its next
  // upload from the outbox, so ten thousand attempts reporting at once wait as shallow coroutines, and what
  // they queue meanwhile is sent as it stands when their turn comes.
  ConcurrencyLimit& upload_slots;
};

// Delivers `a`'s events and logs in order until its final event is acknowledged, the attempt is stopped
// (fenced, detached, abandoned), its run ended without a final event, or, while the run goes on, nothing is
// left to send or held back (the next upload queued starts a new delivery); each upload waits for one of
// ctx.upload_slots first; transient failures are retried
// with backoff for as long as it takes (each wait ends early on the attempt's wake-up, a change of the daemon's
// state or its exit deadline; an upload in flight ends when the attempt's cancel_upload is emitted). A lost lease (or a log offset this agent no longer has) fences
// the attempt, and a lost lease also stops its run (StopReason::lease_lost); an upload the control plane
// rejects is dropped, and a log stream it takes no more of (its log cap, or the attempt is final) is closed
// with one warning: the rest of that stream is dropped, the events still go. Returns the control plane's message when it refused the agent's token (the caller
// must stop the agent and give the attempt up), nullopt otherwise. Cancelled only with the io_context.
boost::asio::awaitable<std::optional<std::string>> deliver(Attempt& a, DeliveryContext ctx);

}  // namespace nymph::agent
