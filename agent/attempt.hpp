#pragma once
// One attempt in the agent's hands, from the poll reply that assigned it (or the registration that adopted
// it) until its final event is acknowledged: what its runner produces waits in its outbox for the shipper.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include "agent/daemon.hpp"
#include "agent/lease_clock.hpp"
#include "common/notifier.hpp"
#include "agent/outbox.hpp"
#include "protocol/protocol.hpp"
#include "runners/runner.hpp"

namespace nymph::agent {

struct Attempt;

// Starts the delivery of an attempt that has something to send and no delivery running (the daemon). An attempt
// holds no delivery coroutine while nothing waits to be sent: a Slurm job tracked for days costs no frames for it.
class ShipperStarter {
 public:
  // Starts `a`'s delivery; `a` has no delivery running (shipper_active is false) and is not stopped.
  virtual void start_shipper(Attempt& a) = 0;

 protected:
  ~ShipperStarter() = default;
};

// Hands what a runner produces to the attempt's outbox, slowing the job down when the backlog is full.
class AttemptReporter final : public runners::JobReporter {
 public:
  // `attempt` owns this reporter; `bound` is the attempt's log backlog in bytes before output() suspends.
  AttemptReporter(Attempt& attempt, std::size_t bound) : attempt_(attempt), bound_(bound) {}
  // Queues a progress update; final updates (run()'s return value) and updates after a stop are dropped.
  void update(runners::JobUpdate u) override;
  // Queues output; suspends while the backlog exceeds the bound and the attempt is not stopped.
  boost::asio::awaitable<void> output(runners::Stream stream, std::uint64_t offset, std::string bytes) override;

 private:
  Attempt& attempt_;
  std::size_t bound_;
};

struct Attempt {
  // An attempt with an empty outbox whose uploads and backlog are bounded as `s` says; `starter` starts its
  // delivery when something is queued and none runs, and outlives the attempt.
  Attempt(const DaemonSettings& s, ShipperStarter& starter);
  std::string job_id, lease_id, runner_name;
  runners::Runner* runner = nullptr;  // null when the attempt was refused (unknown runner, no time left)
  // What the runner is to run, until its run() takes it (null from then on, and for an attempt left running).
  // By pointer: a manager keeps ten thousand Attempts, and the struct alone is a third of one.
  std::unique_ptr<runners::JobSpec> spec;
  // Set for an attempt a previous agent left running, until runner->resumable() takes it back.
  std::unique_ptr<runners::InFlightAttempt> left_running;
  AttemptOutbox outbox;
  Notifier wake;     // the shipper waits here for something to send
  Notifier drained;  // producers wait here for buffer space
  AttemptReporter reporter;
  ShipperStarter& shipper_starter;
  boost::asio::cancellation_signal cancel_upload;  // emitted when the agent gives up delivering (exit deadline)
  LeaseClock lease;  // D4: the agent's side of its lease, running while its run is active
  std::uint64_t offered_at_poll = 0;  // the daemon's poll count when its slot-offering final event was last sent
  // What the replies to its events handed over: jobs leased to the worker (takeNext), and whether the offered
  // slot, finding no job, was counted on the held poll instead (slot_held). Null while none (most attempts, and
  // a tracked Slurm job's all its life): a manager keeps ten thousand Attempts.
  std::unique_ptr<std::vector<protocol::JobAssignment>> handed;
  // The flags, together (a manager keeps ten thousand Attempts: no padding after each).
  bool adopted_pending = false;  // left running, waiting for the registration reply
  bool run_active = false;
  bool shipper_active = false;  // its delivery (the daemon's ship()) runs
  bool fenced = false;     // the control plane no longer accepts this lease
  bool detached = false;   // left running at a manager stop (survives_agent): nothing more is reported
  bool abandoned = false;  // the daemon is exiting and gave up delivering
  bool stopped_for_exit = false;  // stopped (or killed) by the agent because the worker is going away
  bool lease_expired = false;  // D4: stopped because its lease could not be renewed in time
  bool given_up = false;   // refused (over capacity) or stopped on lease expiry: reported lost, not running
  // Its run ended while the worker took jobs: its final event offers the slot for the next job (takeNext,
  // docs/protocol.md 8.3), and the slot counts as busy (in no poll) until that event is answered.
  bool offers_slot = false;
  bool slot_held = false;
  int number = 1;  // the attempt's number (beside the flags: no padding)

  // The polls that listed it as running, by their number (Daemon's polls_made; 0: none yet). listed() never turns
  // true again once false, so the polls that listed it are exactly [first, last]: a reply renews its lease when its
  // poll is in that range, and a poll in flight keeps no list of its own (ten thousand ids at a manager).
  struct ListedIn {
    std::uint64_t first = 0, last = 0;
    bool contains(std::uint64_t poll) const { return first != 0 && first <= poll && poll <= last; }
  } listed_in;

  // Whether nothing more is reported for this attempt.
  bool stopped() const { return fenced || detached || abandoned; }
  // Whether polls and registrations list it as running (its lease is to be renewed). Once false, never true again.
  bool listed() const { return !stopped() && !given_up; }
  // Whether its runner's jobs end with the agent (false for a refused attempt, which has no runner).
  bool stops_with_agent() const;
  // Whether its runner's jobs outlive the agent (false for a refused attempt).
  bool survives_agent() const;
  // Wakes the shipper and any producer waiting for buffer space, after a flag changed.
  void wake_all();
  // Something was queued in the outbox: wakes the delivery, or starts one when none runs (unless stopped).
  void queued();
};

}  // namespace nymph::agent
