#pragma once
// Retry policy for talking to the control plane: exponential backoff with full jitter.
#include <chrono>
#include <cstdint>
#include <random>

namespace nymph::agent {

// Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"): the n-th
// consecutive failure waits a uniformly random time in [0, min(max, initial * 2^n)]. Sans-io: it only computes
// delays; the caller owns the timer. Deterministic for a given seed. The default cap is 5 s (A4, issue 15): after
// an outage an agent is back within 0-5 s of the control plane's return, and many agents spread over that window.
class Backoff {
 public:
  struct Config {
    std::chrono::milliseconds initial{500};
    std::chrono::milliseconds max{5'000};
  };

  explicit Backoff(Config config, std::uint64_t seed = std::random_device{}());

  // Records a failure and returns how long to wait before the next attempt.
  std::chrono::milliseconds next_delay();
  // The upper bound next_delay() would draw from now (for logs and tests).
  std::chrono::milliseconds current_cap() const;
  // Records a success: the next failure starts from `initial` again.
  void reset() { failures_ = 0; }
  // Consecutive failures since the last success.
  int failures() const { return failures_; }

 private:
  Config config_;
  std::mt19937_64 rng_;
  int failures_ = 0;
};

}  // namespace nymph::agent
