#pragma once
// The shipper of one attempt: uploads its events and log chunks in the order its outbox offers them and
// decides what each control-plane failure means for the attempt.
#include <cstdint>
#include <deque>
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
  // upload from the outbox, so what its attempt queues meanwhile is sent as it stands when the slot comes.
  ConcurrencyLimit& upload_slots;
  // Attempts with something to send that wait for a delivery coroutine of their own (the daemon keeps a few and
  // hands them round): while any wait, a delivery hands its turn on after each acknowledged upload.
  const std::deque<Attempt*>& waiting_turns;
};

// How a delivery ended.
struct DeliveryEnd {
  enum class Kind {
    done,           // see deliver(): nothing more to do for the attempt until it queues something
    turn_over,      // others wait for a turn: the attempt goes to the back of the line, its outbox not done
    token_refused,  // the control plane refused the agent's token (`message`)
  } kind = Kind::done;
  std::string message;
};

// Delivers `a`'s events and logs in order until its final event is acknowledged, the attempt is stopped
// (fenced, detached, abandoned), its run ended without a final event, or, while the run goes on, nothing is
// left to send or held back (the next upload queued starts a new delivery); each upload waits for one of
// ctx.upload_slots first; transient failures are retried
// with backoff for as long as it takes (each wait ends early on the attempt's wake-up, a change of the daemon's
// state or its exit deadline; an upload in flight ends when the attempt's cancel_upload is emitted). A lost lease (or a log offset this agent no longer has) fences
// the attempt, and a lost lease also stops its run (StopReason::lease_lost); an upload the control plane
// rejects is dropped, and a log stream it takes no more of (its log cap, or the attempt is final) is closed
// with one warning: the rest of that stream is dropped, the events still go. Ends with turn_over after an
// acknowledged upload while other attempts wait for a turn (ctx.waiting_turns), and with token_refused when the
// control plane refused the agent's token (the caller must stop the agent and give the attempt up). Cancelled
// only with the io_context.
boost::asio::awaitable<DeliveryEnd> deliver(Attempt& a, DeliveryContext ctx);

}  // namespace nymph::agent
