#pragma once
// `nymph slurm jobs [--json] [--timeout S]`: this user's Slurm jobs, one row each.
#include <chrono>

namespace nymph::agent {

// Lists the jobs (squeue --me --json, falling back to the plain format) and prints a table, or one JSON
// object with --json. Returns 0, or 1 with squeue's error on standard error (and with --json the error object
// {"error":{"code":"slurmUnavailable",...}} on stdout: common/cli_json.hpp).
int slurm_jobs_main(bool json, std::chrono::milliseconds timeout);

}  // namespace nymph::agent
