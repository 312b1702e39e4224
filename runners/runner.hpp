#pragma once
// The interface between the agent and its runners. The agent owns it (it consumes runners); runners never
// see wire types: the agent maps protocol messages to JobSpec and JobUpdate.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

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

// A state change of one attempt.
struct JobUpdate {
  JobState state = JobState::running;
  std::optional<int> exit_code;             // final states: the job's exit code when it exited
  std::optional<int> signal;                // final states: the signal that killed it
  std::string message;                      // why, for a person (Slurm reason, error text)
  std::optional<std::string> slurm_job_id;  // slurm runner
  std::optional<boost::json::value> result; // training profiles: the checked result.json
};

enum class Stream { out, err };

// Wire name of a stream ("stdout" / "stderr").
std::string_view to_string(Stream s);

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

// Why an attempt is being stopped.
enum class StopReason { user_cancel, lease_lost, timeout, shutdown };

// A way of running jobs ("process", "slurm").
class Runner {
 public:
  virtual ~Runner() = default;
  // The runner's name as advertised at registration.
  virtual std::string_view name() const = 0;
  // Runs one attempt to its end and returns its final update (succeeded / failed / cancelled / lost).
  // Bad input (invalid spec, missing executable, unwritable work dir) is a `failed` outcome with a message,
  // never an exception. All output has been handed to `reporter` before this returns.
  virtual boost::asio::awaitable<JobUpdate> run(JobSpec spec, JobReporter& reporter) = 0;
  // Asks the attempt `job_id` to stop (process: TERM to its group, grace, KILL; slurm: scancel). Returns at
  // once; run() then finishes with `cancelled`. Unknown ids are ignored.
  virtual void stop(const std::string& job_id, StopReason why) = 0;
  // Called by the agent once the attempt's final event has been delivered: removes what the attempt left
  // on disk (work or job directory) unless the runner is configured to keep it. Unknown ids are ignored.
  virtual void release(const std::string& job_id) = 0;
};

}  // namespace nymph::runners
