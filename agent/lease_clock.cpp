#include "agent/lease_clock.hpp"

#include <algorithm>

namespace nymph::agent {

using std::chrono::milliseconds;

milliseconds LeaseClock::margin_for(milliseconds ttl) {
  return std::max<milliseconds>(std::chrono::seconds(5), ttl / 6);
}

milliseconds LeaseClock::window_for(milliseconds ttl) { return std::max(milliseconds(0), ttl - margin_for(ttl)); }

void LeaseClock::start(milliseconds ttl, Clock::time_point now) {
  window_ = window_for(ttl);
  renewed_ = now;
}

void LeaseClock::renewed(Clock::time_point sent) {
  if (running()) renewed_ = std::max(renewed_, sent);
}

std::optional<Clock::time_point> LeaseClock::expiry() const {
  if (!running()) return std::nullopt;
  return renewed_ + window_;
}

}  // namespace nymph::agent
