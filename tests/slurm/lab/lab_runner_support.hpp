#pragma once
// Shared pieces of the real-Slurm runner tests. They run as the unprivileged lab user (ctest runs the
// binary through `runuser -u nymphci --`), exactly as the agent runs on a login node: the runner's own
// sbatch/squeue/sacct/scancel, its own job directories under the lab's shared jobs directory.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "slurm/child_command_runner.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::test::lab {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace nymph::runners;
using namespace nymph::runners::slurm;
using namespace nymph::slurm;
using namespace std::chrono_literals;

// While `holding`, each sbatch call waits (counted in `in_flight`) before it runs, until open(): a test decides
// what the runner has queued by the time Slurm is asked.
struct SbatchGate {
  bool holding = false;
  int in_flight = 0;
  std::vector<asio::steady_timer*> timers;
  void open() {
    holding = false;
    for (auto* t : timers) t->cancel();
  }
};

// The real ChildCommandRunner, recording every call and its result so tests can check what reached Slurm.
struct RecordingCommands : CommandRunner {
  struct Call {
    std::vector<std::string> argv;
    Result<CommandResult> result;
  };
  std::shared_ptr<std::vector<Call>> calls = std::make_shared<std::vector<Call>>();
  std::shared_ptr<SbatchGate> gate = std::make_shared<SbatchGate>();
  ChildCommandRunner real;
  asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv,
                                             std::optional<std::map<std::string, std::string>> env,
                                             std::chrono::milliseconds timeout) override {
    if (argv[0] == "sbatch" && gate->holding) {
      asio::steady_timer t(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
      gate->timers.push_back(&t);
      ++gate->in_flight;
      while (gate->holding) {
        boost::system::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      --gate->in_flight;
      std::erase(gate->timers, &t);
    }
    auto copy = argv;
    auto r = co_await real.run(std::move(argv), std::move(env), timeout);
    calls->push_back({std::move(copy), r});
    co_return r;
  }
};

// Records what the runner reports for one attempt.
struct Recorder : JobReporter {
  std::vector<JobUpdate> updates;
  std::string out, err;
  std::function<void(const JobUpdate&)> on_update;
  void update(JobUpdate u) override {
    updates.push_back(u);
    if (on_update) on_update(u);
  }
  asio::awaitable<void> output(Stream s, std::uint64_t offset, std::string bytes) override {
    std::string& dst = s == Stream::out ? out : err;
    EXPECT_EQ(offset, dst.size());
    dst += bytes;
    co_return;
  }
};

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// One runner on its own io_context and launch directory (removed afterwards).
struct Lab {
  asio::io_context ioc;
  fs::path launch;
  std::shared_ptr<std::vector<RecordingCommands::Call>> calls;
  std::shared_ptr<SbatchGate> gate;
  std::unique_ptr<SlurmRunner> runner;

  explicit Lab(const std::string& name, std::function<void(SlurmRunnerConfig&)> tweak = {}) {
    launch = fs::path(env_or("SLURM_LAB_JOBS_DIR", "/var/lib/nymph-slurm-lab/jobs")) /
             ("nymph-test-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(launch);
    make_runner(tweak);
  }
  void make_runner(std::function<void(SlurmRunnerConfig&)> tweak = {}) {
    SlurmRunnerConfig c;
    c.launch_dir = launch;
    c.poll_interval = 1s;
    c.poll_jitter = 0.1;
    c.output_interval = 200ms;
    c.command_timeout = 30s;
    if (tweak) tweak(c);
    auto commands = std::make_unique<RecordingCommands>();
    calls = commands->calls;
    gate = commands->gate;
    runner = std::make_unique<SlurmRunner>(ioc.get_executor(), c, std::move(commands), nymph::null_logger());
  }
  ~Lab() {
    runner.reset();
    std::error_code ec;
    fs::remove_all(launch, ec);
  }
  JobUpdate run(JobSpec spec, Recorder& rec, std::chrono::seconds guard = 120s) {
    return run_coro(ioc, runner->run(std::move(spec), rec), guard);
  }
  int count(const std::string& program) const {
    int n = 0;
    for (const auto& c : *calls) n += c.argv[0] == program;
    return n;
  }
};

inline JobSpec spec(const std::string& id, std::vector<std::string> argv) {
  JobSpec s;
  s.job_id = id + "-" + std::to_string(::getpid());
  s.lease_id = "lease-" + id;
  s.argv = std::move(argv);
  return s;
}

// sacct fields of one job as the lab records them (-X -n -P), or "" when it has no record.
inline std::string sacct_fields(const std::string& slurm_id, const std::string& fields) {
  auto r = run_command({"sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", fields});
  std::string s = r.out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// sacct_fields once they read `expected`, polling up to `limit`: right after a job ends, slurmdbd may still
// lack the fields it fills from the job's start (seen: "|0|2" for Partition,ReqCPUS,AllocCPUS of a COMPLETED
// job). Returns the last answer, so a test still fails when the record never matches.
inline std::string sacct_fields_settled(const std::string& slurm_id, const std::string& fields, const std::string& expected,
                                        std::chrono::milliseconds limit = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string got = sacct_fields(slurm_id, fields);
  while (got != expected && std::chrono::steady_clock::now() < deadline) {
    ::usleep(200'000);  // slurmdbd has no "record complete" notification to wait on
    got = sacct_fields(slurm_id, fields);
  }
  return got;
}

}  // namespace nymph::test::lab
