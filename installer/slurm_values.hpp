#pragma once
// Grammar of the Slurm values `nymph install --slurm` writes into an #SBATCH line.
// TODO(slurm runner): switch these call sites to the Slurm runner's option grammar (runners/slurm/...) once it
// is committed; this file is the installer's stand-in and is deliberately the strict subset both accept.
#include <chrono>
#include <optional>
#include <string_view>

#include "common/error.hpp"

namespace nymph::installer {

// Checks a partition name list ("debug" or "debug,long"): names of letters, digits, '_', '.', '-', separated by
// single commas, at most 128 characters. `flag` names the option in the message. Never throws.
Result<void> check_slurm_partition(std::string_view flag, std::string_view value);

// Checks an account or QOS name: letters, digits, '_', '.', '-', at most 64 characters. Never throws.
Result<void> check_slurm_name(std::string_view flag, std::string_view value);

// Parses a Slurm time limit: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S", or "INFINITE" / "UNLIMITED".
// Returns the limit in seconds, or nullopt for an unlimited one; an Error naming `flag` otherwise.
Result<std::optional<std::chrono::seconds>> parse_slurm_time(std::string_view flag, std::string_view value);

}  // namespace nymph::installer
