// nymph-runner-overhead N PROGRAM [ARGS...]: runs PROGRAM N times, one at a time, through the agent's own
// process runner (work directory, scrubbed environment, process group, fd hygiene, pipes read to EOF, exit
// reaped) on one io_context, and prints the p50 and p99 of one run() in microseconds as
// "p50_us=... p99_us=...". Compared with nymph-spawn-baseline --fork it is the agent's cost per job without
// the control plane. Work directories go to a temporary directory that is removed at the end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "common/logging.hpp"
#include "runners/process_runner.hpp"

namespace asio = boost::asio;
using namespace nymph;

namespace {

// Drops what a job reports: the figure is the runner's own cost.
class DiscardingReporter final : public runners::JobReporter {
 public:
  void update(runners::JobUpdate) override {}
  asio::awaitable<void> output(runners::Stream, std::uint64_t, std::string) override { co_return; }
};

asio::awaitable<void> run_all(runners::ProcessRunner& runner, std::vector<std::string> argv, int n,
                              std::vector<double>& us, int& failures) {
  DiscardingReporter reporter;
  for (int i = 0; i < n; ++i) {
    runners::JobSpec spec;
    spec.job_id = "job_bench" + std::to_string(i);
    spec.argv = argv;
    auto t0 = std::chrono::steady_clock::now();
    auto done = co_await runner.run(spec, reporter);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (done.state != runners::JobState::succeeded) ++failures;
    runner.release(spec.job_id);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: nymph-runner-overhead N PROGRAM [ARGS...]\n");
    return 64;
  }
  int n = std::atoi(argv[1]);
  auto dir = std::filesystem::temp_directory_path() / ("nymph-runner-overhead-" + std::to_string(::getpid()));
  std::vector<double> us;
  int failures = 0;
  {
    asio::io_context ioc;
    runners::ProcessRunnerConfig config;
    config.work_dir = dir;
    runners::ProcessRunner runner(config, null_logger());
    asio::co_spawn(ioc, run_all(runner, std::vector<std::string>(argv + 2, argv + argc), n, us, failures),
                   [](std::exception_ptr e) {
                     if (e) std::rethrow_exception(e);
                   });
    ioc.run();
  }
  std::filesystem::remove_all(dir);
  if (failures > 0 || us.empty()) {
    std::fprintf(stderr, "nymph-runner-overhead: %d of %d runs did not succeed\n", failures, n);
    return 1;
  }
  std::sort(us.begin(), us.end());
  std::printf("p50_us=%.0f p99_us=%.0f\n", us[us.size() / 2], us[us.size() * 99 / 100]);
  return 0;
}
