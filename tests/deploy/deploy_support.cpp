#include "tests/deploy/deploy_support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <boost/json/parse.hpp>

#include "tests/support/agent_process.hpp"
#include "tests/support/files.hpp"

extern char** environ;

namespace nymph::test::deploy {

namespace {

void must_exist(const fs::path& p, const std::string& how) {
  if (!fs::exists(p)) throw std::runtime_error(p.string() + " is missing; build it first: " + how);
}

void openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_command(argv);
  if (r.exit_code != 0) throw std::runtime_error("openssl " + args.front() + " failed: " + r.err);
}

// A leaf certificate for `san` (subjectAltName value) signed by the CA in `dir`.
void make_leaf(const fs::path& dir, const std::string& name, const std::string& cn, const std::string& san) {
  auto p = [&](const std::string& f) { return (dir / f).string(); };
  write_file(dir / (name + ".ext"),
             "subjectAltName=" + san + "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
  openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           p(name + ".key"), "-out", p(name + ".csr"), "-subj", "/CN=" + cn});
  openssl({"x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial",
           "-out", p(name + ".pem"), "-days", "2", "-extfile", p(name + ".ext")});
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/nymph-deploy-XXXXXX";
  if (!::mkdtemp(templ.data())) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_file(const fs::path& path, const std::string& content, fs::perms mode) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + path.string());
  }
  fs::permissions(path, mode);
}

void write_script(const fs::path& dir, const std::string& name, const std::string& body) {
  write_file(dir / name, "#!/bin/sh\n" + body + "\n", fs::perms(0755));
}

void write_fake_slurm(const fs::path& dir) {
  const std::string version = "if [ \"$1\" = --version ]; then echo 'slurm 22.05.8'; exit 0; fi\n";
  write_script(dir, "sbatch", version + "echo 'Submitted batch job 1'");
  write_script(dir, "squeue", version + "echo '41|RUNNING|None'; echo '42|PENDING|Priority'");
  write_script(dir, "sacct", version + "echo 41");
  write_script(dir, "scancel", version + "exit 0");
  write_script(dir, "sacctmgr", version + "echo proj");
}

std::string static_nymph() {
  const char* env = std::getenv("NYMPH_STATIC_NYMPH");
  std::string p = env && *env ? env : NYMPH_STATIC_NYMPH;
  must_exist(p, "cmake --preset static && cmake --build --preset static (tests/run-all.sh does)");
  return p;
}

fs::path dist_dir() {
  const char* env = std::getenv("NYMPH_DIST_DIR");
  fs::path p = env && *env ? env : NYMPH_DIST_DIR;
  must_exist(p, "packaging/release.sh (tests/run-all.sh does)");
  return p;
}

CommandOutput run_with_env(const std::map<std::string, std::string>& env, const std::vector<std::string>& argv) {
  std::vector<std::string> full{"/usr/bin/env", "-i"};
  for (const auto& [k, v] : env) full.push_back(k + "=" + v);
  full.insert(full.end(), argv.begin(), argv.end());
  return run_command(full);
}

boost::json::object one_object(const std::string& text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);  // rejects trailing non-whitespace
  if (ec || !v.is_object()) throw std::runtime_error("not exactly one JSON object: " + text);
  return v.as_object();
}

TestCa make_test_ca(const fs::path& dir) {
  auto p = [&](const std::string& f) { return (dir / f).string(); };
  openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", p("ca.key"),
           "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=nymph test CA", "-addext",
           "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
  make_leaf(dir, "server", "127.0.0.1", "IP:127.0.0.1,DNS:localhost");
  make_leaf(dir, "other", "other.example", "DNS:other.example");
  return {dir / "ca.pem", dir / "server.pem", dir / "server.key", dir / "other.pem", dir / "other.key"};
}

Agent::Agent(const ControlServer& cp, std::string binary, std::vector<std::string> prefix) {
  write_file(dir_ / "token", cp.agent_token() + "\n", fs::perms(0600));
  write_file(dir_ / "config.toml", "[server]\nurl = \"" + cp.url() + "\"\ntoken_file = \"token\"\n"
                                   "[worker]\nlabel = \"deploy\"\nwork_dir = \"work\"\n"
                                   "[runners.slurm]\nenabled = false\n"
                                   // its own manager identity: concurrent tests of one user never refuse each other
                                   "[manager]\nstate_dir = \"manager\"\ncluster = \"" +
                                   dir_.path().filename().string() + "\"\n"
                                   "[log]\nlevel = \"debug\"\nfile = \"agent.log\"\n");
  std::vector<std::string> args = prefix;
  args.insert(args.end(), {binary, "run", "--config", "config.toml"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir_.path().c_str());
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "stderr.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  int rc = ::posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + args.front() + ": " + std::strerror(rc));
}

Agent::~Agent() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

int Agent::stop(std::chrono::milliseconds bound) {
  if (pid_ <= 0) return -1;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  ::kill(pid_, SIGTERM);
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int rc;
    do rc = ::poll(&p, 1, static_cast<int>(bound.count()));
    while (rc < 0 && errno == EINTR);
    ::close(pidfd);
    if (rc == 0) ::kill(pid_, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Agent::log() const {
  return "--- agent.log ---\n" + read_file(dir_ / "agent.log") + "--- stderr.log ---\n" + read_file(dir_ / "stderr.log");
}

FinishedJob run_job(const ControlServer& cp, const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  std::vector<std::string> args{"--"};
  args.insert(args.end(), argv.begin(), argv.end());
  FinishedJob job;
  job.id = submit(cp, args);
  job.json = wait_for_job(cp, job.id, [](const std::string& j) {
    auto s = job_state(j);
    return s == "succeeded" || s == "failed" || s == "cancelled" || s == "lost";
  }, timeout);
  job.state = job_state(job.json);
  auto logs = cp.admin({"logs", job.id});
  job.logs = logs.out + logs.err;
  return job;
}

}  // namespace nymph::test::deploy
