#pragma once
// What this host can offer a control plane: runners, backend, tags, and the enclosing Slurm allocation.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/value.hpp>

namespace nymph::agent {

// The allocation the agent itself runs in (only when started inside a Slurm job).
struct SlurmAllocation {
  std::string job_id;
  std::string partition;
  std::optional<std::chrono::system_clock::time_point> end_time;  // absent for unlimited jobs
};

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
  std::string path_env;                    // $PATH
  std::optional<std::string> slurm_job_id; // $SLURM_JOB_ID
  bool slurm_runner_enabled = true;        // [runners.slurm] enabled != false
  std::optional<std::string> sbatch_override;  // configured sbatch path
};

// Reads the inputs from this process's environment.
ProbeInputs probe_inputs_from_environment();

// Finds an executable called `name` on `path_env` (colon-separated). Returns its absolute path or nullopt.
std::optional<std::string> find_on_path(const std::string& name, const std::string& path_env);

// Probes the host without touching Slurm (no allocation lookup). Never throws.
ProbeResult probe_host(const ProbeInputs& in);

// Parses Slurm's "time left" (squeue %L): "MM:SS", "HH:MM:SS", "D-HH:MM:SS", "D-HH". Returns nullopt for
// UNLIMITED / NOT_SET / anything else (an allocation without a known end).
std::optional<std::chrono::seconds> parse_slurm_time_left(const std::string& text);

// Parses one line of `squeue -h -j ID -o "%P|%L"` into an allocation of `job_id` ending at now + time left.
// Returns nullopt when the line is not of that form.
std::optional<SlurmAllocation> parse_allocation_line(const std::string& job_id, const std::string& line,
                                                     std::chrono::system_clock::time_point now);

// JSON form printed by `nymph probe --json`.
boost::json::value to_json(const ProbeResult& r);

}  // namespace nymph::agent
