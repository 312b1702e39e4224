#include "control/poll_hub.hpp"

namespace nymph::control {

void PollHub::wake(Waiter& w, Why why) {
  parked_.erase(w.worker_id);
  w.why = why;
  if (w.on_wake) w.on_wake();
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
}

bool PollHub::wake_worker(const std::string& worker_id) {
  auto it = parked_.find(worker_id);
  if (it == parked_.end()) return false;
  wake(*it->second, Why::woken);
  return true;
}

bool PollHub::slot_freed(const std::string& worker_id, const std::string& runner) {
  auto it = parked_.find(worker_id);
  if (it == parked_.end()) return false;
  ++it->second->free[runner];
  wake(*it->second, Why::woken);
  return true;
}

bool PollHub::wake_one_for(const JobNeeds& needs) {
  if (needs.runner == kAutoRunner) {
    // An unpinned training job goes to a Slurm worker when one can take it: wake such a worker first.
    JobNeeds on_slurm = needs;
    on_slurm.runner = "slurm";
    if (wake_one_for(on_slurm)) return true;
  }
  for (auto& [_, w] : parked_) {
    if (w->accepts_jobs && can_take_now(w->caps, w->free, needs)) {
      wake(*w, Why::woken);
      return true;
    }
  }
  return false;
}

void PollHub::wake_all_for_shutdown() {
  while (!parked_.empty()) wake(*parked_.begin()->second, Why::shutdown);
}

}  // namespace nymph::control
