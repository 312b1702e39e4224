#pragma once
// The agent's side of each attempt's lease (D4, issue 15), as a sans-io state machine: an attempt whose lease
// the agent could not renew for `ttl - margin` must be stopped before the control plane re-queues it, so that
// two copies of a job never run at once. A lease counts as renewed, from the moment the request left, when a
// poll or registration that listed it got a successful reply (the server renews what a request lists, and holds
// it while a poll is held).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/lifecycle.hpp"

namespace nymph::agent {

class LeaseClock {
 public:
  // How much earlier than the server the agent gives a lease up: max(5 s, ttl / 6).
  static std::chrono::milliseconds margin(std::chrono::milliseconds ttl);
  // How long the agent may go without renewing a lease of `ttl`: ttl - margin(ttl), at least 0.
  static std::chrono::milliseconds window(std::chrono::milliseconds ttl);

  // Starts the clock of `job_id`'s lease (`ttl` long) at `now` (its assignment renewed it). Replaces a previous one.
  // The clock keeps a view of `job_id`, not a copy (a manager tracks ten thousand leases): the characters must stay
  // where they are until forget() or expired() lets the lease go (the daemon passes its attempt's own job id).
  void track(std::string_view job_id, std::chrono::milliseconds ttl, Clock::time_point now);
  // A poll or registration that listed `job_id` and was sent at `sent` got a successful reply: the lease's clock
  // restarts at `sent` (never earlier than it already stands). Unknown ids are ignored.
  void renewed(std::string_view job_id, Clock::time_point sent);
  // Stops watching `job_id` (its run ended, or it was given up).
  void forget(std::string_view job_id);

  // The leases not renewed within their window at `now`, each returned once (and then forgotten).
  std::vector<std::string> expired(Clock::time_point now);
  // The earliest moment expired() returns something, or nullopt when nothing is tracked.
  std::optional<Clock::time_point> next_expiry() const;
  // The shortest window among the tracked leases (a held poll must end well within it), or nullopt.
  std::optional<std::chrono::milliseconds> shortest_window() const;

  // The window of `job_id`'s lease, when tracked.
  std::optional<std::chrono::milliseconds> window_of(std::string_view job_id) const;

 private:
  struct Lease {
    std::chrono::milliseconds ttl;
    Clock::time_point renewed;
    Clock::time_point expires() const { return renewed + window(ttl); }
  };
  std::map<std::string_view, Lease> leases_;  // keys view the ids passed to track()
};

}  // namespace nymph::agent
