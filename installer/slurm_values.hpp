#pragma once
// The Slurm values of `nymph install --slurm`, checked with the sbatch option grammar the Slurm runner uses
// (slurm/options.hpp), so the installer accepts exactly what the runner would write into an #SBATCH line.
#include <chrono>
#include <string_view>

#include "common/error.hpp"

namespace nymph::installer {

// Checks `value` for the sbatch option `key` ("partition", "time", "account", "qos") with the Slurm runner's
// grammar. The Error names the command-line `flag`, shows the value escaped and says what was expected.
Result<void> check_slurm_value(std::string_view flag, std::string_view key, std::string_view value);

// The length of a Slurm time limit ("M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S") in seconds. Returns an Error
// naming `flag` unless the value passes check_slurm_value(flag, "time", value) as well. Never throws.
Result<std::chrono::seconds> parse_slurm_time(std::string_view flag, std::string_view value);

}  // namespace nymph::installer
