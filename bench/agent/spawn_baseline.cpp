// nymph-spawn-baseline [--fork] N PROGRAM [ARGS...]: runs PROGRAM N times, one at a time, and prints the p50
// and p99 wall time of one run in microseconds, as "p50_us=... p99_us=...". Default posix_spawn + waitpid;
// --fork: fork + execv + waitpid, the textbook fork/exec/wait.
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

int main(int argc, char** argv) {
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
