#pragma once
// Control-plane policy with no I/O: dispatch matching, job state transitions, and the in-memory clocks that
// decide when a lease is lost and a worker is stale. Stepped by tests with explicit time points.
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/protocol.hpp"

namespace nymph::control {

// What a worker offers (from its registration).
struct WorkerCaps {
  std::vector<std::string> runners;
  std::map<std::string, std::string> tags;
  std::vector<std::string> profiles;
  // Until when it takes jobs that stop with it (process jobs): serves_until of its allocation.
  std::chrono::system_clock::time_point serves_until = std::chrono::system_clock::time_point::max();
};

// Until when a worker registered with allocation `a` (its registration's `slurm`) takes process jobs: the
// allocation's endTime minus its leadS (protocol::kDefaultWalltimeLeadS when absent). time_point::max() when it
// has no end: a login-node manager (no `slurm`), an unlimited allocation (no endTime), or an endTime that does not
// parse (registration refuses one; a row from before that check reads as no end).
std::chrono::system_clock::time_point serves_until(const std::optional<protocol::SlurmAllocation>& a);

// Placement by allocation end (docs/protocol.md, "Placement by allocation end"): whether a process job whose
// timeout is `timeout_s` (nullopt: none) may be handed at `now` to a worker serving until `until`. Always, for a
// worker without an end (time_point::max()). Otherwise a job with a timeout only when it fits: now + timeout <=
// until; a job without one only when now < until and no other worker that could take it serves longer
// (`longest_elsewhere`: the latest serves_until of those workers; nullopt when there is none).
bool fits_before_end(std::optional<double> timeout_s, std::chrono::system_clock::time_point until,
                     std::chrono::system_clock::time_point now,
                     std::optional<std::chrono::system_clock::time_point> longest_elsewhere);

// What a job needs from a worker.
struct JobNeeds {
  std::string runner;
  std::map<std::string, std::string> required_tags;
  std::optional<std::string> profile;  // kind=training only
  std::optional<double> timeout_s;     // the job's timeoutS: its placement on a worker with an end (fits_before_end)
};

// The runner of a queued training job submitted without one (docs/protocol.md, "Runner choice").
inline constexpr const char* kAutoRunner = "auto";

// What a submission needs of a worker: its runner ("process" when it names none, "auto" for such a training job),
// required tags and (training) profile.
JobNeeds needs_of(const protocol::JobSubmission& sub);

// True when a worker with `caps` may run a job with `needs`: its runners include the runner, its tags include
// every required pair, and (training) its profiles include the profile. Free slots are not considered. For an
// "auto" job: when it may run it on slurm or on process.
bool can_take(const WorkerCaps& caps, const JobNeeds& needs);

// can_take and free[needs.runner] > 0 (an "auto" job: on slurm or on process with a free slot).
bool can_take_now(const WorkerCaps& caps, const std::map<std::string, int>& free, const JobNeeds& needs);

// The runner an "auto" job gets at a worker with `caps` and `free` slots: slurm when the worker has the slurm
// runner and can take the job there (nullopt while its slurm slots are full: it waits for one, never falls back
// to process); else process when the worker can take it there and `slurm_elsewhere` is false (no other active
// worker with the slurm runner could take the job); else nullopt.
std::optional<std::string> choose_runner(const WorkerCaps& caps, const std::map<std::string, int>& free,
                                         const JobNeeds& needs, bool slurm_elsewhere);

// The job's state after its current attempt was lost (lease expired or a `lost` event): cancelled when a
// cancel was pending, queued again while attempts_made < max_attempts, else lost.
protocol::JobState after_lost_attempt(int attempts_made, int max_attempts, bool cancel_requested);

// Refused attempts (overCapacity) that may go uncounted per job: more are counted like any lost attempt, so a
// worker that keeps refusing cannot bounce a job forever.
inline constexpr int kMaxUncountedAttempts = 100;

// Whether a `lost` event with `reason` counts against the job's maxAttempts: it does, except an overCapacity
// refusal that is the attempt's first event (`first_event`: never started), while the job has had fewer than
// kMaxUncountedAttempts of those (`uncounted_so_far`).
bool lost_attempt_counts(std::optional<protocol::EventReason> reason, bool first_event, int uncounted_so_far);

// The job's state after a non-lost event `ev` of its current attempt. Progress events keep the job running
// (or cancelling); final events give the job the same final state.
protocol::JobState after_event(protocol::JobState current, protocol::EventState ev);

// The attempt state an event moves the attempt to.
protocol::AttemptState attempt_state_of(protocol::EventState ev);

// In-memory clocks of worker contact and lease renewal (docs/protocol.md section 5).
// While at least one open poll *holds* a worker or lease it has no deadline; when the last hold is released
// (the poll was answered or its connection closed) its deadline starts. take_expired removes and returns what
// passed its deadline. All times are monotonic and passed in by the caller.
// A lease's TTL is its runner's (`runner_lease_ttl`), else the default `lease_ttl`: the runner is given when the
// lease is held or renewed; an empty runner keeps the TTL the lease already has (the default for a new one).
class Liveness {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;
  using Duration = Clock::duration;

  Liveness(Duration lease_ttl, Duration stale_after, std::map<std::string, Duration> runner_lease_ttl = {})
      : lease_ttl_(lease_ttl), stale_after_(stale_after), runner_lease_ttl_(std::move(runner_lease_ttl)) {}

  // The TTL of a lease of `runner`.
  Duration lease_ttl(const std::string& runner) const;

  // An open poll of `worker` holds it (no stale deadline).
  void worker_hold(const std::string& worker);
  // That poll ended at `now`; when no other poll holds the worker, it turns stale at now+staleAfter.
  void worker_release(const std::string& worker, TimePoint now);
  // Contact with an unheld worker at `now` (an immediate reply, a registration): stale at now+staleAfter.
  void worker_seen(const std::string& worker, TimePoint now);
  // Forget `worker` (it exited).
  void worker_forget(const std::string& worker);

  // The same for leases: held while a poll listing them is open, lost their TTL after the last release or
  // renewal.
  void lease_hold(const std::string& lease, const std::string& runner = {});
  void lease_release(const std::string& lease, TimePoint now);
  void lease_renewed(const std::string& lease, TimePoint now, const std::string& runner = {});
  // Forget `lease` (its attempt ended).
  void lease_forget(const std::string& lease);

  // The earliest deadline, if any.
  std::optional<TimePoint> next_deadline() const;

  struct Expired {
    std::vector<std::string> stale_workers;
    std::vector<std::string> lost_leases;
    std::vector<Duration> lost_lease_ttls;  // the TTL of each of lost_leases, in the same order
  };
  // Removes and returns every worker and lease whose deadline is <= now.
  Expired take_expired(TimePoint now);

  std::size_t tracked_workers() const { return workers_.size(); }
  std::size_t tracked_leases() const { return leases_.size(); }

 private:
  // One family of clocks: id -> holds and deadline, plus an index sorted by deadline.
  // Each entry keeps its own TTL: the deadline is the last release or touch plus that TTL.
  class Clocks {
   public:
    explicit Clocks(Duration default_ttl) : default_ttl_(default_ttl) {}
    // `ttl` (when given) replaces the entry's TTL.
    void hold(const std::string& id, std::optional<Duration> ttl);
    void release(const std::string& id, TimePoint now);
    void touch(const std::string& id, TimePoint now, std::optional<Duration> ttl);
    void forget(const std::string& id);
    // Removes and returns what passed its deadline, with its TTL.
    std::vector<std::pair<std::string, Duration>> take(TimePoint now);
    std::optional<TimePoint> earliest() const;
    std::size_t size() const { return entries_.size(); }

   private:
    struct Entry {
      int holds = 0;
      std::optional<TimePoint> deadline;
      Duration ttl{};
    };
    Entry& entry(const std::string& id, std::optional<Duration> ttl);
    Duration default_ttl_;
    void set_deadline(const std::string& id, Entry& e, std::optional<TimePoint> at);
    std::unordered_map<std::string, Entry> entries_;
    std::set<std::pair<TimePoint, std::string>> order_;
  };
  std::optional<Duration> ttl_of(const std::string& runner) const;
  Duration lease_ttl_;
  Duration stale_after_;
  std::map<std::string, Duration> runner_lease_ttl_;
  Clocks workers_{stale_after_};
  Clocks leases_{lease_ttl_};
};

}  // namespace nymph::control
