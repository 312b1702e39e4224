#pragma once
// The agent daemon: registers, keeps one held poll open, runs attempts through runners, ships their events
// and logs, and stops the way its lifecycle decides. I/O coroutines around the Lifecycle, Backoff and
// AttemptOutbox state machines.
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <spdlog/logger.h>

#include "agent/control_plane.hpp"
#include "agent/lifecycle.hpp"
#include "runners/runner.hpp"

namespace nymph::agent {

// Everything the daemon needs besides its collaborators; a value, filled by the composition root.
struct DaemonSettings {
  std::string launch_id;
  std::string label;
  std::string hostname;
  std::string backend = "local";
  std::string identity;                          // "<user>@<cluster>" of a manager; empty inside an allocation
  std::map<std::string, std::string> tags;
  std::map<std::string, int> capacity;           // runner name -> concurrent attempts
  std::vector<std::string> profiles;
  std::optional<protocol::SlurmAllocation> allocation;
  std::int64_t generation = 1;                   // of a kept launch ([chain]); registered with the launch id
  std::chrono::milliseconds poll_timeout{30'000};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{5'000};   // registration, polls and uploads: full jitter in [0, cap]
  std::chrono::milliseconds exit_delivery_timeout{30'000};  // how long to keep delivering at exit
  std::size_t max_buffered_output = 2 << 20;     // log bytes per attempt before the job's output is slowed down
  // A `running` (or `pending`) event waits this long before it is sent; a job that ends sooner reports only its
  // final event. One request and one commit less per short job; the state shows up this much later otherwise.
  std::chrono::milliseconds progress_event_hold{20};
  // Event and log uploads on the wire at once, all attempts together (DeliveryContext::upload_slots); the
  // control plane's client is given the same bound.
  std::size_t max_concurrent_uploads = HttpControlPlaneConfig{}.max_concurrent_uploads;
  // Delivery coroutines at once, all attempts together: an attempt with something to send beyond these waits for
  // its turn in line, costing a pointer instead of a coroutine frame, and while any wait, a delivery hands its
  // turn on after each upload. More than max_concurrent_uploads, so that deliveries waiting out a progress
  // event's hold or a backoff leave the upload slots to others. At least 1.
  std::size_t max_active_deliveries = 32;
  LifecycleConfig lifecycle;
  std::filesystem::path status_file;              // empty: none
};

class Daemon {
 public:
  // `control_plane` and the runners must outlive the daemon. `runners` maps names ("process", "slurm") to
  // runners; only these are advertised. What the daemon does with a runner's attempts when it stops follows
  // the runner's lifetime(). The attempts a resumable() runner lists as in_flight() (left running by a
  // previous run of this launch) are listed at registration; those the control plane still wants are
  // resumed, those it answers with a cancel order for are abandoned.
  Daemon(boost::asio::any_io_executor ex, DaemonSettings settings, ControlPlane& control_plane,
         std::map<std::string, runners::Runner*> runners, std::shared_ptr<spdlog::logger> log);
  ~Daemon();

  // Runs until the lifecycle exits and returns the reason (also reported to the control plane and written
  // to status.json). Never throws for expected failures; returns ExitReason::error with a message instead.
  boost::asio::awaitable<ExitReason> run();

  // Delivers a signal (the composition root owns the signal_set). Safe at any time while run() is active.
  void on_signal(Signal s);

  // The message that goes with the exit reason.
  std::string exit_message() const;

  // When the worker last held no job (nullopt while it holds one, or before it serves). For a kept launch's idle
  // rule.
  std::optional<Clock::time_point> idle_since() const;

  // Why the worker stops, once it began to (the lifecycle's exit reason), else nullopt.
  std::optional<ExitReason> stop_reason() const;

  // Attempts in hand, and how many of them have a delivery running now: an attempt with nothing to send (its
  // updates and output acknowledged, its run going on) has none.
  struct AttemptCounts {
    std::size_t attempts = 0;
    std::size_t delivering = 0;  // with a delivery running or waiting for its turn
    std::size_t waiting_for_upload = 0;  // deliveries waiting for one of max_concurrent_uploads slots
    std::size_t waiting_for_delivery = 0;  // attempts waiting for one of max_active_deliveries coroutines
  };
  AttemptCounts attempt_counts() const;

  // The kept launch's chain as status.json shows it ("chain": {"generation", "state", "reason", "successorJobId"});
  // written at once. Not called: no "chain" key.
  void set_chain_status(std::string state, std::string reason, std::string successor_job_id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nymph::agent
