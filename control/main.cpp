// nymph-control: the reference control plane and its admin CLI. Composition root only.
#include <iostream>

#include <CLI/CLI.hpp>

#include "common/duration.hpp"
#include "common/logging.hpp"
#include "control/admin/commands.hpp"
#include "control/server.hpp"
#include "nymph/version.hpp"

namespace {

// CLI11 validator for durations ("500ms", "30s").
struct DurationValidator : CLI::Validator {
  DurationValidator() {
    name_ = "DURATION";
    func_ = [](const std::string& s) {
      auto d = nymph::parse_duration(s);
      return d ? std::string() : d.error().message;
    };
  }
};

std::chrono::milliseconds duration_or_throw(const std::string& s) { return nymph::parse_duration(s).value(); }

// RUNNER=DURATION of --runner-lease-ttl: the runner and its lease TTL, or the reason it is not one.
nymph::Result<std::pair<std::string, std::chrono::milliseconds>> runner_ttl(const std::string& s) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return nymph::fail("expected RUNNER=DURATION, e.g. slurm=30m");
  auto d = nymph::parse_duration(s.substr(eq + 1));
  if (!d) return d.error();
  if (d->count() <= 0) return nymph::fail("a lease TTL must be longer than 0");
  return std::pair{s.substr(0, eq), *d};
}

// A retention: a duration, or "never" (0: keep everything).
constexpr const char* kNever = "never";
CLI::Validator retention_validator() {
  return CLI::Validator(
      [](std::string& s) {
        if (s == kNever) return std::string();
        auto d = nymph::parse_duration(s);
        return d ? std::string() : d.error().message;
      },
      "DURATION|never");
}
std::chrono::milliseconds retention_or_throw(const std::string& s) {
  return s == kNever ? std::chrono::milliseconds(0) : duration_or_throw(s);
}

void add_admin_options(CLI::App* cmd, nymph::control::admin::AdminOptions& o) {
  cmd->add_option("--server", o.server,
                  "Control plane URL: https://, or http:// to a loopback address only (env NYMPH_CONTROL_URL; "
                  "default http://127.0.0.1:8470)");
  cmd->add_option("--token-file", o.token_file, "File holding an admin token (env NYMPH_CONTROL_TOKEN_FILE)");
  cmd->add_option("--ca-file", o.ca_file, "Extra CA bundle for https (env NYMPH_CONTROL_CA_FILE)");
  cmd->add_option("--config", o.config, "TOML config with url, token_file, ca_file (default ~/.config/nymph/control.toml)");
  cmd->add_flag("--json", o.json, "Print JSON instead of a table");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nymph::control;
  using namespace nymph::control::admin;
  CLI::App app{"nymph-control - reference control plane for nymph agents", "nymph-control"};
  app.set_version_flag("--version", std::string("nymph-control ") + nymph::kVersion);
  app.require_subcommand(1);
  DurationValidator duration;

  // serve
  ServerConfig server;
  std::string poll_timeout = "30s", lease_ttl = "90s", stale_after = "60s", head_timeout = "10s", log_level = "info";
  std::string retention = "30d", purge_interval = "1h";
  auto* serve = app.add_subcommand("serve", "Serve the /v1 protocol over HTTP(S) with a SQLite database");
  serve->add_option("--listen", server.listen, "HOST:PORT to listen on (port 0: any)")->default_val("127.0.0.1:8470");
  serve->add_option("--db", server.db_path, "SQLite database file (created if missing)")->required();
  serve->add_option("--tls-cert", server.tls_cert, "PEM certificate chain (enables HTTPS)");
  serve->add_option("--tls-key", server.tls_key, "PEM private key");
  serve->add_flag("--allow-insecure-remote", server.allow_insecure_remote, "Allow plain HTTP on a non-loopback address");
  serve->add_option("--poll-timeout", poll_timeout, "How long a poll is held")->check(duration)->default_val("30s");
  serve->add_option("--lease-ttl", lease_ttl, "Lease lifetime without renewal")->check(duration)->default_val("90s");
  std::vector<std::string> runner_lease_ttls;
  serve
      ->add_option("--runner-lease-ttl", runner_lease_ttls,
                   "RUNNER=DURATION: the lease lifetime of that runner's jobs, e.g. slurm=30m (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator(
          [](std::string& s) {
            auto r = runner_ttl(s);
            return r ? std::string() : r.error().message;
          },
          "RUNNER=DURATION"));
  serve->add_option("--stale-after", stale_after, "No contact for this long: worker stale")->check(duration)->default_val("60s");
  serve->add_option("--max-log-bytes-per-job", server.service.limits.max_log_bytes_per_job,
                    "Log bytes kept per job, both streams of all its attempts (e.g. 512MiB); more get 413")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  serve->add_option("--retention", retention,
                    "Delete finished jobs (with their logs) and gone or stale workers older than this; 0 or never: keep")
      ->check(retention_validator())
      ->default_val("30d");
  serve->add_option("--purge-interval", purge_interval, "How often to delete what is past the retention")
      ->check(duration)
      ->default_val("1h");
  serve->add_option("--max-connections", server.max_connections,
                    "Open connections at most (default: the open-files limit less 64, at most 16384)");
  serve->add_option("--max-body-memory", server.max_body_memory,
                    "Bytes of request bodies read at once, e.g. 64MiB (at least the largest body, 8MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("64MiB");
  serve->add_option("--head-timeout", head_timeout, "A new connection's time to send its first request head")
      ->check(duration)
      ->default_val("10s");
  serve->add_option("--log-level", log_level, "trace, debug, info, warn, error, off")->default_val("info");

  AdminOptions admin;
  auto repeatable = [](CLI::Option* o) { o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll); };

  // token create, list, revoke
  TokenOptions new_token;
  std::string token_selector;
  auto* token = app.add_subcommand("token", "API tokens: create (in the database), list and revoke (through the server)");
  token->require_subcommand(1);
  auto* token_create = token->add_subcommand("create", "Create a token in the database; prints it once");
  token_create->add_option("--db", new_token.db_path, "SQLite database file")->required();
  token_create->add_option("--role", new_token.role, "agent or admin")->required()->check(CLI::IsMember({"agent", "admin"}));
  token_create->add_option("--name", new_token.name, "A name to list and revoke it by");
  repeatable(token_create->add_option("--tag", new_token.tags, "Agent tokens: workers must carry tag k=v (repeatable)"));
  repeatable(token_create->add_option("--runner", new_token.runners, "Agent tokens: the only runners its workers may advertise (repeatable)"));
  auto* token_list = token->add_subcommand("list", "List tokens (never their secrets)");
  add_admin_options(token_list, admin);
  auto* token_revoke = token->add_subcommand("revoke", "Revoke tokens by name or id; their workers end at once");
  add_admin_options(token_revoke, admin);
  token_revoke->add_option("NAME_OR_ID", token_selector, "Token name (every token of that name) or id")->required();

  // submit
  SubmitOptions sub;
  auto* submit = app.add_subcommand("submit", "Submit a job (argv after --, or --command)");
  add_admin_options(submit, admin);
  submit->add_option("--runner", sub.runner,
                     "Runner: process or slurm (default: by kind - a training job goes to slurm where a worker with "
                     "Slurm can take it, a command job to process)");
  submit->add_option("--kind", sub.kind, "command or training")->default_val("command")->check(CLI::IsMember({"command", "training"}));
  submit->add_option("--command", sub.command, "Shell command (instead of argv)");
  // CLI11 reads a `--` right after a repeatable option as the end of that option's values, not of all options:
  // without positionals_at_end, `--slurm-option k=v -- prog -c ...` would then parse `-c` as an option of ours.
  submit->positionals_at_end();
  repeatable(submit->add_option("--env", sub.env, "Environment variable K=V (repeatable)"));
  submit->add_option("--timeout", sub.timeout, "Job time limit (e.g. 10m)")->check(duration);
  repeatable(submit->add_option("--require-tag", sub.require_tags, "Only workers with tag k=v (repeatable)"));
  submit->add_option("--max-attempts", sub.max_attempts, "Attempts before the job is lost (1-10)")->default_val(2);
  repeatable(submit->add_option("--slurm-option", sub.slurm_options, "runConfig.slurm k=v (repeatable)"));
  submit->add_option("--payload", sub.payload, "Training payload JSON: {\"profile\":...,\"parameters\":{...}}");
  submit->add_flag("--wait", sub.wait, "Wait for the job and exit with its exit status");
  submit->add_flag("--follow", sub.follow, "Stream the job's stdout/stderr while it runs (implies --wait)");
  submit->add_option("argv", sub.argv, "Program and arguments (after --)");

  // jobs, job, logs, cancel, workers, kill, drain
  std::optional<std::string> jobs_state;
  int jobs_limit = 100;
  auto* jobs = app.add_subcommand("jobs", "List jobs");
  add_admin_options(jobs, admin);
  jobs->add_option("--state", jobs_state, "Only jobs in this state");
  jobs->add_option("--limit", jobs_limit, "At most this many (newest first)")->default_val(100);

  std::string id;
  auto* job = app.add_subcommand("job", "Show one job with its attempts and events");
  add_admin_options(job, admin);
  job->add_option("ID", id, "Job id")->required();

  std::string stream = "stdout";
  bool follow = false;
  std::optional<int> attempt;
  auto* logs = app.add_subcommand("logs", "Print (or follow) a job's logs as raw bytes");
  add_admin_options(logs, admin);
  logs->add_option("ID", id, "Job id")->required();
  logs->add_option("--stream", stream, "stdout or stderr")->default_val("stdout")->check(CLI::IsMember({"stdout", "stderr"}));
  logs->add_option("--attempt", attempt, "Attempt number (default: the current one)");
  logs->add_flag("--follow,-f", follow, "Keep printing until the job is final");

  auto* cancel = app.add_subcommand("cancel", "Cancel a job");
  add_admin_options(cancel, admin);
  cancel->add_option("ID", id, "Job id")->required();

  auto* workers = app.add_subcommand("workers", "List workers");
  add_admin_options(workers, admin);

  auto* kill = app.add_subcommand("kill", "Tell a worker to stop (kill directive)");
  add_admin_options(kill, admin);
  kill->add_option("WORKER_ID", id, "Worker id")->required();

  auto* drain = app.add_subcommand("drain", "Tell a worker to take no new jobs and exit when idle");
  add_admin_options(drain, admin);
  drain->add_option("WORKER_ID", id, "Worker id")->required();

  std::optional<std::string> older_than;
  auto* purge = app.add_subcommand("purge", "Delete finished jobs (with their logs) and gone or stale workers now");
  add_admin_options(purge, admin);
  purge->add_option("--older-than", older_than, "Only what is older than this (default: the server's --retention)")
      ->check(duration);

  CLI11_PARSE(app, argc, argv);

  try {
    if (*serve) {
      server.service.poll_timeout = duration_or_throw(poll_timeout);
      server.service.lease_ttl = duration_or_throw(lease_ttl);
      for (const auto& s : runner_lease_ttls) {
        auto [runner, ttl] = runner_ttl(s).value();
        server.service.runner_lease_ttl[runner] = ttl;
      }
      server.service.stale_after = duration_or_throw(stale_after);
      server.service.retention = retention_or_throw(retention);
      server.service.purge_interval = duration_or_throw(purge_interval);
      server.head_timeout = duration_or_throw(head_timeout);
      auto log = nymph::make_logger("control", log_level);
      run_server(server, log, [](const std::string& url) { std::cout << "listening on " << url << std::endl; });
      return 0;
    }
    if (*token_create) return cmd_token_create(new_token);
    if (*token_list) return cmd_token_list(admin);
    if (*token_revoke) return cmd_token_revoke(admin, token_selector);
    if (*submit) return cmd_submit(admin, sub);
    if (*jobs) return cmd_jobs(admin, jobs_state, jobs_limit);
    if (*job) return cmd_job(admin, id);
    if (*logs) return cmd_logs(admin, id, *nymph::protocol::parse_log_stream(stream), follow, attempt);
    if (*cancel) return cmd_cancel(admin, id);
    if (*workers) return cmd_workers(admin);
    if (*kill) return cmd_directive(admin, id, "kill");
    if (*drain) return cmd_directive(admin, id, "drain");
    if (*purge) return cmd_purge(admin, older_than);
  } catch (const std::exception& e) {
    std::cerr << "nymph-control: error: " << e.what() << "\n";
    return 1;
  }
  return 2;
}
