#include "control/policy.hpp"

#include <algorithm>

namespace nymph::control {

using protocol::AttemptState;
using protocol::EventState;
using protocol::JobState;

namespace {
bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}
}  // namespace

bool can_take(const WorkerCaps& caps, const JobNeeds& needs) {
  if (!contains(caps.runners, needs.runner)) return false;
  for (const auto& [k, v] : needs.required_tags) {
    auto it = caps.tags.find(k);
    if (it == caps.tags.end() || it->second != v) return false;
  }
  return !needs.profile || contains(caps.profiles, *needs.profile);
}

bool can_take_now(const WorkerCaps& caps, const std::map<std::string, int>& free, const JobNeeds& needs) {
  auto it = free.find(needs.runner);
  return it != free.end() && it->second > 0 && can_take(caps, needs);
}

JobState after_lost_attempt(int attempts_made, int max_attempts, bool cancel_requested) {
  if (cancel_requested) return JobState::cancelled;
  return attempts_made < max_attempts ? JobState::queued : JobState::lost;
}

bool lost_attempt_counts(std::optional<protocol::EventReason> reason, bool first_event, int uncounted_so_far) {
  return !(reason == protocol::EventReason::over_capacity && first_event && uncounted_so_far < kMaxUncountedAttempts);
}

JobState after_event(JobState current, EventState ev) {
  switch (ev) {
    case EventState::pending:
    case EventState::running: return current == JobState::cancelling ? JobState::cancelling : JobState::running;
    case EventState::succeeded: return JobState::succeeded;
    case EventState::failed: return JobState::failed;
    case EventState::cancelled: return JobState::cancelled;
    case EventState::lost: return JobState::lost;  // callers use after_lost_attempt instead
  }
  return current;
}

AttemptState attempt_state_of(EventState ev) {
  switch (ev) {
    case EventState::pending: return AttemptState::pending;
    case EventState::running: return AttemptState::running;
    case EventState::succeeded: return AttemptState::succeeded;
    case EventState::failed: return AttemptState::failed;
    case EventState::cancelled: return AttemptState::cancelled;
    case EventState::lost: return AttemptState::lost;
  }
  return AttemptState::lost;
}

void Liveness::Clocks::set_deadline(const std::string& id, Entry& e, std::optional<TimePoint> at) {
  if (e.deadline) order_.erase({*e.deadline, id});
  e.deadline = at;
  if (at) order_.emplace(*at, id);
}

void Liveness::Clocks::hold(const std::string& id) {
  Entry& e = entries_[id];
  ++e.holds;
  set_deadline(id, e, std::nullopt);
}

void Liveness::Clocks::release(const std::string& id, TimePoint at) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;  // forgotten meanwhile
  Entry& e = it->second;
  if (e.holds > 0) --e.holds;
  if (e.holds == 0) set_deadline(id, e, at);
}

void Liveness::Clocks::touch(const std::string& id, TimePoint at) {
  Entry& e = entries_[id];
  if (e.holds == 0) set_deadline(id, e, at);
}

void Liveness::Clocks::forget(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  set_deadline(id, it->second, std::nullopt);
  entries_.erase(it);
}

std::vector<std::string> Liveness::Clocks::take(TimePoint now) {
  std::vector<std::string> out;
  while (!order_.empty() && order_.begin()->first <= now) {
    std::string id = order_.begin()->second;
    order_.erase(order_.begin());
    entries_.erase(id);
    out.push_back(std::move(id));
  }
  return out;
}

std::optional<Liveness::TimePoint> Liveness::Clocks::earliest() const {
  if (order_.empty()) return std::nullopt;
  return order_.begin()->first;
}

void Liveness::worker_hold(const std::string& w) { workers_.hold(w); }
void Liveness::worker_release(const std::string& w, TimePoint now) { workers_.release(w, now + stale_after_); }
void Liveness::worker_seen(const std::string& w, TimePoint now) { workers_.touch(w, now + stale_after_); }
void Liveness::worker_forget(const std::string& w) { workers_.forget(w); }
void Liveness::lease_hold(const std::string& l) { leases_.hold(l); }
void Liveness::lease_release(const std::string& l, TimePoint now) { leases_.release(l, now + lease_ttl_); }
void Liveness::lease_renewed(const std::string& l, TimePoint now) { leases_.touch(l, now + lease_ttl_); }
void Liveness::lease_forget(const std::string& l) { leases_.forget(l); }

std::optional<Liveness::TimePoint> Liveness::next_deadline() const {
  auto w = workers_.earliest();
  auto l = leases_.earliest();
  if (!w) return l;
  if (!l) return w;
  return std::min(*w, *l);
}

Liveness::Expired Liveness::take_expired(TimePoint now) {
  return Expired{workers_.take(now), leases_.take(now)};
}

}  // namespace nymph::control
