#pragma once
// Retry policy for talking to the control plane: exponential backoff with full jitter.
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

namespace nymph::agent {

// Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"): the n-th
// consecutive failure waits a uniformly random time in [0, min(max, initial * 2^n)]. Sans-io: it only computes
// delays; the caller owns the timer. Deterministic for a given seed. The default cap is 5 s (A4, issue 15): after
// an outage an agent is back within 0-5 s of the control plane's return, and many agents spread over that window.
//
// Small and cheap to make: every attempt's delivery keeps one for the attempt's whole life (ten thousand tracked
// Slurm jobs keep ten thousand), and most never see a failure. The random engine is a few bytes (not a
// 2.5 KiB Mersenne twister), seeded at the first failure, not at construction.
class Backoff {
 public:
  struct Config {
    std::chrono::milliseconds initial{500};
    std::chrono::milliseconds max{5'000};
  };

  // `seed`: the jitter's seed (tests); without one, std::random_device gives it at the first failure.
  explicit Backoff(Config config, std::optional<std::uint64_t> seed = std::nullopt);

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
  std::optional<std::uint64_t> seed_;  // until the engine is seeded
  std::minstd_rand rng_;
  bool seeded_ = false;
  int failures_ = 0;
};

}  // namespace nymph::agent
