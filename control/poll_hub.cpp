#include "control/poll_hub.hpp"

namespace nymph::control {

void PollHub::notify(Waiter& w, Why why) {
  w.why = why;
  if (w.on_wake) w.on_wake();
}

void PollHub::wake(Waiter& w, Why why) {
  parked_.erase(w.worker_id);
  notify(w, why);
}

void PollHub::park(Waiter& w) {
  auto it = parked_.find(w.worker_id);
  if (it != parked_.end() && it->second != &w) wake(*it->second, Why::superseded);
  w.why = Why::none;
  parked_[w.worker_id] = &w;
}

void PollHub::unpark(Waiter& w) {
  auto it = parked_.find(w.worker_id);
  if (it != parked_.end() && it->second == &w) parked_.erase(it);
  std::erase_if(claimed_, [&](const auto& kv) { return kv.second == &w; });
}

namespace {
PollHub::Waiter* claimed_of_worker(const std::unordered_map<std::uint64_t, PollHub::Waiter*>& claimed,
                                   const std::string& worker_id) {
  for (const auto& [_, w] : claimed)
    if (w->worker_id == worker_id) return w;
  return nullptr;
}
}  // namespace

bool PollHub::wake_worker(const std::string& worker_id) {
  if (auto it = parked_.find(worker_id); it != parked_.end()) {
    wake(*it->second, Why::woken);
    return true;
  }
  if (Waiter* w = claimed_of_worker(claimed_, worker_id)) {
    w->rewake = true;
    return true;
  }
  return false;
}

bool PollHub::slot_freed(const std::string& worker_id, const std::string& runner) {
  if (auto it = parked_.find(worker_id); it != parked_.end()) {
    ++it->second->request.free[runner];
    wake(*it->second, Why::woken);
    return true;
  }
  if (Waiter* w = claimed_of_worker(claimed_, worker_id)) {
    ++w->freed_while_claimed[runner];
    w->rewake = true;
    return true;
  }
  return false;
}

bool PollHub::slot_freed_quietly(const std::string& worker_id, const std::string& runner) {
  if (auto it = parked_.find(worker_id); it != parked_.end()) {
    ++it->second->request.free[runner];
    return true;
  }
  return slot_freed(worker_id, runner);  // claimed, or none
}

PollHub::Waiter* PollHub::find_one_for(const JobNeeds& needs, std::chrono::system_clock::time_point now) {
  if (needs.runner == kAutoRunner) {
    // An unpinned training job goes to a Slurm worker when one can take it: such a worker first.
    JobNeeds on_slurm = needs;
    on_slurm.runner = "slurm";
    if (Waiter* w = find_one_for(on_slurm, now)) return w;
  }
  // A Slurm job survives its worker; any other runs on process and is placed by the worker's end.
  const bool placed = needs.runner != "slurm";
  Waiter* best = nullptr;
  for (auto& [_, w] : parked_) {
    if (!w->accepts_jobs || !can_take_now(w->caps, w->request.free, needs)) continue;
    if (!placed) return w;
    if (!fits_before_end(needs.timeout_s, w->caps.serves_until, now, std::nullopt)) continue;
    if (!best || w->caps.serves_until > best->caps.serves_until) best = w;
  }
  return best;
}

bool PollHub::wake_one_for(const JobNeeds& needs, std::chrono::system_clock::time_point now) {
  Waiter* w = find_one_for(needs, now);
  if (w) wake(*w, Why::woken);
  return w != nullptr;
}

PollHub::Claim PollHub::claim(Waiter& w) {
  parked_.erase(w.worker_id);
  w.why = Why::claimed;
  std::uint64_t ticket = next_ticket_++;
  claimed_[ticket] = &w;
  return Claim{w.worker_id, ticket, w.request};
}

std::optional<PollHub::Claim> PollHub::claim_one_for(const JobNeeds& needs, std::chrono::system_clock::time_point now) {
  Waiter* w = find_one_for(needs, now);
  if (!w) return std::nullopt;
  return claim(*w);
}

std::optional<PollHub::Claim> PollHub::claim_worker(const std::string& worker_id) {
  auto it = parked_.find(worker_id);
  if (it == parked_.end() || !it->second->accepts_jobs) return std::nullopt;
  return claim(*it->second);
}

namespace {
void count_in(std::map<std::string, int>& free, std::map<std::string, int>& freed) {
  for (const auto& [runner, n] : freed) free[runner] += n;
  freed.clear();
}
}  // namespace

bool PollHub::hand(const Claim& c, PollOutcome outcome, protocol::PollRequest asked) {
  auto it = claimed_.find(c.ticket);
  if (it == claimed_.end()) return false;
  Waiter& w = *it->second;
  claimed_.erase(it);
  w.request = std::move(asked);
  count_in(w.request.free, w.freed_while_claimed);
  w.handed = std::move(outcome);
  notify(w, Why::handed);
  return true;
}

void PollHub::release(const Claim& c) {
  auto it = claimed_.find(c.ticket);
  if (it == claimed_.end()) return;
  Waiter& w = *it->second;
  claimed_.erase(it);
  count_in(w.request.free, w.freed_while_claimed);
  if (parked_.contains(w.worker_id)) {
    notify(w, Why::superseded);  // a newer poll of the worker parked meanwhile
  } else if (w.rewake) {
    notify(w, Why::woken);
  } else {
    w.why = Why::none;
    parked_[w.worker_id] = &w;
  }
}

void PollHub::wake_all_for_shutdown() {
  while (!parked_.empty()) wake(*parked_.begin()->second, Why::shutdown);
  for (auto& [_, w] : claimed_) w->rewake = true;
}

}  // namespace nymph::control
