#pragma once
// Held polls parked in memory, woken by the event that concerns them (a submit they can take, a cancel of one
// of their attempts, a directive, shutdown). No I/O: a waiter is woken through its callback.
//
// A parked poll can also be *claimed* by an operation that computes its outcome in its own transaction (a
// submission that leases the new job to an idle poll, a final event whose freed slot takes the next queued
// job): the claimed poll waits for that outcome (hand) or goes back to waiting (release), so one commit
// covers both the operation and the lease instead of one commit each.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "control/poll_outcome.hpp"
#include "control/policy.hpp"
#include "protocol/protocol.hpp"

namespace nymph::control {

class PollHub {
 public:
  // Why a waiter stopped waiting. `claimed` is not an end: the waiter goes on waiting for hand() or release().
  enum class Why { none, woken, superseded, shutdown, claimed, handed };

  // One parked poll. Owned by the poll's coroutine; parked between park() and unpark()/a wake.
  struct Waiter {
    std::string worker_id;
    WorkerCaps caps;
    protocol::PollRequest request;     // what the poll asked; free slots counted up by slot_freed
    bool accepts_jobs = true;          // false while draining or under a directive
    std::function<void()> on_wake;     // called once per wake (woken, superseded, shutdown, handed)
    Why why = Why::none;               // set when woken or claimed
    std::optional<PollOutcome> handed; // Why::handed: the outcome an operation computed for this poll
    bool rewake = false;               // something concerned the worker while claimed: the poll must look again
    std::map<std::string, int> freed_while_claimed;  // slot_freed while claimed, counted in at hand/release
  };

  // A claimed poll, as the claiming operation sees it: whose it is and what it asked.
  struct Claim {
    std::string worker_id;
    std::uint64_t ticket = 0;
    protocol::PollRequest request;
  };

  // Parks `w`. Another parked waiter of the same worker is woken first with Why::superseded.
  void park(Waiter& w);
  // Removes `w` if it is still parked or claimed. Never fails.
  void unpark(Waiter& w);
  // Wakes the parked poll of `worker_id` (a claimed one looks again once handed or released). Returns false
  // when it has none.
  bool wake_worker(const std::string& worker_id);
  // Wakes one parked poll that can take a job with `needs` at `now` (runner, tags, profile, a free slot; a
  // process job only where it fits before the worker's end, fits_before_end, and of those the one that serves
  // longest). Returns false when none can.
  bool wake_one_for(const JobNeeds& needs, std::chrono::system_clock::time_point now);
  // Claims the parked poll that wake_one_for would wake, instead of waking it. nullopt when none can take it.
  std::optional<Claim> claim_one_for(const JobNeeds& needs, std::chrono::system_clock::time_point now);
  // Claims the parked poll of `worker_id` if it accepts jobs (a final event of one of its attempts is about to
  // free a slot). nullopt when it has none.
  std::optional<Claim> claim_worker(const std::string& worker_id);
  // Gives the claimed poll the outcome computed for it from `asked` (its request, free slots as the operation
  // counted them) and wakes it with Why::handed. False when the poll went away meanwhile (its client closed the
  // connection): the outcome is nobody's.
  bool hand(const Claim& c, PollOutcome outcome, protocol::PollRequest asked);
  // Returns a claimed poll to waiting, as if never claimed (woken when something concerned it meanwhile).
  // No-op when it went away.
  void release(const Claim& c);
  // An attempt of `worker_id` on `runner` ended, so its held poll has one more free slot than it reported.
  // Counts the slot on the parked poll (if any) and wakes it, so it can take queued work at once instead of
  // after its timeout. Returns false when the worker has no parked poll.
  bool slot_freed(const std::string& worker_id, const std::string& runner);
  // As slot_freed, but a parked poll is not woken: for a slot whose own transaction already looked for a queued
  // job the worker could take and found none (takeNext). A submission committed after that transaction finds
  // the slot when it claims or wakes a poll, so waking this one would only read the queue again.
  bool slot_freed_quietly(const std::string& worker_id, const std::string& runner);
  // Wakes every parked poll with Why::shutdown (claimed ones end once handed or released).
  void wake_all_for_shutdown();
  // Parked polls now, claimed ones included.
  std::size_t size() const { return parked_.size() + claimed_.size(); }

 private:
  // Sets why and calls on_wake; wake() also removes the waiter from the parked ones.
  void notify(Waiter& w, Why why);
  void wake(Waiter& w, Why why);
  // The parked poll that can take a job with `needs` at `now` (slurm workers first for an "auto" job; see
  // wake_one_for), or null.
  Waiter* find_one_for(const JobNeeds& needs, std::chrono::system_clock::time_point now);
  Claim claim(Waiter& w);

  std::unordered_map<std::string, Waiter*> parked_;
  std::unordered_map<std::uint64_t, Waiter*> claimed_;
  std::uint64_t next_ticket_ = 1;
};

}  // namespace nymph::control
