#pragma once
// `nymph install` as pure functions: options and host facts in, a complete plan (paths, file contents, the
// command to start) out. Nothing here touches the filesystem or starts anything, so every rule is unit-tested.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/ulid.hpp"

namespace nymph::installer {

// The command line of `nymph install`, as parsed (not yet validated).
struct InstallOptions {
  std::string server;                     // --server URL (required)
  std::string token_file;                 // --token-file F (copied into the launch)
  bool token_stdin = false;               // --token-stdin
  std::string label;                      // --label; empty: the short host name
  std::vector<std::string> tags;          // --tag k=v, repeatable
  bool slurm = false;                     // --slurm: submit with sbatch instead of starting a detached daemon
  std::string slurm_partition, slurm_time, slurm_account, slurm_qos;
  int slurm_signal_lead = 120;            // --slurm-signal-lead seconds: SIGUSR1 this long before the walltime
  // --keep: a kept launch, a chain of allocations (docs/install.md "Kept launches"); needs --slurm and --slurm-time.
  bool keep = false;
  std::optional<int> keep_min;            // --keep-min N: generations run whatever the demand (default 1)
  std::optional<int> keep_max;            // --keep-max N: the last generation (default 0: no limit)
  std::string keep_idle;                  // --keep-idle D: past --keep-min, no successor after D idle (default 30m)
  std::string idle_exit;                  // --idle-exit duration; empty: off
  std::vector<std::string> training_profiles;  // --training-profile NAME=/abs/script, repeatable
  std::string state_dir;                  // --state-dir; empty: ~/.local/share/nymph
  std::string cluster;                    // --cluster: the cluster of the manager identity; empty: HostFacts::cluster
  bool replace = false;                   // --replace: the running manager of this identity hands over
  bool json = false;                      // --json
  bool dry_run = false;                   // --dry-run
  // Site configuration, written into config.toml (docs/install.md "Site configuration"):
  std::string account, qos, partition;    // --account/--qos/--partition: [runners.slurm] defaults for every sbatch
  std::string launch_dir;                 // --launch-dir: [runners.slurm] launch_dir (absolute, writable)
  bool profiles_only = false;             // --profiles-only: [runners.process] allow_commands = false
  std::optional<int> max_jobs;            // --max-jobs: [runners.slurm] max_jobs
  std::string max_poll_duration;          // --max-poll-duration: [runners.slurm] max_poll_duration
  std::string drain_grace;                // --drain-grace: [worker] drain_grace
  std::string config_fragment;            // --config-fragment FILE: TOML merged into config.toml key by key
};

// A --config-fragment file as read by run_install: its path (as given) and its text.
struct ConfigFragment {
  std::string path;
  std::string text;
};

// What the site options and the fragment put into config.toml (shown by --json and --dry-run).
struct SiteConfig {
  std::string account, qos, partition;    // empty: not set
  std::string launch_dir;
  bool profiles_only = false;
  std::optional<int> max_jobs;
  std::string max_poll_duration, drain_grace;  // normalised ("90s"); empty: not set
  std::string config_fragment;            // the fragment's path; empty: none
  std::vector<std::string> fragment_keys; // the dotted keys the fragment added ("runners.slurm.poll_interval")
};

// What the plan needs to know about the machine and the running binary.
struct HostFacts {
  std::filesystem::path home;             // the user's home directory (absolute)
  std::string hostname;                   // the short host name (default label)
  std::filesystem::path nymph_exe;        // absolute path of the nymph binary the launch runs
  std::string cluster;                    // ClusterName from `scontrol show config`; empty: the host name is used
  std::string user;                       // the unix user (the identity is <user>@<cluster>)
  std::filesystem::path data_home;        // $XDG_DATA_HOME when set to an absolute path, else empty
};

enum class LaunchMode { local, slurm };

// Everything `nymph install` will write and run, fully validated.
struct InstallPlan {
  std::string launch_id;                  // the ULID
  std::string worker_label;               // "<label>-<ULID>"
  LaunchMode mode = LaunchMode::local;
  std::string server;
  std::filesystem::path state_dir;        // <state-dir>
  std::filesystem::path launch_dir;       // <state-dir>/launches/<ULID> (0700)
  std::filesystem::path config_path;      // <launch_dir>/config.toml (0600)
  std::filesystem::path log_path;         // ~/.local/share/nymph-<ULID>.log
  // The training profiles of config_toml (from --training-profile and the fragment): name, script.
  std::vector<std::pair<std::string, std::string>> profiles;
  std::string cluster;                    // local: the manager identity's cluster ([manager] cluster)
  std::string identity;                   // local: "<user>@<cluster>"
  std::filesystem::path manager_state_dir;// local: [manager] state_dir: <state-dir>/managers/<cluster> (default
                                          // state dir: $XDG_DATA_HOME/nymph/managers/<cluster> when XDG_DATA_HOME is set)
  SiteConfig site;                        // the site configuration in config_toml
  std::string config_toml;                // content of config.toml; passes agent::parse_config
  std::vector<std::string> daemon_argv;   // <nymph> run --config <config_path> [--replace]
  std::string job_name;                   // slurm: lakeshore-nymph-<ULID>
  // slurm: the script given to `sbatch --parsable` on stdin; for a kept launch, <launch_dir>/chain.sbatch, which
  // every generation is submitted from with its generation as the argument (`sbatch --parsable chain.sbatch 2`).
  std::string sbatch_script;
  bool keep = false;                      // slurm: a kept launch ([chain] in config.toml)
  std::filesystem::path chain_script;     // keep: <launch_dir>/chain.sbatch
};

// Name of the files inside a launch directory.
inline constexpr const char* kConfigFile = "config.toml";
inline constexpr const char* kTokenFile = "token";
inline constexpr const char* kLaunchFile = "launch.json";
inline constexpr const char* kStatusFile = "status.json";

// The default state directory: <home>/.local/share/nymph.
std::filesystem::path default_state_dir(const std::filesystem::path& home);

// The log file of a launch: <home>/.local/share/nymph-<ULID>.log.
std::filesystem::path log_path_for(const std::filesystem::path& home, const std::string& launch_id);

// Validates every option and builds the plan for launch `id`. Hostile or malformed values (control characters,
// #SBATCH injection, shell metacharacters in paths that go into the script, unknown URL schemes, duplicate
// tags...) give an Error that names the option; never throws. Does not look at the token or the filesystem.
// The site options are checked with the grammars `nymph run` uses (the runConfig.slurm option grammar,
// durations, ranges); `fragment` (the text of --config-fragment) is merged into the generated config key by
// key: a key nymph install writes itself is a conflict (an Error naming the key and the flag that sets it),
// except [log] level, which the fragment may change. The result must pass agent::parse_config, else an Error.
Result<InstallPlan> make_install_plan(const InstallOptions& options, const HostFacts& host, const Ulid& id,
                                      const std::optional<ConfigFragment>& fragment = std::nullopt);

// Checks a token read from a file or standard input and returns it without surrounding whitespace: 1 to 4096
// printable ASCII characters (0x21-0x7e), the same rule the daemon applies. The Error never contains the token.
Result<std::string> check_token(std::string_view raw, std::string_view source);

// Quotes `word` for a POSIX shell: unchanged when it only holds safe characters, else in single quotes.
std::string shell_quote(std::string_view word);

// Joins argv into one shell-quoted command line (for printing and for the sbatch script).
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace nymph::installer
