#pragma once
// AgentProcess: a real `nymph run` daemon for tests, in its own temporary launch directory.
//
//   nymph::test::ControlServer cp;
//   nymph::test::AgentProcess agent(cp, {.max_process_jobs = 1});
//   agent.wait_for_state("serving");          // event-driven: inotify on status.json
//   agent.signal(SIGTERM);
//   int status = agent.wait_exit();           // exit status (128+signal when killed)
//
// The launch directory holds config.toml, token (0600), status.json, work/, manager/ (the [manager] state_dir:
// manager.json, the Slurm journal and job directories), agent.log (the daemon's log file) and stderr.log.
// The destructor SIGKILLs a daemon still running and removes the directory.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <vector>
#include <string>

#include "tests/support/control_server.hpp"

namespace nymph::test {

struct AgentOptions {
  int max_process_jobs = 4;
  std::string drain_grace = "30s";
  std::string kill_grace = "1s";
  std::string idle_exit = "off";
  std::string extra_toml;              // appended to config.toml (e.g. a [profiles] section)
  std::string worker_toml;             // more lines of [worker] (e.g. "stop_timeout = \"5s\"\n")
  std::string process_toml;            // more lines of [runners.process] (e.g. "allow_commands = false\n")
  std::string slurm_toml = "enabled = false\n";  // the body of [runners.slurm]
  std::string label = "e2e";
  // The body of [manager]. Default: this daemon's own identity, so that several daemons of one test (one user)
  // never refuse or replace each other: state_dir = "manager" (in the launch directory) and a cluster named
  // after the launch directory. Tests of the one-manager rule set their own.
  std::optional<std::string> manager_toml;
  std::vector<std::string> run_args;   // more arguments of `nymph run` (e.g. "--replace")
  bool start = true;                   // start in the constructor
};

class AgentProcess {
 public:
  AgentProcess(const ControlServer& cp, AgentOptions options = {});
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // Starts `nymph run --config config.toml` in the launch directory. Throws if it cannot be spawned.
  void start();
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  std::string log() const;     // agent.log + stderr.log, for failure messages
  std::string status_json() const;

  // Waits (inotify on the launch directory, with a deadline) until status.json says `state`. Throws on timeout
  // or when the daemon exits first.
  void wait_for_state(const std::string& state, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void signal(int sig) const;
  // Waits for the daemon to exit (pidfd + poll, bounded) and returns its exit status (128+signal if
  // killed). Throws on timeout.
  int wait_exit(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Peak resident memory (VmHWM) of the running daemon, in KiB.
  long peak_rss_kib() const;

 private:
  AgentOptions options_;
  std::string dir_;
  pid_t pid_ = 0;
  int pidfd_ = -1;
};

// Waits until `pred` holds for the JSON of `nymph-control job ID --json`, asking the control plane every
// 100 ms up to `timeout` (the server has no "wait until state" call). Returns the last JSON text.
std::string wait_for_job(const ControlServer& cp, const std::string& job_id, const std::function<bool(const std::string&)>& pred,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The value of "state" in a job's JSON.
std::string job_state(const std::string& job_json);

// Submits with `nymph-control submit --json ARGS...` and returns the new job id. Throws on failure.
std::string submit(const ControlServer& cp, std::vector<std::string> args);

}  // namespace nymph::test
