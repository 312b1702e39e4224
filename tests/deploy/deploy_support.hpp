#pragma once
// Helpers of the deployment tests (tests/deploy): temporary directories, fake Slurm commands, a private CA
// made with openssl, and a `nymph run` started through an arbitrary binary and wrapper (the static build,
// under old-kernel). Blocking, for tests only.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "tests/support/commands.hpp"
#include "tests/support/control_server.hpp"

namespace nymph::test::deploy {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Writes `content` to `path` with `mode` (chmod after writing, so umask does not matter).
void write_file(const fs::path& path, const std::string& content, fs::perms mode = fs::perms(0644));

// Writes an executable /bin/sh script `dir/name` whose body is `body`.
void write_script(const fs::path& dir, const std::string& name, const std::string& body);

// Fake sbatch/squeue/sacct/scancel/sacctmgr in `dir` that answer like Slurm 22.05 for the calls nymph doctor
// makes (`--version`, `squeue --noheader -o "%i|%T|%r" -u U` -> two jobs, `sacct ...`,
// `sacctmgr ... format=DefaultAccount` -> "proj").
void write_fake_slurm(const fs::path& dir);

// The binary of the static preset, and the release artifacts directory (configure-time paths, overridden by
// $NYMPH_STATIC_NYMPH / $NYMPH_DIST_DIR). Throw std::runtime_error naming the command that builds them when
// they are missing.
std::string static_nymph();
fs::path dist_dir();

// Runs `argv` with the environment `env` only (through /usr/bin/env -i).
CommandOutput run_with_env(const std::map<std::string, std::string>& env, const std::vector<std::string>& argv);

// Parses `text` as exactly one JSON object (nothing else but whitespace). Throws on anything else.
boost::json::object one_object(const std::string& text);

// A private CA and server certificates signed by it, made with the openssl command in `dir`.
struct TestCa {
  fs::path ca_pem;                    // the CA certificate (trust this)
  fs::path cert_pem, key_pem;         // for 127.0.0.1 / localhost
  fs::path other_cert_pem, other_key_pem;  // for other.example only (wrong host)
};
TestCa make_test_ca(const fs::path& dir);

// `nymph run --config config.toml` in its own directory, started as PREFIX... BINARY run ... (e.g. through
// old-kernel). The config talks to `cp` with an agent token, process runner only, log in agent.log.
class Agent {
 public:
  Agent(const ControlServer& cp, std::string binary, std::vector<std::string> prefix = {});
  ~Agent();  // SIGKILL if still running, then removes the directory
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // SIGTERM, then waits (bounded) for the exit; returns the exit status (128+signal when killed).
  int stop(std::chrono::milliseconds bound = std::chrono::seconds(30));
  std::string log() const;
  const fs::path& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  pid_t pid_ = 0;
};

// A job submitted by run_job, once final.
struct FinishedJob {
  std::string id;
  std::string json;   // `nymph-control job ID --json`
  std::string state;  // succeeded, failed, ...
  std::string logs;   // `nymph-control logs ID`
};

// Submits `argv` as a process job, waits (polling the control plane, bounded) until it is final and fetches
// its logs.
FinishedJob run_job(const ControlServer& cp, const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace nymph::test::deploy
