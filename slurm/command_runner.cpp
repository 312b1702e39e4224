#include "slurm/command_runner.hpp"

#include <array>
#include <string_view>

namespace nymph::slurm {
namespace {
constexpr std::array<std::string_view, 5> kScrubbedPrefixes{"SLURM_", "SBATCH_", "SQUEUE_", "SACCT_", "SCANCEL_"};
}  // namespace

Environment scrub_slurm_variables(Environment env) {
  std::erase_if(env, [](const auto& kv) {
    if (kv.first == "SLURM_CONF") return false;
    for (auto p : kScrubbedPrefixes)
      if (kv.first.starts_with(p)) return true;
    return false;
  });
  return env;
}

Environment scrubbed_environment() { return scrub_slurm_variables(platform::current_environment()); }

}  // namespace nymph::slurm
