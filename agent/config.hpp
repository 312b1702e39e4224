#pragma once
// Configuration of `nymph run`: a sectioned TOML file (docs/config.md documents every key).
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace nymph::agent {

using std::chrono::milliseconds;

// [server]
struct ServerConfig {
  std::string url;                       // control plane base URL, e.g. https://cp.example.org
  std::filesystem::path token_file = "token";
  std::optional<std::filesystem::path> ca_file;
  milliseconds poll_timeout{30'000};     // how long a held poll may wait (the server's value wins if shorter)
  bool allow_insecure_http = false;      // plain http:// to a non-loopback host (the only way around the rule)
};

// The longest [worker] stop_timeout: systemd's default stop timeout (90 s) and Slurm's default KillWait (30 s)
// leave room for it and the last deliveries.
inline constexpr milliseconds kMaxStopTimeout{35'000};

// [worker]
struct WorkerConfig {
  std::string label;                     // default: short host name
  std::string launch_id;                 // ULID of the launch; default: generated at start
  std::map<std::string, std::string> tags;
  std::filesystem::path work_dir = "work";
  int max_process_jobs = 4;
  std::optional<milliseconds> idle_exit; // exit with exitReason idle after this long without jobs
  milliseconds drain_grace{60'000};      // how long running process jobs may finish after SIGTERM
  milliseconds stop_timeout{30'000};     // a stop (SIGTERM, kill, walltime) exits within this (1-35 s)
  // Inside an allocation: the worker takes no new work and drains this long before the allocation ends (0-24 h).
  milliseconds walltime_lead{120'000};
};

// [runners.process]
struct ProcessSection {
  bool enabled = true;
  bool allow_commands = true;            // `command` jobs (run by /bin/sh -c); false = argv and profiles only
  milliseconds kill_grace{10'000};
  bool keep_work_dirs = false;
};

// [runners.slurm]
struct SlurmSection {
  std::string enabled = "auto";          // auto | true | false
  milliseconds poll_interval{10'000};      // the quick cycle: after a submission, a cancel, an exit record, a change
  milliseconds poll_interval_max{60'000};  // the ceiling quiet cycles back off to (≥ poll_interval)
  int rpc_budget_per_minute = 60;          // slurmctld RPCs in any minute, never exceeded
  milliseconds exit_scan_interval{2'000};  // how often <launch_dir>/exits is listed (no RPC); 0: never
  std::string account, qos, partition;
  std::filesystem::path launch_dir;      // default: <manager state_dir>/slurm (inside an allocation: the working directory)
  int max_jobs = 100;
  int max_array_tasks = 1000;              // most attempts of one shape in one sbatch (a job array); 1: one each
  int max_concurrent_commands = 4;         // Slurm commands (sbatch, squeue, ...) running at once
  milliseconds max_poll_duration{24 * 3'600'000};
  milliseconds max_queue_duration{7 * 24 * 3'600'000};
  milliseconds command_timeout{30'000};
  std::string sbatch = "sbatch", squeue = "squeue", sacct = "sacct", scancel = "scancel";
  bool keep_job_dirs = false;
};

// [manager]: the manager identity (docs/config.md). Only a daemon outside a Slurm allocation is a manager.
struct ManagerSection {
  std::string cluster;                   // default: ClusterName from `scontrol show config`, else the short host name
  std::filesystem::path state_dir;       // default: $XDG_DATA_HOME (or ~/.local/share)/nymph/managers/<cluster>
  milliseconds heartbeat_interval{10'000};  // how often manager.json is rewritten
};

// [chain]: a kept launch (`nymph install --slurm --keep`, docs/install.md "Kept launches"). Its presence makes the
// daemon, inside an allocation, submit the next generation of the launch before its own walltime.
struct ChainSection {
  bool keep = false;                     // [chain] is present
  std::filesystem::path script = "chain.sbatch";  // the launch's sbatch script (relative: to the working directory)
  int min_generations = 1;               // generations the chain runs whatever the demand
  int max_generations = 0;               // the last generation; 0: no limit
  milliseconds idle_end{30 * 60'000};    // past min_generations: no successor once this generation was idle this long
  milliseconds successor_floor{5 * 60'000};     // the successor is submitted at least this long before the serving
  milliseconds successor_ceiling{2 * 3'600'000};  // end, at most this long (twice the measured queue wait between)
  std::vector<milliseconds> submit_backoff{milliseconds(60'000), milliseconds(300'000), milliseconds(900'000),
                                           milliseconds(3'600'000)};  // after the 1st, 2nd... failed submission
  int pause_after = 4;                   // failed submissions in a row that pause the chain
};

// One entry of [profiles]: name = "/abs/script" or name = { script = "...", parameters = [...], max_input_bytes = N }.
struct ProfileConfig {
  std::string name;
  std::filesystem::path script;
  std::vector<std::string> allowed_parameters;  // empty: any name
  std::size_t max_input_bytes = 64 * 1024;
};

// [log]
struct LogConfig {
  std::string level = "info";
  std::filesystem::path file;            // empty: stderr
};

struct AgentConfig {
  ServerConfig server;
  WorkerConfig worker;
  ProcessSection process;
  SlurmSection slurm;
  ManagerSection manager;
  ChainSection chain;
  std::vector<ProfileConfig> profiles;
  LogConfig log;
};

// Parses TOML `text` (named `source` in messages). Unknown keys, wrong types and bad values are errors that
// name the key and its line, as is text check_toml_nesting refuses and a NUL byte in any string or key. Does not
// touch the filesystem. Never throws.
Result<AgentConfig> parse_config(std::string_view text, const std::string& source);

// Reads and parses the file at `path`: a regular file of at most kMaxConfigFileBytes, 1 MiB (a FIFO, a device such as
// /dev/zero or a huge file is refused at once, naming it). Never throws.
Result<AgentConfig> load_config(const std::filesystem::path& path);

// Checks [server] url under the control-plane URL rule (http::parse_server_url): https:// anywhere, plain
// http:// only to a loopback address unless allow_insecure_http = true. The Error names the URL.
Result<void> check_server_url(const ServerConfig& server);

// Reads the token: `path` must be a regular file owned by this user with no group/other permission bits
// and must hold a non-empty token (surrounding whitespace is trimmed). Errors say why and how to fix it,
// and never contain the token.
Result<std::string> read_token_file(const std::filesystem::path& path);

}  // namespace nymph::agent
