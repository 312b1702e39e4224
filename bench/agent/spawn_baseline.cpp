// nymph-spawn-baseline N PROGRAM: runs PROGRAM N times (posix_spawn + waitpid, one at a time) and prints
// the p50 and p99 wall time of one run in microseconds, as "p50_us=... p99_us=...".
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s N PROGRAM [ARGS...]\n", argv[0]);
    return 64;
  }
  int n = std::atoi(argv[1]);
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid;
    if (posix_spawn(&pid, argv[2], nullptr, nullptr, argv + 2, environ) != 0) return 1;
    int status;
    waitpid(pid, &status, 0);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("p50_us=%.0f p99_us=%.0f\n", us[us.size() / 2], us[us.size() * 99 / 100]);
  return 0;
}
