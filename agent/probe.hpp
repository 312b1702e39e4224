#pragma once
// What this host can offer a control plane: runners, backend, tags, and the enclosing Slurm allocation. The
// Slurm command line and its parsing are in slurm/ (slurm/allocation.hpp); the PATH rule is platform's.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>
#include <spdlog/logger.h>

#include "slurm/allocation.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::agent {

// The allocation the agent itself runs in (only when started inside a Slurm job).
struct SlurmAllocation {
  std::string job_id;
  std::string partition;
  std::optional<std::chrono::system_clock::time_point> end_time;      // absent for unlimited jobs
  std::optional<std::chrono::steady_clock::time_point> walltime_end;  // the same moment on the steady clock
  // Slurm's KillWait (SIGTERM to SIGKILL when the allocation is cancelled or ends), from `scontrol show config`;
  // absent when it could not be read (the agent then assumes Slurm's default, 30 s).
  std::optional<std::chrono::seconds> kill_wait;
};

// KillWait from the output of `scontrol show config` ("KillWait                = 30 sec"), or nullopt.
std::optional<std::chrono::seconds> parse_kill_wait(std::string_view text);

// The agent's exit budget (A1, issue 15): `stop_timeout`, inside an allocation at most its KillWait - 3 s
// (KillWait 30 s when unknown), never below 1 s.
std::chrono::milliseconds exit_budget(std::chrono::milliseconds stop_timeout, const std::optional<SlurmAllocation>& a);

// What `nymph probe` prints and what registration advertises.
struct ProbeResult {
  std::string hostname;
  std::string backend = "local";                // "slurm" only when running inside an allocation
  std::vector<std::string> runners{"process"};  // "slurm" added when sbatch is usable
  std::map<std::string, std::string> tags;      // host=slurm when sbatch is on PATH
  std::optional<std::string> sbatch_path;       // resolved sbatch, when found
  std::optional<SlurmAllocation> allocation;    // set iff backend == "slurm"
};

// Inputs of the probe, so tests can vary them without touching the real environment.
struct ProbeInputs {
  std::string path_env;                        // $PATH
  std::optional<std::string> slurm_job_id;     // $SLURM_JOB_ID
  bool slurm_runner_enabled = true;            // [runners.slurm] enabled != false
  std::optional<std::string> sbatch_override;  // configured sbatch path
  std::string squeue = "squeue";               // [runners.slurm] squeue: asked for the allocation
  std::chrono::milliseconds command_timeout{30'000};  // bounds that squeue
};

// Reads the inputs from this process's environment (path_env, slurm_job_id; the rest keeps its defaults).
ProbeInputs probe_inputs_from_environment();

// Probes the host without touching Slurm (no allocation lookup): hostname, and the slurm runner when sbatch
// (or the configured one) is found with platform::find_on_path. Never throws.
ProbeResult probe_host(const ProbeInputs& in);

// The allocation `a` as seen at `now` (the wall clock) and `steady_now` (the same moment, steady clock).
SlurmAllocation allocation_at(const slurm::Allocation& a, std::chrono::system_clock::time_point now,
                              std::chrono::steady_clock::time_point steady_now);

// The whole probe: probe_host, then, inside an allocation (in.slurm_job_id set), asks Slurm for it once
// (slurm::query_allocation through `commands`, bounded by in.command_timeout) and reads KillWait
// (`scontrol show config`, same bound; scontrol found like squeue, beside it or on PATH). The backend is "slurm" and
// `allocation` set only when squeue shows that job; otherwise the agent runs as a local worker and `log` says
// why. Never throws for Slurm failures.
boost::asio::awaitable<ProbeResult> probe(ProbeInputs in, slurm::CommandRunner& commands,
                                          std::shared_ptr<spdlog::logger> log);

// JSON form printed by `nymph probe --json`.
boost::json::value to_json(const ProbeResult& r);

}  // namespace nymph::agent
