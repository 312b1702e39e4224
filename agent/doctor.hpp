#pragma once
// `nymph doctor`: what a person runs first on a new login node. Each check has a verdict (ok / warn / fail),
// what was found, and the fix. Pure pieces (parsers, verdict rules, rendering) are plain functions the unit
// tests call; the checks that run Slurm commands or talk to the control plane are coroutines on the caller's
// io_context (commands through a slurm::CommandRunner with a timeout, HTTP through nymph::http::Client), so
// nothing blocks it for longer than a stat, a statvfs or a small file read. The Slurm command lines and their
// parsers are slurm/'s (slurm/commands.hpp).
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include "agent/config.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::agent::doctor {

enum class Verdict { ok, warn, fail };

// "ok", "warn", "fail".
std::string_view to_string(Verdict v);

// One check's outcome. `name` is a stable identifier ("slurm.sbatch", "control.reachable", ...).
struct Check {
  std::string name;
  Verdict verdict = Verdict::ok;
  std::string detail;  // what was found, for a person
  std::string fix;     // what to do about it; empty when nothing needs doing
};

// Every check, in the order they ran.
struct Report {
  std::vector<Check> checks;

  // True when at least one check failed (the exit status of `nymph doctor` is then 1).
  bool failed() const;
  // The check called `name`, or nullptr.
  const Check* find(std::string_view name) const;
};

// What the checks look at. Everything comes from here, so tests can point them at temporary directories.
struct Inputs {
  std::optional<AgentConfig> config;        // nullopt: no configuration (control-plane checks are skipped)
  std::string config_error;                 // set when a configuration file was given but is invalid
  std::string config_source;                // the file, for messages
  std::string path_env;                     // $PATH used to find the Slurm commands
  std::string user;                         // the user name Slurm sees
  std::filesystem::path state_dir;          // where `nymph install` keeps launches (free-disk check)
  std::filesystem::path working_dir;        // relative config paths resolve against it (as for `nymph run`)
  // A manager's state directory ([manager] state_dir, else the default for [manager] cluster): its slurm/ holds
  // the Slurm job directories when [runners.slurm] launch_dir is not set. Empty: unknown (no home directory).
  std::filesystem::path manager_state_dir;
  std::filesystem::path logind_root = "/";  // prefix of /etc/systemd/logind.conf(.d) and friends
  std::filesystem::path linger_dir = "/var/lib/systemd/linger";
  std::filesystem::path systemd_runtime_dir = "/run/systemd/system";  // exists iff systemd is PID 1
  std::chrono::milliseconds command_timeout{10'000};  // each Slurm command
  std::chrono::milliseconds http_timeout{10'000};     // GET /healthz
  bool deep = false;  // also submit a held job and cancel it (slurm.cancel)
  bool in_allocation = false;  // $SLURM_JOB_ID is set: this host is a compute node running an allocation
};

// --- pure pieces -------------------------------------------------------------------------------------------

// Value of KillUserProcesses= in the [Login] section of one logind.conf text; nullopt when not set there.
std::optional<bool> parse_kill_user_processes(std::string_view conf_text);

// The effective KillUserProcesses: /etc/systemd/logind.conf, then the drop-ins of
// {/usr/lib,/usr/local/lib,/run,/etc}/systemd/logind.conf.d/*.conf in lexical file-name order (later wins),
// all under `root`. nullopt when no file sets it (the distribution default, "no" on Debian/RHEL/SUSE).
std::optional<bool> effective_kill_user_processes(const std::filesystem::path& root);

// "Do processes survive logout": KillUserProcesses=yes kills what a login session started, except services
// of a lingering user's systemd manager.
Check logout_check(std::optional<bool> kill_user_processes, bool lingering, bool systemd);

// "Does the manager come back after a reboot": linger lets the systemd user unit start at boot.
Check linger_check(bool lingering, bool systemd, const std::string& user);

// Parses an HTTP Date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"). nullopt for anything else, and for a
// time system_clock cannot hold (nymph::time_from_ms).
std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text);

// Clock skew between this host and the server's Date header, taken at the middle of the exchange.
// ok within 5 s, warn within 60 s, fail beyond; warn when the server sent no (valid) Date.
Check clock_skew_check(std::optional<std::string> date_header, std::chrono::system_clock::time_point sent,
                       std::chrono::system_clock::time_point received);

// Free space for the state directory: fail below 100 MiB, warn below 1 GiB. `available` is nullopt when
// statvfs failed (warn).
Check disk_check(const std::filesystem::path& dir, std::optional<std::uintmax_t> available);

// Token file: read_token_file's rules (regular file, owned by this user, mode 0600, non-empty).
Check token_check(const std::filesystem::path& token_file);

// Creates and removes a temporary file in `dir` (the honest test on NFS/root-squash, where access(2) lies).
Check launch_dir_check(const std::filesystem::path& dir);

// The Slurm job directory check for `in`: [runners.slurm] launch_dir when set, else <manager_state_dir>/slurm
// (created by the manager at start: its nearest existing ancestor must be writable), else the working directory;
// without a configuration, the state directory `nymph install` would use.
Check launch_dir_for(const Inputs& in);

// One JSON object: {"ok": bool, "checks": [{"name","verdict","detail","fix"}...]}.
boost::json::value to_json(const Report& r);

// Aligned text for a terminal, one line per check and an indented "fix:" line under each non-ok one.
std::string to_text(const Report& r);

// The partition sbatch --test-only names ("... on nodes n1 in partition debug"), or "" when it names none.
std::string partition_in_test_only(std::string_view text);

// "slurm.partition" and "slurm.submit" from the answer of `sbatch --test-only` for a one-minute job carrying
// [runners.slurm] partition, account and qos: a default partition exists (or the configured one is accepted),
// and this user may submit that job. A refusal that talks about the partition fails slurm.partition.
// "chain.successor": whether a kept launch (`nymph install --slurm --keep`) can renew itself from here; its
// generations submit their successors from their compute node, so only inside an allocation (in.in_allocation)
// does the answer decide it (fail when sbatch refuses); on a login node it says to check on a compute node, and
// whether a manager here could submit for compute nodes that have no sbatch (warn when sbatch refuses here).
std::vector<Check> submit_checks(const Inputs& in, const Result<slurm::CommandResult>& test_only);

// --- checks with I/O ---------------------------------------------------------------------------------------

// sbatch/squeue/sacct/scancel found and answering (`--version`), the controller answering (squeue for the
// user), accounting (sacct), the Slurm user and the default account (sacctmgr), a default partition and the right
// to submit (`sbatch --test-only`, submit_checks), and with in.deep a held job submitted and cancelled
// ("slurm.cancel": sbatch --parsable --hold, then scancel). Every command is bounded by
// in.command_timeout. When [runners.slurm] enabled = false, one ok check says so.
boost::asio::awaitable<std::vector<Check>> slurm_checks(const Inputs& in, slurm::CommandRunner& commands);

// Control-plane reachability (GET /healthz), TLS trust (https), clock skew (Date header). Needs in.config.
boost::asio::awaitable<std::vector<Check>> control_plane_checks(const Inputs& in);

// Every check: configuration, Slurm, launch_dir, logout/linger, control plane, token, disk. Never throws for
// an expected failure (each becomes a failing check).
boost::asio::awaitable<Report> run_all(Inputs in, slurm::CommandRunner& commands);

}  // namespace nymph::agent::doctor
