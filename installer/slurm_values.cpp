#include "installer/slurm_values.hpp"

#include <string>

#include "slurm/options.hpp"
#include "slurm/time.hpp"

namespace nymph::installer {

Result<void> check_slurm_value(std::string_view flag, std::string_view key, std::string_view value) {
  auto checked = slurm::check_option(key, value);
  if (checked) return {};
  // The runner names the job field ("runConfig.slurm.<key>: ..."); name the command-line flag instead.
  std::string message = checked.error().message;
  std::string prefix = "runConfig.slurm." + std::string(key);
  if (message.starts_with(prefix)) message.erase(0, prefix.size());
  else message = ": " + message;
  return fail(std::string(flag) + message);
}

Result<std::chrono::seconds> parse_slurm_time(std::string_view flag, std::string_view value) {
  if (auto r = check_slurm_value(flag, "time", value); !r) return r.error();
  auto length = slurm::parse_duration(value);
  if (!length) return fail(std::string(flag) + ": bad time");  // not reached: the grammar is the same
  return *length;
}

}  // namespace nymph::installer
