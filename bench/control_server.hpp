#pragma once
// What the control-plane benches share: running a command for its output, starting a real `nymph-control
// serve` on a temporary database, reading a process's RSS, and percentiles. Header-only; benches only.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace nymph::bench {

// Completion of a bench's spawned coroutines: a failure ends the run (it propagates out of io_context::run)
// instead of vanishing and leaving the bench waiting for a figure that never comes.
inline constexpr auto rethrow_error = [](std::exception_ptr e, auto&&...) {
  if (e) std::rethrow_exception(e);
};

// Runs `argv` (through the shell, each argument single-quoted) and returns its stdout without trailing newlines.
inline std::string run_capture(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) throw std::runtime_error("popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A `nymph-control serve` started by start_server.
struct Server {
  pid_t pid = 0;
  std::string url;

  // SIGTERM and wait.
  void stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = 0;
  }
};

// Starts `binary serve --listen LISTEN --db DB --log-level warn EXTRA...` and returns once it printed its
// "listening on URL" line. Throws when it cannot be started. `listen` defaults to any free loopback port.
inline Server start_server(const std::string& binary, const std::string& db, std::vector<std::string> extra = {},
                           const std::string& listen = "127.0.0.1:0") {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe");
  std::vector<std::string> args{binary, "serve", "--listen", listen, "--db", db, "--log-level", "warn"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> c;
  c.reserve(args.size() + 1);
  for (auto& a : args) c.push_back(a.data());
  c.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  Server s;
  int rc = ::posix_spawn(&s.pid, c[0], &fa, nullptr, c.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) throw std::runtime_error("cannot start " + binary);
  std::string line;
  char ch;
  while (::read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  ::close(out[0]);
  if (line.rfind("listening on ", 0) != 0) throw std::runtime_error("server did not start: " + line);
  s.url = line.substr(13);
  return s;
}

// A process's resident memory (VmRSS) or its peak (VmHWM) in KiB, from /proc; -1 when unknown.
inline long status_kib(pid_t pid, const std::string& key = "VmRSS:") {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string k;
  long value = 0;
  while (in >> k) {
    if (k == key) {
      in >> value;
      return value;
    }
    in.ignore(1 << 16, '\n');
  }
  return -1;
}

// The q-quantile (0..1) of `v` (nearest rank); 0 for an empty vector.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
  return v[std::min(i, v.size() - 1)];
}

}  // namespace nymph::bench
