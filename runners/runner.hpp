#pragma once
// The interface between the agent and its runners. The agent owns it (it consumes runners); runners never
// see wire types: the agent maps protocol messages to JobSpec and JobUpdate.
#include <any>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "common/error.hpp"

namespace nymph::runners {

// What one attempt of a job asks a runner to do.
struct JobSpec {
  std::string job_id;
  int attempt = 1;
  std::string lease_id;
  std::string kind = "command";             // "command" | "training"
  std::vector<std::string> argv;            // kind=command: program and arguments (exclusive with command)
  std::optional<std::string> command;       // kind=command: a shell command for /bin/sh -c
  std::map<std::string, std::string> env;   // extra environment (names validated by the runner)
  std::optional<std::chrono::seconds> timeout;
  boost::json::object slurm_options;        // runConfig.slurm (slurm runner only)
  std::optional<std::string> profile;       // kind=training: profile name
  boost::json::value parameters;            // kind=training: parameters (a JSON object)
};

// States a runner reports. pending/running are progress; the rest are final.
enum class JobState { pending, running, succeeded, failed, cancelled, lost };

// Wire name of a state ("pending", "running", ...).
std::string_view to_string(JobState s);

// True for succeeded, failed, cancelled and lost.
bool is_final(JobState s);

// Why the agent gives an attempt up as `lost` (the protocol's event reason; set by the agent, not by runners):
// the worker is going away, the agent could not renew the attempt's lease in time, or the attempt was
// assigned beyond the worker's capacity and never started.
enum class LostReason { worker_stopping, lease_expired, over_capacity };

// A state change of one attempt.
struct JobUpdate {
  JobState state = JobState::running;
  std::optional<int> exit_code;             // final states: the job's exit code when it exited
  std::optional<int> signal;                // final states: the signal that killed it
  std::string message;                      // why, for a person (Slurm reason, error text)
  std::optional<std::string> slurm_job_id;  // slurm runner
  std::optional<boost::json::value> result; // training profiles: the checked result.json
  std::optional<LostReason> reason;         // state lost only, set by the agent
};

// The `failed` update ("runner error: ...") for an exception a runner's coroutine ended with.
JobUpdate runner_error(std::exception_ptr e);

// A job's output stream (the agent maps it to the protocol's LogStream).
enum class Stream { out, err };

// Where a runner sends what one attempt produces. Implemented by the agent, one per attempt; it outlives
// the runner's run() call for that attempt.
class JobReporter {
 public:
  virtual ~JobReporter() = default;
  // Queues a non-final state change (pending with Slurm's reason, running with the Slurm job id). Never blocks.
  virtual void update(JobUpdate u) = 0;
  // Queues `bytes` of `stream` starting at byte `offset` (offsets of one stream are contiguous from 0).
  // Suspends while the attempt's undelivered output exceeds its bound, which is how a job that prints
  // faster than the control plane accepts is slowed down instead of growing the agent's memory.
  virtual boost::asio::awaitable<void> output(Stream stream, std::uint64_t offset, std::string bytes) = 0;
};

// What a runner calls, once, with what run() (or resume()) would have returned for an attempt started with
// Runner::launch (or ResumableRunner::relaunch).
using AttemptDone = boost::asio::any_completion_handler<void(JobUpdate)>;

// Why an attempt is being stopped.
// lease_expired: the agent could not renew the attempt's lease for its TTL minus a margin (the control plane
// re-queues the job soon): stop it like lease_lost (slurm: scancel).
enum class StopReason : std::uint8_t { user_cancel, lease_lost, timeout, shutdown, lease_expired };

// How an attempt's life relates to the agent's. The agent decides by this, never by a runner's name, which
// attempts it waits for and stops when it stops, and which it leaves running.
enum class Lifetime {
  // The job is the agent's child (process runner): a stopping agent lets it run for the drain grace, then
  // stops it with StopReason::shutdown and reports it `cancelled`. Inside an allocation a job must also
  // fit before the walltime to be started.
  stops_with_agent,
  // The job runs outside the agent (slurm runner): a stopping agent neither waits for it nor reports its
  // end. stop(job, StopReason::shutdown) detaches it: run() (or resume()) returns at once with a NON-final
  // update and the job keeps running. A later agent of the same launch takes it back through resumable().
  survives_agent,
};

// An attempt a previous agent left running, as its runner remembers it. The agent lists job_id/lease_id
// at registration and hands the record back unchanged to ResumableRunner::resume or abandon.
struct InFlightAttempt {
  std::string job_id;
  std::string lease_id;
  int attempt = 1;
  std::any runner_data;  // what the runner needs to take the attempt back (slurm: its journal entry); opaque
};

// The part of a runner whose attempts survive the agent: listing what a previous agent left running, and
// taking each one back or giving it up, as the control plane decides at registration.
class ResumableRunner {
 public:
  // Attempts left running by a previous agent and not yet released or abandoned. An empty list when there
  // are none; never throws.
  virtual std::vector<InFlightAttempt> in_flight() const = 0;
  // Re-attaches to `attempt` (from in_flight()) and behaves like run() from where the previous agent left
  // it: updates and output go to `reporter` (output from the start of the job's files), stop() works on
  // attempt.job_id, and it returns the final update (or, after stop(shutdown), a non-final one). A record
  // this runner does not recognise, or an attempt it already tracks, is a `failed` update, not an exception.
  virtual boost::asio::awaitable<JobUpdate> resume(InFlightAttempt attempt, JobReporter& reporter) = 0;
  // Gives up `attempt` (from in_flight()), which the control plane no longer wants: stops the job and
  // forgets it (no release() needed). Returns an Error naming what failed when the job could not be
  // stopped; the attempt is then kept, and a later agent lists it again.
  virtual boost::asio::awaitable<Result<void>> abandon(InFlightAttempt attempt) = 0;
  // resume() without a coroutine of the caller's: returns at once and calls `done` on `ex` (the agent's
  // executor; the runner's own when it has one) with what resume() returns, never from inside this call (an
  // exception from resume() becomes a `failed` update). The default co_spawns resume() on `ex`; a runner
  // re-attaching to thousands of attempts at a restart overrides it so that an attempt waiting in Slurm's
  // queue holds no coroutine frame.
  virtual void relaunch(boost::asio::any_io_executor ex, InFlightAttempt attempt, JobReporter& reporter,
                        AttemptDone done);

 protected:
  ~ResumableRunner() = default;  // not owned through this interface
};

// A way of running jobs ("process", "slurm").
class Runner {
 public:
  virtual ~Runner() = default;
  // The runner's name as advertised at registration (and the key of its capacity).
  virtual std::string_view name() const = 0;
  // Whether its attempts stop with the agent or survive it (see Lifetime). Constant for a runner.
  virtual Lifetime lifetime() const = 0;
  // The runner's resumable part, or nullptr (the default) when a restarted agent has nothing to take back.
  // A survives_agent runner without one leaves its jobs running unwatched after a restart.
  virtual ResumableRunner* resumable() { return nullptr; }
  // Runs one attempt to its end and returns its final update (succeeded / failed / cancelled / lost).
  // Bad input (invalid spec, missing executable, unwritable work dir) is a `failed` outcome with a message,
  // never an exception. All output has been handed to `reporter` before this returns.
  virtual boost::asio::awaitable<JobUpdate> run(JobSpec spec, JobReporter& reporter) = 0;
  // run() without a coroutine of the caller's (the agent starts every attempt this way): returns at once and
  // calls `done` on `ex` (the agent's executor; the runner's own when it has one) with what run() returns,
  // never from inside this call (an exception from run() becomes a `failed` update). The default co_spawns
  // run() on `ex`; a runner that tracks thousands of attempts overrides it so that an attempt waiting in
  // Slurm's queue holds no coroutine frame.
  virtual void launch(boost::asio::any_io_executor ex, JobSpec spec, JobReporter& reporter, AttemptDone done);
  // Asks the attempt `job_id` to stop (process: TERM to its group, grace, KILL; slurm: scancel). Returns at
  // once; run() then finishes with `cancelled`. Unknown ids are ignored.
  virtual void stop(const std::string& job_id, StopReason why) = 0;
  // Ends the attempt `job_id` at once, for an attempt that stop() is ending and whose kill grace the agent
  // cannot wait for (its exit budget, an expired lease): a stops_with_agent runner SIGKILLs its processes now;
  // run() then returns as after stop(`why`). The default calls stop(job_id, why). Unknown ids are ignored.
  virtual void kill(const std::string& job_id, StopReason why) { stop(job_id, why); }
  // Called by the agent once the attempt's final event has been delivered: removes what the attempt left
  // on disk (work or job directory) unless the runner is configured to keep it. Unknown ids are ignored.
  virtual void release(const std::string& job_id) = 0;
  // What is wrong with the runner's backend right now, for status.json and the log ("" when nothing is: the
  // default). The Slurm runner says so while it backs off from a failing or rate-limiting slurmctld.
  virtual std::string trouble() const { return {}; }
  // Has `changed` called (on the runner's executor) each time trouble() changes; replaces an earlier callback.
  // The default never calls it.
  virtual void on_trouble_change(std::function<void()> changed) { (void)changed; }
};

}  // namespace nymph::runners
