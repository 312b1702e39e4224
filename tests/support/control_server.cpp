#include "tests/support/control_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace nymph::test {

namespace {

using Clock = std::chrono::steady_clock;

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/nymph-control-test-XXXXXX";
  if (!::mkdtemp(templ.data())) throw std::runtime_error(std::string("mkdtemp failed: ") + std::strerror(errno));
  return templ;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

void write_private_file(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path);
  ssize_t n = ::write(fd, content.data(), content.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(content.size())) throw std::runtime_error("cannot write " + path);
}

// Reads one line from `fd` before `deadline`; empty when EOF or timeout.
std::string read_line(int fd, Clock::time_point deadline) {
  std::string line;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return {};
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    if (c == '\n') return line;
    line += c;
  }
}

}  // namespace

ControlServer::ControlServer(ControlServerOptions options) : options_(std::move(options)) {
  dir_ = make_temp_dir();
  db_path_ = dir_ + "/control.db";
  log_path_ = dir_ + "/server.log";
  admin_token_ = create_token("admin");
  agent_token_ = create_token("agent");
  admin_token_file_ = dir_ + "/admin.token";
  agent_token_file_ = dir_ + "/agent.token";
  write_private_file(admin_token_file_, admin_token_ + "\n");
  write_private_file(agent_token_file_, agent_token_ + "\n");
  start("127.0.0.1:0");
}

ControlServer::~ControlServer() {
  if (pid_ > 0) stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string ControlServer::create_token(const std::string& role, std::vector<std::string> more) {
  std::vector<std::string> args{NYMPH_CONTROL_BINARY, "token", "create", "--db", db_path_, "--role", role};
  if (std::find(more.begin(), more.end(), "--name") == more.end()) more.insert(more.end(), {"--name", "test"});
  args.insert(args.end(), more.begin(), more.end());
  auto r = run_command(args);
  if (r.exit_code != 0) throw std::runtime_error("token create failed: " + r.err);
  return trim(r.out);
}

std::string ControlServer::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandOutput ControlServer::admin(std::vector<std::string> args) const {
  std::vector<std::string> argv{NYMPH_CONTROL_BINARY};
  if (!args.empty()) {
    // After the command's name: "token list" and "token revoke" are two words.
    std::size_t words = args.front() == "token" && args.size() > 1 ? 2 : 1;
    argv.insert(argv.end(), args.begin(), args.begin() + static_cast<std::ptrdiff_t>(words));
    argv.insert(argv.end(), {"--server", url_, "--token-file", admin_token_file_});
    argv.insert(argv.end(), args.begin() + static_cast<std::ptrdiff_t>(words), args.end());
  }
  return run_command(argv);
}

void ControlServer::start(const std::string& listen) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) throw std::runtime_error("cannot open " + log_path_);
  std::vector<std::string> args{NYMPH_CONTROL_BINARY, "serve",         "--listen",      listen,
                                "--db",               db_path_,        "--poll-timeout", options_.poll_timeout,
                                "--lease-ttl",        options_.lease_ttl, "--stale-after", options_.stale_after};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(log_fd);
  if (rc != 0) {
    ::close(out[0]);
    throw std::runtime_error(std::string("cannot start nymph-control: ") + std::strerror(rc));
  }
  pid_ = pid;
  stdout_fd_ = out[0];
  std::string line = read_line(stdout_fd_, Clock::now() + options_.start_timeout);
  const std::string prefix = "listening on ";
  if (line.rfind(prefix, 0) != 0) {
    kill9();
    throw std::runtime_error("nymph-control did not start (stdout: '" + line + "'); its log:\n" + log());
  }
  url_ = line.substr(prefix.size());
  port_ = static_cast<std::uint16_t>(std::stoi(url_.substr(url_.rfind(':') + 1)));
}

int ControlServer::wait_exit(std::chrono::milliseconds bound) {
  int status = 0;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int rc;
    do rc = ::poll(&p, 1, static_cast<int>(bound.count()));
    while (rc < 0 && errno == EINTR);
    ::close(pidfd);
    if (rc == 0) ::kill(pid_, SIGKILL);  // did not stop in time
  }
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = 0;
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

long ControlServer::metric(const std::string& name) const {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("metric: socket failed");
  timeval bound{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  auto at = reply.find("\n" + name + " ");
  if (at == std::string::npos) throw std::runtime_error("metric " + name + " not in the reply: " + reply);
  return std::stol(reply.substr(at + name.size() + 2));
}

void ControlServer::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  wait_exit(std::chrono::milliseconds(10'000));
}

int ControlServer::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  return wait_exit(std::chrono::milliseconds(10'000));
}

void ControlServer::restart() {
  if (pid_ > 0) stop();
  start("127.0.0.1:" + std::to_string(port_));
}

}  // namespace nymph::test
