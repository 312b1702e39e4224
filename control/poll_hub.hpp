#pragma once
// Held polls parked in memory, woken by the event that concerns them (a submit they can take, a cancel of one
// of their attempts, a directive, shutdown). No I/O: a waiter is woken through its callback.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>

#include "control/policy.hpp"

namespace nymph::control {

class PollHub {
 public:
  enum class Why { none, woken, superseded, shutdown };

  // One parked poll. Owned by the poll's coroutine; parked between park() and unpark()/a wake.
  struct Waiter {
    std::string worker_id;
    WorkerCaps caps;
    std::map<std::string, int> free;   // free slots the poll reported
    bool accepts_jobs = true;          // false while draining or under a directive
    std::function<void()> on_wake;     // called once, when woken (e.g. cancels the poll's timer)
    Why why = Why::none;               // set when woken
  };

  // Parks `w`. Another waiter of the same worker is woken first with Why::superseded.
  void park(Waiter& w);
  // Removes `w` if it is still parked. Never fails.
  void unpark(Waiter& w);
  // Wakes the parked poll of `worker_id`. Returns false when it has none.
  bool wake_worker(const std::string& worker_id);
  // Wakes one parked poll that can take a job with `needs` now (runner, tags, profile, a free slot).
  // Returns false when none can.
  bool wake_one_for(const JobNeeds& needs);
  // An attempt of `worker_id` on `runner` ended, so its held poll has one more free slot than it reported.
  // Counts the slot on the parked poll (if any) and wakes it, so it can take queued work at once instead of
  // after its timeout. Returns false when the worker has no parked poll.
  bool slot_freed(const std::string& worker_id, const std::string& runner);
  // Wakes every parked poll with Why::shutdown.
  void wake_all_for_shutdown();
  // Parked polls now.
  std::size_t size() const { return parked_.size(); }

 private:
  void wake(Waiter& w, Why why);
  std::unordered_map<std::string, Waiter*> parked_;
};

}  // namespace nymph::control
