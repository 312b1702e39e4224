#include "control/policy.hpp"

#include <algorithm>

namespace nymph::control {

JobNeeds needs_of(const protocol::JobSubmission& sub) {
  std::optional<std::string> profile;
  if (sub.kind == "training" && sub.spec.payload) profile = sub.spec.payload->profile;
  const bool unpinned = sub.runner.empty() || sub.runner == kAutoRunner;
  std::string runner = !unpinned ? sub.runner : sub.kind == "training" ? std::string(kAutoRunner) : "process";
  return JobNeeds{std::move(runner), sub.required_tags, std::move(profile), sub.spec.timeout_s};
}

using protocol::AttemptState;
using protocol::EventState;
using protocol::JobState;

namespace {
bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}
}  // namespace

bool can_take(const WorkerCaps& caps, const JobNeeds& needs) {
  if (needs.runner == kAutoRunner) {
    JobNeeds on = needs;
    for (const char* r : {"slurm", "process"})
      if (on.runner = r; can_take(caps, on)) return true;
    return false;
  }
  if (!contains(caps.runners, needs.runner)) return false;
  for (const auto& [k, v] : needs.required_tags) {
    auto it = caps.tags.find(k);
    if (it == caps.tags.end() || it->second != v) return false;
  }
  return !needs.profile || contains(caps.profiles, *needs.profile);
}

bool can_take_now(const WorkerCaps& caps, const std::map<std::string, int>& free, const JobNeeds& needs) {
  if (needs.runner == kAutoRunner) {
    JobNeeds on = needs;
    for (const char* r : {"slurm", "process"})
      if (on.runner = r; can_take_now(caps, free, on)) return true;
    return false;
  }
  auto it = free.find(needs.runner);
  return it != free.end() && it->second > 0 && can_take(caps, needs);
}

std::optional<std::string> choose_runner(const WorkerCaps& caps, const std::map<std::string, int>& free,
                                         const JobNeeds& needs, bool slurm_elsewhere) {
  JobNeeds on = needs;
  on.runner = "slurm";
  if (can_take(caps, on)) return can_take_now(caps, free, on) ? std::optional<std::string>("slurm") : std::nullopt;
  if (slurm_elsewhere) return std::nullopt;
  on.runner = "process";
  return can_take_now(caps, free, on) ? std::optional<std::string>("process") : std::nullopt;
}

std::chrono::system_clock::time_point serves_until(const std::optional<protocol::SlurmAllocation>& a) {
  using Time = std::chrono::system_clock::time_point;
  if (!a || !a->end_time) return Time::max();
  auto end = protocol::parse_time(*a->end_time);
  if (!end) return Time::max();
  return *end - std::chrono::seconds(a->lead_s.value_or(protocol::kDefaultWalltimeLeadS));
}

bool fits_before_end(std::optional<double> timeout_s, std::chrono::system_clock::time_point until,
                     std::chrono::system_clock::time_point now,
                     std::optional<std::chrono::system_clock::time_point> longest_elsewhere) {
  if (until == std::chrono::system_clock::time_point::max()) return true;
  if (now >= until) return false;
  if (timeout_s) return std::chrono::duration<double>(until - now).count() >= *timeout_s;
  return !longest_elsewhere || *longest_elsewhere <= until;
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

Liveness::Clocks::Entry& Liveness::Clocks::entry(const std::string& id, std::optional<Duration> ttl) {
  auto [it, fresh] = entries_.try_emplace(id);
  if (ttl)
    it->second.ttl = *ttl;
  else if (fresh)
    it->second.ttl = default_ttl_;
  return it->second;
}

void Liveness::Clocks::hold(const std::string& id, std::optional<Duration> ttl) {
  Entry& e = entry(id, ttl);
  ++e.holds;
  set_deadline(id, e, std::nullopt);
}

void Liveness::Clocks::release(const std::string& id, TimePoint now) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;  // forgotten meanwhile
  Entry& e = it->second;
  if (e.holds > 0) --e.holds;
  if (e.holds == 0) set_deadline(id, e, now + e.ttl);
}

void Liveness::Clocks::touch(const std::string& id, TimePoint now, std::optional<Duration> ttl) {
  Entry& e = entry(id, ttl);
  if (e.holds == 0) set_deadline(id, e, now + e.ttl);
}

void Liveness::Clocks::forget(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  set_deadline(id, it->second, std::nullopt);
  entries_.erase(it);
}

std::vector<std::pair<std::string, Liveness::Duration>> Liveness::Clocks::take(TimePoint now) {
  std::vector<std::pair<std::string, Duration>> out;
  while (!order_.empty() && order_.begin()->first <= now) {
    std::string id = order_.begin()->second;
    order_.erase(order_.begin());
    auto it = entries_.find(id);
    Duration ttl = it->second.ttl;
    entries_.erase(it);
    out.emplace_back(std::move(id), ttl);
  }
  return out;
}

std::optional<Liveness::TimePoint> Liveness::Clocks::earliest() const {
  if (order_.empty()) return std::nullopt;
  return order_.begin()->first;
}

std::optional<Liveness::Duration> Liveness::ttl_of(const std::string& runner) const {
  if (runner.empty()) return std::nullopt;
  return lease_ttl(runner);
}

Liveness::Duration Liveness::lease_ttl(const std::string& runner) const {
  auto it = runner_lease_ttl_.find(runner);
  return it == runner_lease_ttl_.end() ? lease_ttl_ : it->second;
}

void Liveness::worker_hold(const std::string& w) { workers_.hold(w, std::nullopt); }
void Liveness::worker_release(const std::string& w, TimePoint now) { workers_.release(w, now); }
void Liveness::worker_seen(const std::string& w, TimePoint now) { workers_.touch(w, now, std::nullopt); }
void Liveness::worker_forget(const std::string& w) { workers_.forget(w); }
void Liveness::lease_hold(const std::string& l, const std::string& runner) { leases_.hold(l, ttl_of(runner)); }
void Liveness::lease_release(const std::string& l, TimePoint now) { leases_.release(l, now); }
void Liveness::lease_renewed(const std::string& l, TimePoint now, const std::string& runner) {
  leases_.touch(l, now, ttl_of(runner));
}
void Liveness::lease_forget(const std::string& l) { leases_.forget(l); }

std::optional<Liveness::TimePoint> Liveness::next_deadline() const {
  auto w = workers_.earliest();
  auto l = leases_.earliest();
  if (!w) return l;
  if (!l) return w;
  return std::min(*w, *l);
}

Liveness::Expired Liveness::take_expired(TimePoint now) {
  Expired out;
  for (auto& [id, ttl] : workers_.take(now)) out.stale_workers.push_back(std::move(id));
  for (auto& [id, ttl] : leases_.take(now)) {
    out.lost_leases.push_back(std::move(id));
    out.lost_lease_ttls.push_back(ttl);
  }
  return out;
}

}  // namespace nymph::control
