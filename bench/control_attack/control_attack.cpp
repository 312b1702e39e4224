// bench/control_attack: what a peer without a token can do to nymph-control (issue "Trust boundary").
//
//   control_attack [--server-binary PATH] [--clients 2000] [--body-mib 8] [--slow] [--idle 1030] [--reopen]
//                  [--probe-seconds 5]
//
// Starts `nymph-control serve` on a temporary database for each scenario and measures, from a separate
// well-behaved client that opens a new connection for one GET /healthz every 10 ms, the /healthz latency
// (p50/p99/max of the probes answered; probes answered/failed, failed: no 200 within 2 s) first with no
// attack (the baseline, same server, same run) and then under attack, with the server's peak RSS (VmHWM):
//   flood:  `--clients` clients at once, each a PUT of a `--body-mib` MiB log body with a bogus token
//           (Content-Length set, the body sent as fast as the server reads it, or 64 KiB per 100 ms with
//           --slow);
//   idle:   `--idle` connections opened and held without a byte sent (with --reopen, each one the server
//           closes is opened again at once: a connection flood), with the server under a soft open-files
//           limit of 1024 and a hard limit of 1024, then 4096.
// Prints one table. It measures; it asserts nothing. The attacking side raises its own open-files limit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/control_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

using nymph::bench::percentile;
using nymph::bench::status_kib;

struct Options {
  std::string binary = NYMPH_CONTROL_BINARY_DEFAULT;
  int clients = 2000;
  std::size_t body_mib = 8;
  bool slow = false;
  int idle = 1030;
  bool reopen = false;
  int probe_seconds = 5;
};

// --- the server ----------------------------------------------------------------------------------------------

struct Server {
  pid_t pid = 0;
  std::uint16_t port = 0;
};

// Starts nymph-control on a new database in `dir`, with RLIMIT_NOFILE `soft`:`hard` when given (else the
// bench's own, raised to its hard limit). Returns once it listens.
Server start_server(const Options& o, const std::string& dir, std::optional<std::pair<rlim_t, rlim_t>> nofile) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> args{o.binary, "serve", "--listen", "127.0.0.1:0", "--db", dir + "/c.db", "--log-level", "warn"};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = dir + "/server.log";
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (nofile) {
      rlimit lim{nofile->first, nofile->second};
      if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(126);
    }
    ::dup2(out[1], 1);
    int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (err >= 0) ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  if (line.rfind("listening on ", 0) != 0) throw std::runtime_error("server did not start: '" + line + "'");
  return {pid, static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)))};
}

void stop_server(const Server& s) {
  ::kill(s.pid, SIGTERM);
  int status = 0;
  ::waitpid(s.pid, &status, 0);
}

std::string soft_hard_nofile(pid_t pid) {
  rlimit lim{};
  if (::prlimit(pid, RLIMIT_NOFILE, nullptr, &lim) != 0) return "?";
  return std::to_string(lim.rlim_cur) + ":" + std::to_string(lim.rlim_max);
}

// --- sockets -------------------------------------------------------------------------------------------------

int connect_to(std::uint16_t port, bool nonblocking) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One GET /healthz on a new connection; its latency, or nullopt when no 200 came within `bound`.
std::optional<double> probe_once(std::uint16_t port, std::chrono::milliseconds bound) {
  auto start = Clock::now();
  int fd = connect_to(port, false);
  if (fd < 0) return std::nullopt;
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
  std::optional<double> ms;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    std::string got;
    char buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + bound - Clock::now()).count();
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
      if (got.find("\r\n\r\n") != std::string::npos && got.find("{\"status\":\"ok\"}") != std::string::npos) {
        if (got.rfind("HTTP/1.1 200", 0) == 0) ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        break;
      }
    }
  }
  ::close(fd);
  return ms;
}

struct Probe {
  std::vector<double> ms;
  int failed = 0;
};

// A well-behaved client: one /healthz every 10 ms on a new connection until `stop`.
Probe probe(std::uint16_t port, const std::atomic<bool>& stop) {
  Probe p;
  auto next = Clock::now();
  while (!stop) {
    if (auto ms = probe_once(port, 2s)) p.ms.push_back(*ms);
    else ++p.failed;
    next += 10ms;
    std::this_thread::sleep_until(std::max(next, Clock::now()));
  }
  return p;
}

Probe probe_for(std::uint16_t port, std::chrono::seconds how_long) {
  std::atomic<bool> stop{false};
  std::thread t([&] {
    std::this_thread::sleep_for(how_long);
    stop = true;
  });
  Probe p = probe(port, stop);
  t.join();
  return p;
}

// --- attacks -------------------------------------------------------------------------------------------------

struct FloodResult {
  int replied_401 = 0, other_replies = 0, cut = 0;  // cut: closed or reset without a reply
  double seconds = 0;
};

// `n` clients at once, each a log PUT of `body` bytes with a bogus token, until every one is answered or
// closed (or 120 s pass).
FloodResult flood(std::uint16_t port, int n, std::size_t body, bool slow) {
  const std::string head = "PUT /v1/jobs/job_x/logs/stdout?offset=0&lease=lse_x HTTP/1.1\r\nHost: bench\r\n"
                           "Authorization: Bearer nym_bogus\r\nContent-Type: application/octet-stream\r\n"
                           "Content-Length: " + std::to_string(body) + "\r\n\r\n";
  static std::vector<char> bytes(1 << 20, 'x');
  struct Client {
    int fd = -1;
    std::size_t sent = 0;  // of head + body
    std::string reply;
    bool done = false;
  };
  std::vector<Client> clients(static_cast<std::size_t>(n));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (std::size_t i = 0; i < clients.size(); ++i) {
    clients[i].fd = connect_to(port, true);
    if (clients[i].fd < 0) {
      clients[i].done = true;
      continue;
    }
    epoll_event ev{EPOLLIN | EPOLLOUT, {.u64 = i}};
    ::epoll_ctl(ep, EPOLL_CTL_ADD, clients[i].fd, &ev);
  }
  FloodResult r;
  auto finish = [&](Client& c) {
    if (c.done) return;
    c.done = true;
    if (c.reply.rfind("HTTP/1.1 401", 0) == 0) ++r.replied_401;
    else if (c.reply.rfind("HTTP/1.1 ", 0) == 0) ++r.other_replies;
    else ++r.cut;
    ::close(c.fd);
  };
  auto send_some = [&](Client& c, std::size_t budget) {
    while (budget > 0 && c.sent < head.size() + body) {
      ssize_t w;
      if (c.sent < head.size()) {
        w = ::send(c.fd, head.data() + c.sent, head.size() - c.sent, MSG_NOSIGNAL);
      } else {
        std::size_t left = std::min({head.size() + body - c.sent, bytes.size(), budget});
        w = ::send(c.fd, bytes.data(), left, MSG_NOSIGNAL);
        if (w > 0) budget -= std::min(budget, static_cast<std::size_t>(w));
      }
      if (w <= 0) return;
      c.sent += static_cast<std::size_t>(w);
    }
  };
  auto start = Clock::now();
  int done = 0;
  std::vector<epoll_event> events(1024);
  auto next_tick = Clock::now();
  while (done < n && Clock::now() - start < 120s) {
    int k = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int e = 0; e < k; ++e) {
      Client& c = clients[events[e].data.u64];
      if (c.done) continue;
      if (events[e].events & EPOLLOUT && !slow) send_some(c, SIZE_MAX);
      if (events[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        char buf[4096];
        ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got > 0) c.reply.append(buf, static_cast<std::size_t>(got));
        else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) finish(c);
      }
      if (!c.done && c.sent == head.size() + body) {  // everything sent: stop watching for writability
        epoll_event ev{EPOLLIN, {.u64 = events[e].data.u64}};
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
      }
    }
    if (slow && Clock::now() >= next_tick) {
      for (auto& c : clients)
        if (!c.done) send_some(c, 64 << 10);
      next_tick += 100ms;
    }
    done = static_cast<int>(std::count_if(clients.begin(), clients.end(), [](const Client& c) { return c.done; }));
  }
  for (auto& c : clients) finish(c);
  ::close(ep);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

// Holds `n` connections open without sending a byte until `stop`. Returns how many of them the server
// closed; with `reopen`, each is opened again at once.
long hold_idle(std::uint16_t port, int n, bool reopen, const std::atomic<bool>& stop, std::atomic<int>& open) {
  std::vector<pollfd> fds(static_cast<std::size_t>(n));
  for (auto& p : fds) p = {connect_to(port, false), POLLIN, 0};
  open = n;
  long closed = 0;
  while (!stop) {
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    for (auto& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ::close(p.fd);
      p.fd = reopen ? connect_to(port, false) : -1;  // poll() ignores a negative descriptor
      p.revents = 0;
      ++closed;
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  return closed;
}

// --- report --------------------------------------------------------------------------------------------------

// One line of the table; latencies are "-" when no probe got its reply.
void row(const std::string& what, const std::string& nofile, long peak_kib, const Probe& p, const std::string& note) {
  auto ms = [&](double q) {
    char buf[32];
    if (p.ms.empty()) return std::string("-");
    std::snprintf(buf, sizeof buf, "%.1f", percentile(p.ms, q));
    return std::string(buf);
  };
  std::string probes = std::to_string(p.ms.size()) + "/" + std::to_string(p.failed);
  std::printf("%-44s %-11s %8.1f %8s %8s %8s %9s  %s\n", what.c_str(), nofile.c_str(),
              static_cast<double>(peak_kib) / 1024.0, ms(0.5).c_str(), ms(0.99).c_str(), ms(1.0).c_str(),
              probes.c_str(), note.c_str());
  std::fflush(stdout);
}

std::string make_dir() {
  std::string dir = std::filesystem::temp_directory_path().string() + "/nymph-attack-XXXXXX";
  if (!::mkdtemp(dir.data())) throw std::runtime_error("mkdtemp failed");
  return dir;
}

void flood_scenario(const Options& o) {
  std::string dir = make_dir();
  Server s = start_server(o, dir, std::nullopt);
  row("flood: baseline (no attack)", soft_hard_nofile(s.pid), status_kib(s.pid, "VmHWM:"), probe_for(s.port, 3s), "");
  std::atomic<bool> stop{false};
  Probe during;
  std::thread prober([&] { during = probe(s.port, stop); });
  FloodResult f = flood(s.port, o.clients, o.body_mib << 20, o.slow);
  stop = true;
  prober.join();
  char note[160];
  std::snprintf(note, sizeof note, "%d x 401, %d other replies, %d cut without reply, %.1f s", f.replied_401,
                f.other_replies, f.cut, f.seconds);
  row(std::to_string(o.clients) + " x " + std::to_string(o.body_mib) + " MiB PUT, bogus token" + (o.slow ? ", slow" : ""),
      soft_hard_nofile(s.pid), status_kib(s.pid, "VmHWM:"), during, note);
  row("flood: after the attack", soft_hard_nofile(s.pid), status_kib(s.pid, "VmRSS:"), probe_for(s.port, 2s),
      "(RSS now, not peak)");
  stop_server(s);
  std::filesystem::remove_all(dir);
}

void idle_scenario(const Options& o, rlim_t hard) {
  std::string dir = make_dir();
  Server s = start_server(o, dir, std::pair<rlim_t, rlim_t>{1024, hard});
  std::string nofile = soft_hard_nofile(s.pid);
  row("idle: baseline (no attack)", nofile, status_kib(s.pid, "VmHWM:"), probe_for(s.port, 3s), "");
  std::atomic<bool> stop{false};
  std::atomic<int> open{0};
  long closed = 0;
  std::thread holder([&] { closed = hold_idle(s.port, o.idle, o.reopen, stop, open); });
  while (open < o.idle) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(500ms);  // let the server take them all
  Probe during = probe_for(s.port, std::chrono::seconds(o.probe_seconds));
  stop = true;
  holder.join();
  row(std::to_string(o.idle) + " idle connections" + (o.reopen ? ", reopened" : ""), nofile,
      status_kib(s.pid, "VmHWM:"), during,
      std::to_string(closed) + " of them closed by the server" + (o.reopen ? " (and reopened)" : ""));
  stop_server(s);
  std::filesystem::remove_all(dir);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--server-binary") o.binary = value();
    else if (a == "--clients") o.clients = std::stoi(value());
    else if (a == "--body-mib") o.body_mib = std::stoul(value());
    else if (a == "--slow") o.slow = true;
    else if (a == "--idle") o.idle = std::stoi(value());
    else if (a == "--reopen") o.reopen = true;
    else if (a == "--probe-seconds") o.probe_seconds = std::stoi(value());
    else throw std::runtime_error("usage: control_attack [--server-binary PATH] [--clients N] [--body-mib N] "
                                  "[--slow] [--idle N] [--reopen] [--probe-seconds S]");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  Options o = parse(argc, argv);
  std::signal(SIGPIPE, SIG_IGN);
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < static_cast<rlim_t>(std::max(o.clients, o.idle)) + 64)
    throw std::runtime_error("the bench needs more open files than its hard limit " + std::to_string(lim.rlim_max));
  std::printf("nymph-control %s; /healthz every 10 ms on a new connection (failed: no 200 within 2 s)\n",
              o.binary.c_str());
  std::printf("%-44s %-11s %8s %8s %8s %8s %9s  %s\n", "scenario", "nofile", "peak MiB", "p50 ms", "p99 ms",
              "max ms", "ok/failed", "notes");
  flood_scenario(o);
  idle_scenario(o, 1024);
  idle_scenario(o, 4096);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "control_attack: %s\n", e.what());
  return 1;
}
