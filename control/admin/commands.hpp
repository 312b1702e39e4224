#pragma once
// The admin commands of nymph-control (submit, jobs, job, logs, cancel, workers, kill, drain, purge,
// token create|list|revoke),
// called by its main(). Each returns the process exit status and prints errors to stderr. Where requests go
// and with which token: control/admin/target.hpp.
#include <optional>
#include <string>
#include <vector>

#include "control/admin/target.hpp"
#include "protocol/types.hpp"

namespace nymph::control::admin {

// What `submit` sends and how it waits.
struct SubmitOptions {
  std::string runner;  // empty: chosen by the server from the kind (training: slurm where possible)
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

// Submits a job and prints its id (or the job as JSON); with --wait/--follow waits for it (streaming its
// logs under --follow) and returns exit_status_of_job.
int cmd_submit(const AdminOptions& o, const SubmitOptions& s);
// Lists up to `limit` jobs, newest first, only those in `state` when given, following the server's pages (the
// JSON output is one {"jobs": [...]} without a nextCursor).
int cmd_jobs(const AdminOptions& o, const std::optional<std::string>& state, int limit);
// Shows one job with its attempts and events.
int cmd_job(const AdminOptions& o, const std::string& id);
// Prints a job's `stream` (of `attempt`, default the current one) as raw bytes; with `follow` until the job
// is final.
int cmd_logs(const AdminOptions& o, const std::string& id, protocol::LogStream stream, bool follow,
             std::optional<int> attempt);
// Cancels a job and prints its new state.
int cmd_cancel(const AdminOptions& o, const std::string& id);
// Lists every worker, following the server's pages (the JSON output is one {"workers": [...]}).
int cmd_workers(const AdminOptions& o);
// Asks the server to delete now the finished jobs (with their logs) and the gone or stale workers older than
// `older_than` (duration text; absent: the server's retention) and prints how many it deleted.
int cmd_purge(const AdminOptions& o, const std::optional<std::string>& older_than);
// Sends the directive `which` ("kill" or "drain") to a worker.
int cmd_directive(const AdminOptions& o, const std::string& worker_id, const std::string& which);
// What `token create` makes.
struct TokenOptions {
  std::string db_path;
  std::string role;
  std::string name;
  std::vector<std::string> tags;     // scope: k=v every worker must carry (agent tokens)
  std::vector<std::string> runners;  // scope: the only runners its workers may advertise (agent tokens)
};

// Creates a token directly in the database file (no server needed: the first admin token comes this way) and
// prints it (only it) on stdout.
int cmd_token_create(const TokenOptions& t);
// Lists the tokens through the server: id, name, role, scope, created, last used, revoked; never a secret.
int cmd_token_list(const AdminOptions& o);
// Revokes every token named `selector` (or the one with that id) through the server, which refuses them from
// the next request on and ends the workers registered with them.
int cmd_token_revoke(const AdminOptions& o, const std::string& selector);

}  // namespace nymph::control::admin
