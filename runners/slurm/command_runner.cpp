#include "runners/slurm/command_runner.hpp"

#include <array>
#include <string_view>

extern char** environ;

namespace nymph::runners::slurm {
namespace {
constexpr std::array<std::string_view, 5> kScrubbedPrefixes{"SLURM_", "SBATCH_", "SQUEUE_", "SACCT_", "SCANCEL_"};
}  // namespace

std::map<std::string, std::string> scrub_slurm_variables(std::map<std::string, std::string> env) {
  std::erase_if(env, [](const auto& kv) {
    if (kv.first == "SLURM_CONF") return false;
    for (auto p : kScrubbedPrefixes)
      if (kv.first.starts_with(p)) return true;
    return false;
  });
  return env;
}

std::map<std::string, std::string> scrubbed_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return scrub_slurm_variables(std::move(env));
}

}  // namespace nymph::runners::slurm
