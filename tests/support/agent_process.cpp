#include "tests/support/agent_process.hpp"
#include "tests/support/files.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/json.hpp>

extern char** environ;

namespace fs = std::filesystem;

namespace nymph::test {

AgentProcess::AgentProcess(const ControlServer& cp, AgentOptions options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/nymph-agent-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);  // jobs may run as other users in Slurm tests
  {
    std::ofstream t(dir_ + "/token");
    t << cp.agent_token() << "\n";
  }
  ::chmod((dir_ + "/token").c_str(), 0600);
  std::ofstream c(dir_ + "/config.toml");
  c << "[server]\nurl = \"" << cp.url() << "\"\ntoken_file = \"token\"\n"
    << "[worker]\nlabel = \"" << options_.label << "\"\nwork_dir = \"work\"\nmax_process_jobs = "
    << options_.max_process_jobs << "\ndrain_grace = \"" << options_.drain_grace << "\"\nidle_exit = \""
    << options_.idle_exit << "\"\n"
    << options_.worker_toml
    << "[runners.process]\nkill_grace = \"" << options_.kill_grace << "\"\n"
    << options_.process_toml
    << "[runners.slurm]\n" << options_.slurm_toml
    << "[manager]\n"
    << options_.manager_toml.value_or("state_dir = \"manager\"\ncluster = \"" + fs::path(dir_).filename().string() + "\"\n")
    << "[log]\nlevel = \"debug\"\nfile = \"agent.log\"\n"
    << options_.extra_toml;
  c.close();
  if (options_.start) start();
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  if (pidfd_ >= 0) ::close(pidfd_);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void AgentProcess::start() {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir_.c_str());
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "stderr.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> args{NYMPH_BINARY, "run", "--config", "config.toml"};
  args.insert(args.end(), options_.run_args.begin(), options_.run_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = ::posix_spawn(&pid_, NYMPH_BINARY, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(std::string("cannot start nymph: ") + std::strerror(rc));
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
}

std::string AgentProcess::log() const {
  return "--- agent.log ---\n" + read_file(dir_ + "/agent.log") + "--- stderr.log ---\n" + read_file(dir_ + "/stderr.log");
}

std::string AgentProcess::status_json() const { return read_file(dir_ + "/status.json"); }

void AgentProcess::wait_for_state(const std::string& state, std::chrono::milliseconds timeout) {
  int in = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ::inotify_add_watch(in, dir_.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto current = [&] {
    boost::system::error_code ec;
    auto v = boost::json::parse(status_json(), ec);
    if (ec || !v.is_object() || !v.as_object().contains("state")) return std::string();
    return std::string(v.as_object().at("state").as_string());
  };
  while (current() != state) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::close(in);
      throw std::runtime_error("agent did not reach state '" + state + "'; status: " + status_json() + "\n" + log());
    }
    pollfd fds[2] = {{in, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    ::poll(fds, 2, static_cast<int>(left.count()));
    if (fds[1].revents & POLLIN && current() != state) {
      ::close(in);
      throw std::runtime_error("agent exited before reaching state '" + state + "'\n" + log());
    }
    char buf[4096];
    while (::read(in, buf, sizeof buf) > 0) {
    }
  }
  ::close(in);
}

void AgentProcess::signal(int sig) const { ::kill(pid_, sig); }

int AgentProcess::wait_exit(std::chrono::milliseconds timeout) {
  pollfd p{pidfd_, POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (rc < 0 && errno == EINTR);
  if (rc == 0) throw std::runtime_error("agent did not exit in time\n" + log());
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

long AgentProcess::peak_rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

std::string job_state(const std::string& job_json) {
  boost::system::error_code ec;
  auto v = boost::json::parse(job_json, ec);
  if (ec || !v.is_object()) return {};
  const auto& o = v.as_object();
  auto it = o.find("state");
  if (it == o.end()) {
    if (auto job = o.find("job"); job != o.end() && job->value().is_object()) return job_state(boost::json::serialize(job->value()));
    return {};
  }
  return std::string(it->value().as_string());
}

std::string wait_for_job(const ControlServer& cp, const std::string& job_id,
                         const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  for (;;) {
    auto r = cp.admin({"job", job_id, "--json"});
    last = r.out;
    if (r.exit_code == 0 && pred(last)) return last;
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("job " + job_id + " did not reach the expected state: " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string submit(const ControlServer& cp, std::vector<std::string> args) {
  args.insert(args.begin(), {"submit", "--json"});
  auto r = cp.admin(args);
  if (r.exit_code != 0) throw std::runtime_error("submit failed: " + r.err + r.out);
  boost::system::error_code ec;
  auto v = boost::json::parse(r.out, ec);
  if (ec || !v.is_object()) throw std::runtime_error("submit printed no JSON: " + r.out);
  const auto& o = v.as_object();
  if (auto it = o.find("id"); it != o.end()) return std::string(it->value().as_string());
  if (auto it = o.find("jobId"); it != o.end()) return std::string(it->value().as_string());
  throw std::runtime_error("submit printed no job id: " + r.out);
}

}  // namespace nymph::test
