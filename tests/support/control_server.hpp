#pragma once
// ControlServer: a real `nymph-control serve` process for tests, on its own temporary directory and database.
//
//   nymph::test::ControlServer cp({.poll_timeout = "500ms", .stale_after = "2s"});
//   // cp.url()              "http://127.0.0.1:PORT"
//   // cp.agent_token()      token text with role agent  (cp.agent_token_file(): the same in a 0600 file)
//   // cp.admin_token()      token text with role admin  (cp.admin_token_file())
//   auto out = cp.admin({"submit", "--wait", "--", "/bin/true"});   // runs the admin CLI against it
//   cp.kill9();    // SIGKILL, as a crash
//   cp.restart();  // the same database, port and knobs; returns once it listens again
//
// Start-up is event-driven: the constructor reads the server's stdout (poll() with a deadline, no sleeps)
// until the "listening on URL" line. The server's stderr goes to log_path() (print it when a test fails).
// The destructor stops the server (SIGTERM, then SIGKILL after a bound) and removes the directory.
// Not copyable or movable; one instance per test. Throws std::runtime_error when the server cannot start.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/commands.hpp"

namespace nymph::test {

struct ControlServerOptions {
  std::string poll_timeout = "30s";             // --poll-timeout
  std::string lease_ttl = "90s";                // --lease-ttl
  std::string stale_after = "60s";              // --stale-after
  std::vector<std::string> extra_args;          // more `serve` arguments (e.g. --tls-cert F --tls-key K)
  std::chrono::milliseconds start_timeout{30'000};
};

class ControlServer {
 public:
  explicit ControlServer(ControlServerOptions options = {});
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& url() const { return url_; }             // "http://127.0.0.1:PORT"
  std::uint16_t port() const { return port_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& agent_token() const { return agent_token_; }
  const std::string& admin_token_file() const { return admin_token_file_; }
  const std::string& agent_token_file() const { return agent_token_file_; }
  const std::string& db_path() const { return db_path_; }
  const std::string& dir() const { return dir_; }             // temporary directory (removed at the end)
  const std::string& log_path() const { return log_path_; }   // the server's stderr
  pid_t pid() const { return pid_; }                          // 0 when not running
  bool running() const { return pid_ > 0; }

  // The server's stderr so far (for failure messages).
  std::string log() const;

  // Creates one more token with `role` ("agent" or "admin") in the database, with more `token create`
  // arguments (e.g. {"--name", "b", "--tag", "cluster=a"}; the name defaults to "test"); returns it.
  std::string create_token(const std::string& role, std::vector<std::string> more = {});

  // Runs `nymph-control ARGS... --server URL --token-file ADMIN_TOKEN_FILE` and returns its output.
  // The flags are inserted right after the subcommand's name (args[0], or args[0..1] for "token list" and
  // "token revoke"), so "--" in args keeps working.
  CommandOutput admin(std::vector<std::string> args) const;

  // The value of the /metrics line `name` (e.g. nymph_poll_requests_total), read over a new connection.
  // Throws when the server does not answer within 10 s or has no such line.
  long metric(const std::string& name) const;

  // SIGKILL the server and reap it (a crash: nothing is flushed or answered).
  void kill9();
  // SIGTERM the server and wait for it; returns its exit status (128+signal if killed).
  int stop();
  // Starts the server again on the same database, port and options; returns once it listens.
  void restart();

 private:
  void start(const std::string& listen);
  int wait_exit(std::chrono::milliseconds bound);

  ControlServerOptions options_;
  std::string dir_, db_path_, log_path_;
  std::string admin_token_, agent_token_, admin_token_file_, agent_token_file_;
  std::string url_;
  std::uint16_t port_ = 0;
  pid_t pid_ = 0;
  int stdout_fd_ = -1;
};

}  // namespace nymph::test
