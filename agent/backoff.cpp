#include "agent/backoff.hpp"

#include <algorithm>

namespace nymph::agent {

Backoff::Backoff(Config config, std::optional<std::uint64_t> seed) : config_(config), seed_(seed) {}

std::chrono::milliseconds Backoff::current_cap() const {
  // initial * 2^failures, saturating at max (shift bounded to avoid overflow).
  auto shift = std::min(failures_, 30);
  auto cap = config_.initial.count() * (std::int64_t{1} << shift);
  return std::chrono::milliseconds(std::min<std::int64_t>(cap, config_.max.count()));
}

std::chrono::milliseconds Backoff::next_delay() {
  if (!seeded_) {
    // seed_seq spreads the 64 bits over the engine's state, so neighbouring seeds draw unrelated jitter.
    std::uint64_t s = 0;
    if (seed_) {
      s = *seed_;
    } else {
      std::random_device device;
      s = (std::uint64_t{device()} << 32) | device();
    }
    std::seed_seq seq{static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(s >> 32)};
    rng_.seed(seq);
    seeded_ = true;
  }
  auto cap = current_cap();
  ++failures_;
  std::uniform_int_distribution<std::int64_t> pick(0, cap.count());
  return std::chrono::milliseconds(pick(rng_));
}

}  // namespace nymph::agent
