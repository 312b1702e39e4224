// nymph-spawn-baseline [--fork] N PROGRAM [ARGS...]: runs PROGRAM N times, one at a time, and prints the p50
// and p99 wall time of one run in microseconds, as "p50_us=... p99_us=...". Default posix_spawn + waitpid;
// --fork: fork + execv + waitpid, the textbook fork/exec/wait.
// nymph-spawn-baseline --in-flight K N PROGRAM [ARGS...]: runs PROGRAM N times with K runs in flight at once
// (posix_spawn, a new one as soon as one is reaped) and prints the rate as "per_s=...".
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace {

pid_t start(bool use_fork, char** argv) {
  if (!use_fork) {
    pid_t pid;
    return posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) == 0 ? pid : -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

}  // namespace

namespace {

// Runs `n` copies of argv[0] with `in_flight` at once; returns runs per second, or -1 when a spawn failed.
double rate_in_flight(int in_flight, int n, char** argv) {
  auto t0 = std::chrono::steady_clock::now();
  int started = 0, running = 0;
  while (started < n || running > 0) {
    while (running < in_flight && started < n) {
      if (start(false, argv) < 0) return -1;
      ++started;
      ++running;
    }
    int status;
    if (wait(&status) < 0) return -1;
    --running;
  }
  return n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 4 && std::strcmp(argv[1], "--in-flight") == 0) {
    double rate = rate_in_flight(std::atoi(argv[2]), std::atoi(argv[3]), argv + 4);
    if (rate < 0) return 1;
    std::printf("per_s=%.0f\n", rate);
    return 0;
  }
  bool use_fork = argc > 1 && std::strcmp(argv[1], "--fork") == 0;
  if (use_fork) {
    ++argv;
    --argc;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: nymph-spawn-baseline [--fork] N PROGRAM [ARGS...]\n");
    return 64;
  }
  int n = std::atoi(argv[1]);
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = start(use_fork, argv + 2);
    if (pid < 0) return 1;
    int status;
    waitpid(pid, &status, 0);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("p50_us=%.0f p99_us=%.0f\n", us[us.size() / 2], us[us.size() * 99 / 100]);
  return 0;
}
