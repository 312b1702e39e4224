#include "runners/slurm/poll_pacer.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <boost/algorithm/string/predicate.hpp>

namespace nymph::runners::slurm {

namespace {

// True when `text` contains one of `signs`, ignoring case.
template <std::size_t N>
bool says_any(std::string_view text, const std::array<std::string_view, N>& signs) {
  return std::any_of(signs.begin(), signs.end(),
                     [&](std::string_view s) { return boost::algorithm::icontains(text, s); });
}

}  // namespace

PollPacer::PollPacer(PollPacerConfig config)
    : config_(config), interval_(config.quick), random_(config.seed) {
  config_.ceiling = std::max(config_.ceiling, config_.quick);
  config_.rpc_budget_per_minute = std::max(config_.rpc_budget_per_minute, 0);
  config_.jitter = std::clamp(config_.jitter, 0.0, 0.9);
  bucket_capacity_ = std::max(1.0, config_.rpc_budget_per_minute / 2.0);
  tokens_ = bucket_capacity_;
}

std::chrono::milliseconds PollPacer::jittered(std::chrono::milliseconds d) {
  std::uniform_real_distribution<double> factor(1.0 - config_.jitter, 1.0 + config_.jitter);
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(d.count()) * factor(random_)));
}

void PollPacer::hurry(PacerClock::time_point now) {
  interval_ = config_.quick;
  due_within(now, config_.quick);
}

void PollPacer::due_within(PacerClock::time_point now, std::chrono::milliseconds within) {
  if (failures_ > 0) return;
  next_cycle_ = std::min(next_cycle_, now + within);
}

void PollPacer::cycle_done(PacerClock::time_point now, CycleOutcome outcome, std::string trouble,
                           std::optional<std::chrono::milliseconds> until_expected_end) {
  if (outcome == CycleOutcome::controller_trouble) {
    ++failures_;
    trouble_ = std::move(trouble);
    // Jitter from half the backoff up to all of it: many managers backed off together do not come back together.
    std::uniform_real_distribution<double> share(0.5, 1.0);
    next_cycle_ = now + controller_backoff(failures_, config_.quick, share(random_));
    return;
  }
  failures_ = 0;
  trouble_.clear();
  interval_ = outcome == CycleOutcome::changed ? config_.quick : std::min(interval_ * 2, config_.ceiling);
  auto wait = jittered(interval_);
  // A job about to reach its time limit ends then: look soon after (Slurm needs a moment to end it).
  if (until_expected_end && *until_expected_end + config_.quick / 2 < wait)
    wait = std::max(*until_expected_end + config_.quick / 2, config_.quick / 2);
  next_cycle_ = now + wait;
}

void PollPacer::forget_before(PacerClock::time_point now) {
  while (!spent_.empty() && spent_.front() + config_.rpc_window <= now) spent_.pop_front();
}

void PollPacer::refill(PacerClock::time_point now) {
  if (refilled_at_ && now <= *refilled_at_) return;
  if (refilled_at_) {
    const std::chrono::duration<double> elapsed = now - *refilled_at_;
    const std::chrono::duration<double> window = config_.rpc_window;
    tokens_ = std::min(bucket_capacity_, tokens_ + bucket_capacity_ * (elapsed / window));
  }
  refilled_at_ = now;
}

std::chrono::milliseconds PollPacer::bucket_delay(double rpcs) const {
  // A count larger than the bucket waits for it to be full.
  const double missing = std::min(rpcs, bucket_capacity_) - tokens_;
  if (missing <= 1e-9) return std::chrono::milliseconds(0);
  const std::chrono::duration<double, std::milli> refill_time =
      std::chrono::duration<double, std::milli>(config_.rpc_window) * (missing / bucket_capacity_);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(refill_time.count())));
}

std::chrono::milliseconds PollPacer::rpc_delay(PacerClock::time_point now, int rpcs) {
  if (config_.rpc_budget_per_minute == 0) return std::chrono::milliseconds(0);
  forget_before(now);
  refill(now);
  const auto budget = static_cast<std::size_t>(config_.rpc_budget_per_minute);
  const auto want = static_cast<std::size_t>(std::clamp(rpcs, 0, config_.rpc_budget_per_minute));
  const std::chrono::milliseconds bucket_wait = bucket_delay(static_cast<double>(want));
  if (spent_.size() + want <= budget) return bucket_wait;
  // The oldest entries must leave the window first: the one whose departure makes room is the last to wait for.
  const auto& frees_room = spent_[spent_.size() + want - budget - 1];
  return std::max(bucket_wait, std::chrono::ceil<std::chrono::milliseconds>(frees_room + config_.rpc_window - now));
}

void PollPacer::spend(PacerClock::time_point now, int rpcs) {
  if (config_.rpc_budget_per_minute == 0) return;  // nothing to count against
  forget_before(now);
  refill(now);
  // A call larger than the bucket leaves it in debt, at most a bucket's worth: the next call then waits about a
  // window, as the window alone would make it (a scancel of thousands of ids must not stop the cycles for hours).
  tokens_ = std::max(tokens_ - rpcs, -bucket_capacity_);
  for (int i = 0; i < rpcs; ++i) spent_.push_back(now);
}

int PollPacer::rpcs_in_window(PacerClock::time_point now) {
  forget_before(now);
  return static_cast<int>(spent_.size());
}

std::chrono::milliseconds controller_backoff(int failures, std::chrono::milliseconds base, double share) {
  auto full = base * (std::int64_t{1} << std::clamp(failures - 1, 0, 20));
  full = std::min<std::chrono::milliseconds>(full, std::max(kMaxControllerBackoff, base));
  const double scaled = static_cast<double>(full.count()) * std::clamp(share, 0.5, 1.0);
  return std::chrono::milliseconds(static_cast<std::int64_t>(scaled));
}

bool is_controller_trouble(std::string_view text) {
  // Not "slurm_load_jobs error" alone: squeue says that too when every id it was asked about is gone.
  static constexpr std::array<std::string_view, 8> kSigns = {
      "rate limit",         "socket timed out",       "unable to contact slurm controller",
      "connection refused", "did not finish within",  "communications backoff",
      "slurmctld not responding", "resource temporarily unavailable"};
  return says_any(text, kSigns);
}

bool is_submission_refused(std::string_view err) {
  static constexpr std::array<std::string_view, 3> kRefusals = {"rate limit", "unable to contact slurm controller",
                                                                "connection refused"};
  return says_any(err, kRefusals);
}

}  // namespace nymph::runners::slurm
