// Fuzz target: a job assignment as the agent receives it in a poll reply (JSON, protocol::JobAssignment), mapped
// to a runner JobSpec (agent/job_mapping.hpp), its runConfig.slurm validated against the allow-list
// (slurm/options.hpp) and rendered into an sbatch script (runners/slurm/script.hpp). Properties: in the directive
// block sbatch reads (the top of the script up to the first line that is neither blank nor a comment), every
// directive line (#SBATCH, or #PBS, which sbatch also reads) is one nymph writes itself or `#SBATCH --key[=value]`
// of a validated option whose key is on the allow-list; an implied --time (from timeoutS) is a time limit Slurm
// holds; no NUL reaches the script.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "agent/job_mapping.hpp"
#include "fuzz/check.hpp"
#include "protocol/json.hpp"
#include "runners/slurm/script.hpp"
#include "slurm/options.hpp"
#include "slurm/time.hpp"

namespace {

using namespace nymph;

constexpr std::string_view kDir = "/scratch/nymph/jobs/j-1";

std::vector<std::string> lines_of(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t end = s.find('\n', start);
    if (end == std::string_view::npos) end = s.size();
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The directive lines nymph may write for `options` (and a time limit from the spec's timeout).
std::vector<std::string> allowed_directives(const std::vector<slurm::SbatchOption>& options,
                                            const runners::JobSpec& spec) {
  std::string dir(kDir);
  std::vector<std::string> out{"#SBATCH --job-name=" + runners::slurm::slurm_job_name(spec.job_id),
                               "#SBATCH --chdir=" + dir, "#SBATCH --output=" + dir + "/stdout.log",
                               "#SBATCH --error=" + dir + "/stderr.log"};
  const auto& keys = slurm::allowed_option_keys();
  for (const auto& o : options) {
    NYMPH_FUZZ_CHECK(std::find(keys.begin(), keys.end(), o.key) != keys.end());
    out.push_back(slurm::sbatch_directive(o.key, o.value));
  }
  if (spec.timeout) out.push_back(slurm::sbatch_directive("time", slurm::minutes_for(*spec.timeout)));
  for (auto& line : out)
    if (line.ends_with('\n')) line.pop_back();
  return out;
}

void check_time_option(const std::vector<slurm::SbatchOption>& options, const runners::JobSpec& spec) {
  for (const auto& o : options)
    if (o.key == "time") NYMPH_FUZZ_CHECK(slurm::is_time_limit(o.value));
  if (!spec.timeout) return;
  std::string minutes = slurm::minutes_for(*spec.timeout);
  auto limit = slurm::parse_duration(minutes);
  NYMPH_FUZZ_CHECK(limit && limit->count() > 0 && limit->count() <= std::numeric_limits<std::int32_t>::max() - 59);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto assignment = protocol::parse_as<protocol::JobAssignment>(fuzz::as_text(data, size));
  if (!assignment) return 0;
  runners::JobSpec spec = agent::to_runner_spec(*assignment);
  auto options = slurm::validate_options(spec.slurm_options, {"acct", "normal", "batch"});
  if (!options) return 0;
  auto rendered = runners::slurm::render_job(spec, std::string(kDir), *options);
  if (!rendered) return 0;
  check_time_option(*options, spec);
  NYMPH_FUZZ_CHECK(rendered->script.find('\0') == std::string::npos);
  auto allowed = allowed_directives(*options, spec);
  auto lines = lines_of(rendered->script);
  NYMPH_FUZZ_CHECK(!lines.empty() && lines.front() == "#!/bin/sh");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    bool blank = line.find_first_not_of(" \t\r") == std::string_view::npos;
    if (!blank && !line.starts_with('#')) break;  // sbatch stops reading directives here
    bool directive = line.starts_with("#SBATCH") || line.starts_with("#PBS");
    if (!directive) continue;  // a plain comment
    NYMPH_FUZZ_CHECK(std::find(allowed.begin(), allowed.end(), line) != allowed.end());
  }
  return 0;
}
