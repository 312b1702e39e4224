#pragma once
// The admin CLI of nymph-control (submit, jobs, job, logs, cancel, workers, kill, drain, token create).
// Each command returns the process exit status and prints errors to stderr. Tokens are read from a file
// (--token-file, NYMPH_CONTROL_TOKEN_FILE or the config file), never taken from the command line.
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace nymph::control {

// Where the admin commands send their requests. Resolution order for each value: flag, environment
// (NYMPH_CONTROL_URL, NYMPH_CONTROL_TOKEN_FILE, NYMPH_CONTROL_CA_FILE), then the TOML config file
// (--config, else $XDG_CONFIG_HOME/nymph/control.toml or ~/.config/nymph/control.toml) with keys
// url, token_file, ca_file. The URL defaults to http://127.0.0.1:8470.
struct AdminOptions {
  std::optional<std::string> server;
  std::optional<std::string> token_file;
  std::optional<std::string> ca_file;
  std::optional<std::string> config;
  bool json = false;  // machine output
};

struct AdminTarget {
  std::string url;
  std::string token;
  std::optional<std::string> ca_file;
};

// Resolves the target as described on AdminOptions and reads the token file (whitespace trimmed).
// Returns an Error naming the missing setting or unreadable file.
Result<AdminTarget> resolve_target(const AdminOptions& o);

struct SubmitOptions {
  std::string runner = "process";
  std::string kind = "command";
  std::vector<std::string> argv;
  std::optional<std::string> command;
  std::vector<std::string> env;           // K=V
  std::optional<std::string> timeout;     // duration text
  std::vector<std::string> require_tags;  // k=v
  int max_attempts = 2;
  std::vector<std::string> slurm_options; // k=v
  std::optional<std::string> payload;     // JSON object
  bool wait = false;                      // exit with the job's exit status
  bool follow = false;                    // stream logs while it runs (implies wait)
};

// Exit status for a finished job under --wait: 0 succeeded; the job's exit code when it failed with one
// (128+signal when killed by a signal, 1 otherwise); 130 cancelled; 1 lost.
int exit_status_of_job(const std::string& state, std::optional<int> exit_code, std::optional<int> signal);

int cmd_submit(const AdminOptions& o, const SubmitOptions& s);
int cmd_jobs(const AdminOptions& o, const std::optional<std::string>& state, int limit);
int cmd_job(const AdminOptions& o, const std::string& id);
int cmd_logs(const AdminOptions& o, const std::string& id, const std::string& stream, bool follow,
             std::optional<int> attempt);
int cmd_cancel(const AdminOptions& o, const std::string& id);
int cmd_workers(const AdminOptions& o);
int cmd_directive(const AdminOptions& o, const std::string& worker_id, const std::string& which);  // kill | drain
// Creates a token directly in the database file and prints it (only it) on stdout.
int cmd_token_create(const std::string& db_path, const std::string& role, const std::string& name);

}  // namespace nymph::control
