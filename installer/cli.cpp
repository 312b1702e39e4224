#include "installer/cli.hpp"

#include <limits.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>

#include "agent/manager_lease.hpp"
#include "common/cli_json.hpp"
#include "installer/install.hpp"
#include "installer/process.hpp"
#include "slurm/commands.hpp"
#include "installer/launches.hpp"

namespace nymph::installer {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

fs::path home_dir() {
  if (const char* h = std::getenv("HOME"); h && h[0] == '/') return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && pw->pw_dir[0] == '/') return pw->pw_dir;
  return {};
}

std::string short_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

// ClusterName from `scontrol show config` (bounded to 10 s), or "" when scontrol is missing, fails or names none.
std::string scontrol_cluster() {
  auto r = run_bounded(slurm::show_config_argv("scontrol"), {}, std::chrono::seconds(10));
  if (!r || r->exit_code != 0) return {};
  return agent::parse_cluster_name(r->out).value_or("");
}

// The facts of this process: home, short host name, /proc/self/exe, and for a manager (`with_cluster`) the
// user and the cluster.
Result<HostFacts> this_host(bool with_cluster) {
  HostFacts h{.home = home_dir(), .hostname = short_hostname()};
  if (with_cluster) h.cluster = scontrol_cluster();
  h.user = agent::current_user_name();
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && x[0] == '/') h.data_home = x;
  if (h.home.empty()) return fail("cannot find the home directory (HOME is not set to an absolute path)");
  std::error_code ec;
  h.nymph_exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fail("cannot find this nymph binary via /proc/self/exe: " + ec.message());
  return h;
}

fs::path state_dir_or_default(const std::string& given) {
  if (given.empty()) return default_state_dir(home_dir());
  return fs::absolute(given).lexically_normal();
}


std::string string_list(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += "  " + i + "\n";
  return s;
}

class CommandsImpl final : public Commands {
 public:
  explicit CommandsImpl(CLI::App& app) {
    add_install(app);
    add_launches(app);
    add_kill(app);
  }

  std::optional<int> run() override {
    if (*install_) return run_install_command();
    if (*prune_) return run_prune();
    if (*launches_) return run_launches();
    if (*kill_) return run_kill();
    return std::nullopt;
  }

 private:
  void add_install(CLI::App& app) {
    install_ = app.add_subcommand("install", "Create a launch and start a detached daemon (or an sbatch job)");
    auto* s = install_;
    s->add_option("--server", opts_.server, "Control plane URL (https://..., or http:// to loopback)")->required();
    auto* file = s->add_option("--token-file", opts_.token_file, "File holding the worker token (copied)");
    auto* in = s->add_flag("--token-stdin", opts_.token_stdin, "Read the worker token from standard input");
    file->excludes(in);
    s->add_option("--label", opts_.label, "Worker label prefix (default: short host name)");
    s->add_option("--tag", opts_.tags, "Tag key=value (repeatable)")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    auto* slurm = s->add_flag("--slurm", opts_.slurm, "Run the daemon inside a Slurm allocation (sbatch)");
    s->add_option("--slurm-partition", opts_.slurm_partition, "Slurm partition(s)")->needs(slurm);
    s->add_option("--slurm-time", opts_.slurm_time, "Slurm time limit (e.g. 1-00:00:00)")->needs(slurm);
    s->add_option("--slurm-account", opts_.slurm_account, "Slurm account")->needs(slurm);
    s->add_option("--slurm-qos", opts_.slurm_qos, "Slurm QOS")->needs(slurm);
    s->add_option("--slurm-signal-lead", opts_.slurm_signal_lead,
                  "Seconds before the walltime at which the daemon gets SIGUSR1 and drains")
        ->capture_default_str()
        ->needs(slurm);
    auto* keep = s->add_flag("--keep", opts_.keep,
                             "A kept launch: each allocation submits its successor before its walltime (needs "
                             "--slurm-time; docs/install.md \"Kept launches\")")
                     ->needs(slurm);
    s->add_option("--keep-min", opts_.keep_min, "Generations the chain runs whatever the demand (default 1)")
        ->needs(keep);
    s->add_option("--keep-max", opts_.keep_max, "The chain ends after this many generations (default 0: no limit)")
        ->needs(keep);
    s->add_option("--keep-idle", opts_.keep_idle,
                  "Past --keep-min, no successor once a generation had no job this long (default 30m)")
        ->needs(keep);
    s->add_option("--idle-exit", opts_.idle_exit, "Exit after this long without jobs (e.g. 30m)");
    s->add_option("--training-profile", opts_.training_profiles,
                  "Approved training profile NAME=/absolute/script (repeatable; checked as `nymph run` checks it)")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    s->add_option("--state-dir", opts_.state_dir, "State directory (default ~/.local/share/nymph)");
    add_site_options(s);
    s->add_option("--cluster", opts_.cluster,
                  "Cluster of the manager identity <user>@<cluster> (default: ClusterName from `scontrol show config`, "
                  "else the short host name)");
    s->add_flag("--replace", opts_.replace,
                "Take over from the running manager of this identity (it drains and hands over its Slurm jobs)");
    s->add_flag("--json", opts_.json, "Print one JSON object");
    s->add_flag("--dry-run", opts_.dry_run, "Print what would be written and run; change nothing");
  }

  // The site configuration `nymph install` writes into config.toml (docs/install.md "Site configuration").
  void add_site_options(CLI::App* s) {
    s->add_option("--account", opts_.account, "Slurm account for every sbatch the daemon submits ([runners.slurm])");
    s->add_option("--qos", opts_.qos, "Slurm QOS for every sbatch the daemon submits ([runners.slurm])");
    s->add_option("--partition", opts_.partition, "Default Slurm partition of the daemon's jobs ([runners.slurm])");
    s->add_option("--launch-dir", opts_.launch_dir,
                  "Absolute directory for Slurm job directories, on a filesystem compute nodes see (writable)");
    s->add_flag("--profiles-only", opts_.profiles_only,
                "Run approved training profiles only: refuse argv and command jobs");
    s->add_option("--max-jobs", opts_.max_jobs, "Slurm jobs tracked at once (1-100000)");
    s->add_option("--max-poll-duration", opts_.max_poll_duration,
                  "Cancel a Slurm job running longer than this (e.g. 24h)");
    s->add_option("--drain-grace", opts_.drain_grace, "How long running jobs may finish after SIGTERM (e.g. 60s)");
    s->add_option("--config-fragment", opts_.config_fragment,
                  "TOML file merged into config.toml key by key (a key an option also sets is an error)");
  }

  void add_launches(CLI::App& app) {
    launches_ = app.add_subcommand("launches", "List launches of this user");
    launches_->add_flag("--json", launches_json_, "Print one JSON object");
    launches_->add_option("--state-dir", launches_state_dir_, "State directory (default ~/.local/share/nymph)");
    prune_ = launches_->add_subcommand("prune", "Remove the directories and logs of launches that have stopped");
    prune_->fallthrough();
  }

  void add_kill(CLI::App& app) {
    kill_ = app.add_subcommand("kill", "Stop a launch by launch ID, worker label or worker ID (wrk_...)");
    kill_->add_option("target", kill_target_, "Launch ID, worker label or worker ID")->required();
    kill_->add_option("--timeout", kill_timeout_s_, "Seconds to wait for the launch to stop")
        ->capture_default_str()
        ->check(CLI::Range(1, 86400));
    kill_->add_option("--state-dir", kill_state_dir_, "State directory (default ~/.local/share/nymph)");
    kill_->add_flag("--json", kill_json_, "Print one JSON object");
  }

  int run_install_command() {
    auto host = this_host(!opts_.slurm && opts_.cluster.empty());
    if (!host) return cli::report_failure("install", "hostUnknown", host.error().message, opts_.json);
    InstallOptions o = opts_;
    if (!o.state_dir.empty()) o.state_dir = fs::absolute(o.state_dir).lexically_normal().native();
    InstallContext ctx{.host = *host, .token_input = &std::cin};
    UlidGenerator ids;
    auto outcome = run_install(o, ctx, ids);
    if (!outcome) return cli::report_failure("install", "installFailed", outcome.error().message, o.json);
    if (o.json) std::cout << json::serialize(outcome_json(*outcome)) << "\n";
    else std::cout << outcome_text(*outcome);
    return 0;
  }

  ManageContext manage(const std::string& state_dir) {
    return ManageContext{.state_dir = state_dir_or_default(state_dir), .hostname = short_hostname()};
  }

  int run_launches() {
    auto list = list_launches(manage(launches_state_dir_));
    if (launches_json_) std::cout << json::serialize(launches_json(list)) << "\n";
    else std::cout << launches_text(list);
    return 0;
  }

  int run_prune() {
    auto out = prune_launches(manage(launches_state_dir_));
    auto arr = [](const std::vector<std::string>& v) { return json::value_from(v); };
    json::object result{{"removed", arr(out.removed)}, {"kept", arr(out.kept)}, {"errors", arr(out.errors)}};
    if (!out.errors.empty()) {
      if (!launches_json_) {
        std::cout << "removed " << out.removed.size() << " stopped launch(es)\n" << string_list(out.removed);
        if (!out.kept.empty()) std::cout << "kept (not stopped):\n" << string_list(out.kept);
      }
      std::cerr << "could not remove:\n" << string_list(out.errors);
      // With --json still one object: the error, with what was removed and kept beside it.
      return cli::report_failure("launches prune", "pruneIncomplete",
                                 "could not remove " + std::to_string(out.errors.size()) + " item(s): " + out.errors.front(),
                                 launches_json_, cli::kExitFailed, std::move(result));
    }
    if (launches_json_) {
      std::cout << json::serialize(result) << "\n";
    } else {
      std::cout << "removed " << out.removed.size() << " stopped launch(es)\n" << string_list(out.removed);
      if (!out.kept.empty()) std::cout << "kept (not stopped):\n" << string_list(out.kept);
    }
    return 0;
  }

  int run_kill() {
    if (!launch_exists(manage(kill_state_dir_), kill_target_))
      return cli::report_failure("kill", "notFound",
                                 "no launch with ID, worker label or worker ID '" + kill_target_ + "' in " +
                                     (state_dir_or_default(kill_state_dir_) / "launches").string() +
                                     " (see `nymph launches`)",
                                 kill_json_, cli::kExitNotFound);
    auto out = kill_launch(manage(kill_state_dir_), kill_target_, std::chrono::seconds(kill_timeout_s_));
    if (!out) return cli::report_failure("kill", "killFailed", out.error().message, kill_json_);
    const auto& id = out->launch.launch_id;
    std::string reason = out->exit_reason.value_or("(not recorded)");
    json::object result{
        {"launchId", id},
        {"workerLabel", out->launch.record->worker_label},
        {"workerId", out->launch.status && !out->launch.status->worker_id.empty()
                         ? json::value(out->launch.status->worker_id)
                         : json::value(nullptr)},
        {"wasRunning", out->was_running},
        {"stopped", out->stopped},
        {"exitReason", out->exit_reason ? json::value(*out->exit_reason) : json::value(nullptr)}};
    if (!out->stopped)
      return cli::report_failure("kill", "stillRunning",
                                 "launch " + id + " is still running after " + std::to_string(kill_timeout_s_) +
                                     " s (it may still be draining its jobs); see `nymph launches`",
                                 kill_json_, cli::kExitTimedOut, std::move(result));
    if (kill_json_) {
      std::cout << json::serialize(result) << "\n";
    } else if (!out->was_running) {
      std::cout << "launch " << id << " had already stopped; exitReason: " << reason << "\n";
    } else if (out->stopped) {
      std::cout << "stopped launch " << id << " (" << out->launch.record->worker_label << "); exitReason: " << reason
                << "\n";
    }
    return 0;
  }

  InstallOptions opts_;
  CLI::App* install_ = nullptr;
  CLI::App* launches_ = nullptr;
  CLI::App* prune_ = nullptr;
  CLI::App* kill_ = nullptr;
  bool launches_json_ = false;
  std::string launches_state_dir_;
  std::string kill_target_;
  int kill_timeout_s_ = 90;
  std::string kill_state_dir_;
  bool kill_json_ = false;
};

}  // namespace

std::unique_ptr<Commands> register_cli(CLI::App& app) { return std::make_unique<CommandsImpl>(app); }

}  // namespace nymph::installer
