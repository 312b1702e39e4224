#pragma once
// `nymph doctor`: the composition of configuration, environment and the checks of agent/doctor.hpp.
#include <chrono>
#include <filesystem>

namespace nymph::agent {

struct DoctorArgs {
  bool json = false;                    // print exactly one JSON object on stdout
  std::filesystem::path config_file;    // empty: $XDG_CONFIG_HOME/nymph/config.toml (~/.config/...) if present
  std::filesystem::path state_dir;      // empty: ~/.local/share/nymph (as `nymph install`)
  std::chrono::milliseconds timeout{10'000};  // each Slurm command and the control-plane request
  bool deep = false;                    // also submit a held job and cancel it (doctor::Inputs::deep)
};

// Runs every check and prints the report (text or JSON) on stdout. Returns 1 when a check failed, else 0.
// Never throws.
int doctor_main(const DoctorArgs& args);

}  // namespace nymph::agent
