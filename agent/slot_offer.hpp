#pragma once
// The slot a final event offers for the worker's next job (takeNext, docs/protocol.md 8.3): whether the worker
// must poll again to offer it once that event's delivery has ended. No I/O.

namespace nymph::agent {

// The slot stays with the control plane when a job in the event's reply took it, or when the held poll counted
// it (slotHeld) and is still the worker's poll in flight: no poll was sent since the event was (a poll sent
// since then left the slot out, and the server answers the counted one as soon as the newer arrives). Otherwise
// no poll knows the slot: true, poll again.
constexpr bool offered_slot_needs_new_poll(bool jobs_handed, bool slot_held, bool polled_since_offer) {
  return !jobs_handed && !(slot_held && !polled_since_offer);
}

}  // namespace nymph::agent
