#include "agent/lease_clock.hpp"

#include <algorithm>

namespace nymph::agent {

using std::chrono::milliseconds;

milliseconds LeaseClock::margin(milliseconds ttl) { return std::max<milliseconds>(std::chrono::seconds(5), ttl / 6); }

milliseconds LeaseClock::window(milliseconds ttl) { return std::max(milliseconds(0), ttl - margin(ttl)); }

void LeaseClock::track(std::string_view job_id, milliseconds ttl, Clock::time_point now) {
  leases_.erase(job_id);  // a replaced lease's key may view characters about to go: the new one views job_id
  leases_.emplace(job_id, Lease{ttl, now});
}

void LeaseClock::renewed(std::string_view job_id, Clock::time_point sent) {
  if (auto it = leases_.find(job_id); it != leases_.end()) it->second.renewed = std::max(it->second.renewed, sent);
}

void LeaseClock::forget(std::string_view job_id) { leases_.erase(job_id); }

std::vector<std::string> LeaseClock::expired(Clock::time_point now) {
  std::vector<std::string> out;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (now >= it->second.expires()) {
      out.emplace_back(it->first);
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<Clock::time_point> LeaseClock::next_expiry() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, l] : leases_)
    if (!next || l.expires() < *next) next = l.expires();
  return next;
}

std::optional<milliseconds> LeaseClock::shortest_window() const {
  std::optional<milliseconds> shortest;
  for (const auto& [id, l] : leases_)
    if (!shortest || window(l.ttl) < *shortest) shortest = window(l.ttl);
  return shortest;
}

std::optional<milliseconds> LeaseClock::window_of(std::string_view job_id) const {
  auto it = leases_.find(job_id);
  if (it == leases_.end()) return std::nullopt;
  return window(it->second.ttl);
}

}  // namespace nymph::agent
