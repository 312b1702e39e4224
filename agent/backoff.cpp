#include "agent/backoff.hpp"

#include <algorithm>

namespace nymph::agent {

Backoff::Backoff(Config config, std::uint64_t seed) : config_(config), rng_(seed) {}

std::chrono::milliseconds Backoff::current_cap() const {
  // initial * 2^failures, saturating at max (shift bounded to avoid overflow).
  auto shift = std::min(failures_, 30);
  auto cap = config_.initial.count() * (std::int64_t{1} << shift);
  return std::chrono::milliseconds(std::min<std::int64_t>(cap, config_.max.count()));
}

std::chrono::milliseconds Backoff::next_delay() {
  auto cap = current_cap();
  ++failures_;
  std::uniform_int_distribution<std::int64_t> pick(0, cap.count());
  return std::chrono::milliseconds(pick(rng_));
}

}  // namespace nymph::agent
