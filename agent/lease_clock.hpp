#pragma once
// The agent's side of one attempt's lease (D4, issue 15), as a sans-io value the attempt holds: an attempt whose
// lease the agent could not renew for `ttl - margin` must be stopped before the control plane re-queues it, so
// that two copies of a job never run at once. A lease counts as renewed, from the moment the request left, when
// a poll or registration that listed it got a successful reply (the server renews what a request lists, and holds
// it while a poll is held). A manager holds ten thousand: each is two words inside its attempt, no map node.
#include <chrono>
#include <optional>

#include "agent/lifecycle.hpp"

namespace nymph::agent {

class LeaseClock {
 public:
  // How much earlier than the server the agent gives a lease up: max(5 s, ttl / 6).
  static std::chrono::milliseconds margin_for(std::chrono::milliseconds ttl);
  // How long the agent may go without renewing a lease of `ttl`: ttl - margin_for(ttl), at least 0.
  static std::chrono::milliseconds window_for(std::chrono::milliseconds ttl);

  // Starts the clock of a lease `ttl` long at `now` (its assignment renewed it), replacing any previous one.
  void start(std::chrono::milliseconds ttl, Clock::time_point now);
  // A poll or registration that listed the lease and was sent at `sent` got a successful reply: the clock restarts
  // at `sent` (never earlier than it already stands). Ignored unless the clock runs.
  void renewed(Clock::time_point sent);
  // Stops the clock (the run ended, or the lease expired and the attempt was stopped): expired() stays false.
  void stop() { renewed_ = kStopped; }

  // Whether the clock runs (started and not stopped).
  bool running() const { return renewed_ != kStopped; }
  // Whether the clock runs and the lease was not renewed within its window at `now`.
  bool expired(Clock::time_point now) const { return running() && now >= renewed_ + window_; }
  // When expired() turns true, or nullopt while the clock does not run.
  std::optional<Clock::time_point> expiry() const;
  // How long the lease last started may go unrenewed (window_for its TTL; 0 before start()). Kept after stop().
  std::chrono::milliseconds window() const { return window_; }

 private:
  static constexpr Clock::time_point kStopped = Clock::time_point::max();
  std::chrono::milliseconds window_{0};
  Clock::time_point renewed_ = kStopped;
};

}  // namespace nymph::agent
