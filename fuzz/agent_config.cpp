// Fuzz target: the agent's TOML configuration (agent/config.hpp parse_config) and `nymph install`'s config
// fragment merge and site options (installer/plan.hpp make_install_plan). The first byte picks the input:
//   0: the text as a config file;
//   1: the text as a --config-fragment merged into the generated config;
//   2: the text's lines as --tag, --training-profile, --slurm-time, --idle-exit and --drain-grace values.
// Properties: no input aborts, throws out of or overflows the stack of the process (the daemon reads configs it
// did not write); a parsed config holds no NUL byte in a name, tag, path or profile (a NUL truncates the
// argument or path it ends up in); a plan's config.toml passes parse_config and agrees with the plan.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "common/ulid.hpp"
#include "fuzz/check.hpp"
#include "installer/plan.hpp"

namespace {

using namespace nymph;

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

void check_no_nul(const agent::AgentConfig& c) {
  NYMPH_FUZZ_CHECK(!has_nul(c.server.url) && !has_nul(c.server.token_file.native()));
  NYMPH_FUZZ_CHECK(!has_nul(c.worker.label) && !has_nul(c.worker.work_dir.native()));
  for (const auto& [k, v] : c.worker.tags) NYMPH_FUZZ_CHECK(!has_nul(k) && !has_nul(v));
  for (const auto& p : c.profiles) {
    NYMPH_FUZZ_CHECK(!has_nul(p.name) && !has_nul(p.script.native()));
    for (const auto& name : p.allowed_parameters) NYMPH_FUZZ_CHECK(!has_nul(name));
  }
  NYMPH_FUZZ_CHECK(!has_nul(c.slurm.launch_dir.native()) && !has_nul(c.manager.state_dir.native()));
  NYMPH_FUZZ_CHECK(!has_nul(c.slurm.sbatch) && !has_nul(c.slurm.account) && !has_nul(c.log.file.native()));
}

void check_config(std::string_view text) {
  auto config = agent::parse_config(text, "fuzz.toml");
  if (config) check_no_nul(*config);
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size() && out.size() < 8) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  out.resize(8);
  return out;
}

void check_plan(const installer::InstallOptions& options, const std::optional<installer::ConfigFragment>& fragment) {
  static const Ulid id = parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAV").value();
  installer::HostFacts host{.home = "/home/ada", .hostname = "login1", .nymph_exe = "/opt/nymph/bin/nymph"};
  auto plan = installer::make_install_plan(options, host, id, fragment);
  if (!plan) return;
  auto config = agent::parse_config(plan->config_toml, plan->config_path.string());
  NYMPH_FUZZ_CHECK(config.has_value());
  check_no_nul(*config);
  NYMPH_FUZZ_CHECK(config->profiles.size() == plan->profiles.size());
  for (const auto& [name, script] : plan->profiles) NYMPH_FUZZ_CHECK(!has_nul(name) && !has_nul(script));
}

installer::InstallOptions base_options() {
  installer::InstallOptions o;
  o.server = "https://cp.example.org";
  o.token_file = "/home/ada/tok";
  return o;
}

void check_options(std::string_view text) {
  auto values = lines_of(text);
  auto o = base_options();
  if (!values[0].empty()) o.tags.push_back(values[0]);
  if (!values[1].empty()) o.training_profiles.push_back(values[1]);
  o.idle_exit = values[2];
  o.drain_grace = values[3];
  o.max_poll_duration = values[4];
  o.label = values[5];
  if (!values[6].empty()) {
    o.slurm = true;
    o.slurm_time = values[6];
    o.slurm_partition = values[7].empty() ? "debug" : values[7];
  }
  check_plan(o, std::nullopt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: check_config(text); break;
    case 1: check_plan(base_options(), installer::ConfigFragment{"/etc/nymph/site.toml", std::string(text)}); break;
    default: check_options(text); break;
  }
  return 0;
}
