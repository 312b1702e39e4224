// nymph: the compute agent. Composition root only: parse the command line, hand over to the libraries.
#include <iostream>

#include <CLI/CLI.hpp>
#include <boost/json/serialize.hpp>

#include "agent/doctor_main.hpp"
#include "agent/probe.hpp"
#include "agent/run_main.hpp"
#include "agent/slurm_jobs_main.hpp"
#include "common/cli_json.hpp"
#include "installer/cli.hpp"
#include "nymph/version.hpp"

namespace {

int run_probe(bool json) {
  auto result = nymph::agent::probe_host(nymph::agent::probe_inputs_from_environment());
  if (json) {
    std::cout << boost::json::serialize(nymph::agent::to_json(result)) << "\n";
    return 0;
  }
  std::cout << "hostname: " << result.hostname << "\n"
            << "backend:  " << result.backend << "\n"
            << "runners: ";
  for (const auto& r : result.runners) std::cout << " " << r;
  std::cout << "\ntags:    ";
  for (const auto& [k, v] : result.tags) std::cout << " " << k << "=" << v;
  std::cout << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nymph - compute agent for HPC clusters", "nymph"};
  app.set_version_flag("--version", std::string("nymph ") + nymph::kVersion);
  app.require_subcommand(1);

  nymph::agent::RunArgs run_args;
  auto* run = app.add_subcommand("run", "Run the agent daemon in the foreground");
  run->add_option("--config", run_args.config_file, "Configuration file (TOML; see docs/config.md)")->required();
  run->add_option("--training-profile", run_args.training_profiles,
                  "Approved training profile NAME=/absolute/script (repeatable)");
  run->add_flag("--replace", run_args.replace,
                "Take over from the manager of this identity that runs (it drains and hands over its jobs)");
  run->add_option("--generation", run_args.generation,
                  "This allocation's generation in a kept launch (set by the launch's sbatch script)")
      ->check(CLI::Range(1, 1'000'000));
  auto installer = nymph::installer::register_cli(app);  // install, launches [prune], kill
  bool probe_json = false;
  auto* probe = app.add_subcommand("probe", "Print what this host would advertise to a control plane");
  probe->add_flag("--json", probe_json, "Print one JSON object");
  auto* slurm = app.add_subcommand("slurm", "Slurm helpers (e.g. `nymph slurm jobs`)");
  slurm->require_subcommand(1);
  bool slurm_json = false;
  double slurm_timeout_s = 30;
  auto* slurm_jobs = slurm->add_subcommand("jobs", "List this user's Slurm jobs");
  slurm_jobs->add_flag("--json", slurm_json, "Print one JSON object");
  slurm_jobs->add_option("--timeout", slurm_timeout_s, "Seconds squeue may take")->check(CLI::PositiveNumber);

  nymph::agent::DoctorArgs doctor_args;
  double doctor_timeout_s = 10;
  auto* doctor = app.add_subcommand("doctor", "Check this node for nymph: Slurm, logout survival, control plane, token, disk");
  doctor->add_flag("--json", doctor_args.json, "Print one JSON object");
  doctor->add_option("--config", doctor_args.config_file, "Configuration file (default ~/.config/nymph/config.toml if present)");
  doctor->add_option("--state-dir", doctor_args.state_dir, "State directory (default ~/.local/share/nymph)");
  doctor->add_option("--timeout", doctor_timeout_s, "Seconds each Slurm command and the control-plane request may take")
      ->check(CLI::PositiveNumber);

  doctor->add_flag("--deep", doctor_args.deep,
                   "Also submit a held job and cancel it (proves the right to submit and cancel; leaves no job)");

  // Runs the verb the command line chose; returns its exit status (common/cli_json.hpp).
  auto run_verb = [&]() -> int {
    if (*doctor) {
      doctor_args.timeout = std::chrono::milliseconds(static_cast<long long>(doctor_timeout_s * 1000));
      return nymph::agent::doctor_main(doctor_args);
    }
    if (*probe) return run_probe(probe_json);
    if (*run) return nymph::agent::run_main(run_args);
    if (auto status = installer->run()) return *status;
    if (*slurm_jobs)
      return nymph::agent::slurm_jobs_main(slurm_json,
                                           std::chrono::milliseconds(static_cast<long long>(slurm_timeout_s * 1000)));
    return nymph::cli::kExitUsage;
  };

  const bool json_requested = nymph::cli::wants_json(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; a refused command line with --json on it is still
    // one JSON object on stdout (docs/lakeshore.md).
    if (e.get_exit_code() == 0 || !json_requested) return app.exit(e);
    return nymph::cli::report_failure("", "usage", e.what(), true, nymph::cli::kExitUsage);
  }
  try {
    return run_verb();
  } catch (const std::exception& e) {
    return nymph::cli::report_failure("", "internal", e.what(), json_requested);
  }
}
