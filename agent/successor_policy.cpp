#include "agent/successor_policy.hpp"

#include <algorithm>

namespace nymph::agent {

namespace {

using std::chrono::milliseconds;

// Twice the longest of the last three measured queue waits, within [floor, ceiling].
milliseconds lead_from_waits(const SuccessorConfig& c, const std::vector<std::chrono::seconds>& waits) {
  milliseconds longest{0};
  auto from = waits.size() > 3 ? waits.end() - 3 : waits.begin();
  for (auto it = from; it != waits.end(); ++it) longest = std::max<milliseconds>(longest, *it);
  return std::clamp<milliseconds>(2 * longest, c.floor, std::max(c.floor, c.ceiling));
}

}  // namespace

std::string_view to_string(ChainPhase p) {
  switch (p) {
    case ChainPhase::waiting:
      return "waiting";
    case ChainPhase::due:
      return "due";
    case ChainPhase::retrying:
      return "retrying";
    case ChainPhase::submitted:
      return "submitted";
    case ChainPhase::paused:
      return "paused";
    case ChainPhase::ended:
      return "ended";
    case ChainPhase::manager:
      return "manager";
  }
  return "waiting";
}

SuccessorPolicy::SuccessorPolicy(SuccessorConfig config, int generation, Clock::time_point started,
                                 Clock::time_point serving_end, std::vector<std::chrono::seconds> queue_waits)
    : config_(std::move(config)),
      generation_(generation),
      lead_(std::min<milliseconds>(
          lead_from_waits(config_, queue_waits),
          std::chrono::duration_cast<milliseconds>(std::max(serving_end - started, Clock::duration::zero()) / 2))),
      submit_at_(serving_end - lead_) {
  if (config_.max_generations > 0 && generation_ >= config_.max_generations)
    end("generation " + std::to_string(generation_) +
        " is the last of max_generations = " + std::to_string(config_.max_generations));
}

void SuccessorPolicy::end(std::string why) {
  phase_ = ChainPhase::ended;
  reason_ = std::move(why);
}

ChainPhase SuccessorPolicy::advance(Clock::time_point now, std::optional<Clock::time_point> idle_since,
                                    bool stop_requested, bool draining_for_walltime) {
  if (phase_ == ChainPhase::submitted || phase_ == ChainPhase::paused || phase_ == ChainPhase::ended ||
      phase_ == ChainPhase::manager)
    return phase_;
  if (stop_requested) {
    end("the launch was stopped");
    return phase_;
  }
  const bool time_came = phase_ == ChainPhase::retrying ? now >= retry_at_ : now >= submit_at_ || draining_for_walltime;
  if (phase_ == ChainPhase::due || !time_came) return phase_;
  if (generation_ >= config_.min_generations && idle_since && now - *idle_since >= config_.idle_end) {
    auto idle_s = std::chrono::duration_cast<std::chrono::seconds>(now - *idle_since).count();
    end("no work for " + std::to_string(idle_s) +
        " s (idle_end), past min_generations = " + std::to_string(config_.min_generations));
    return phase_;
  }
  phase_ = ChainPhase::due;
  return phase_;
}

void SuccessorPolicy::hand_over(std::string why) {
  if (phase_ == ChainPhase::ended) return;
  phase_ = ChainPhase::manager;
  reason_ = std::move(why);
}

void SuccessorPolicy::submission_succeeded() {
  if (phase_ != ChainPhase::due) return;
  phase_ = ChainPhase::submitted;
  failures_ = 0;
  reason_.clear();
}

void SuccessorPolicy::submission_failed(Clock::time_point now, std::string error) {
  if (phase_ != ChainPhase::due) return;
  ++failures_;
  if (failures_ >= config_.pause_after) {
    phase_ = ChainPhase::paused;
    reason_ = "the successor could not be submitted " + std::to_string(failures_) + " times in a row: " + error;
    return;
  }
  const auto& steps = config_.backoff;
  milliseconds wait = steps.empty()
                          ? std::chrono::minutes(1)
                          : steps[std::min<std::size_t>(static_cast<std::size_t>(failures_ - 1), steps.size() - 1)];
  phase_ = ChainPhase::retrying;
  retry_at_ = now + wait;
  reason_ = std::move(error);
}

std::optional<SuccessorPolicy::Clock::time_point> SuccessorPolicy::next_deadline() const {
  if (phase_ == ChainPhase::waiting) return submit_at_;
  if (phase_ == ChainPhase::retrying) return retry_at_;
  return std::nullopt;
}

}  // namespace nymph::agent
