// nymph-bench-slurm-rpcs: slurmctld RPCs per poll cycle of the Slurm runner with N tracked jobs, and the
// process's RSS while tracking them. Run it as a user that may submit jobs (bench/slurm_rpcs/run.sh runs it
// as the lab user). For each N it submits N held jobs (sbatch --hold: pending forever, no CPU used), hands
// them to a SlurmRunner through resume() (the restart path: the same tracking as after run()'s sbatch),
// lets one cycle pass, then reads `sdiag` before and after each of the next `--cycles` cycles. RPCs are
// counted from sdiag's per-message-type table, minus sdiag's own REQUEST_STATS_INFO. Jobs are scancelled
// at the end of each N.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "slurm/child_command_runner.hpp"
#include "slurm/parse.hpp"

namespace {

namespace asio = boost::asio;

// Completion of the bench's spawned coroutines: a failure ends the run (it propagates out of io_context::run)
// instead of vanishing and leaving the bench waiting for a figure that never comes.
constexpr auto rethrow_error = [](std::exception_ptr e, auto&&...) {
  if (e) std::rethrow_exception(e);
};
using namespace nymph::runners;
using namespace nymph::runners::slurm;
using namespace std::chrono_literals;
using nymph::slurm::ChildCommandRunner;
using nymph::slurm::CommandRunner;
using nymph::slurm::parse_sbatch_output;

// Counts the commands the runner runs, so the bench knows when a cycle has finished.
struct CountingCommands : CommandRunner {
  ChildCommandRunner real;
  int squeue_calls = 0, sacct_calls = 0, scancel_calls = 0;
  asio::awaitable<nymph::Result<CommandResult>> run(std::vector<std::string> argv,
                                                   std::optional<std::map<std::string, std::string>> env,
                                                   std::chrono::milliseconds timeout) override {
    std::string prog = argv[0];
    auto r = co_await real.run(std::move(argv), std::move(env), timeout);
    squeue_calls += prog == "squeue";
    sacct_calls += prog == "sacct";
    scancel_calls += prog == "scancel";
    co_return r;
  }
};

struct NullReporter : JobReporter {
  void update(JobUpdate) override {}
  asio::awaitable<void> output(Stream, std::uint64_t, std::string) override { co_return; }
};

std::string run_text(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// sdiag's "RPC statistics by message type": name → count.
std::map<std::string, long> rpc_counts() {
  std::map<std::string, long> counts;
  std::istringstream in(run_text("sdiag"));
  std::regex line(R"(^\s+([A-Z_]+)\s+\(\s*\d+\) count:(\d+))");
  bool in_types = false;
  for (std::string l; std::getline(in, l);) {
    if (l.find("by message type") != std::string::npos) in_types = true;
    else if (l.find("by user") != std::string::npos) in_types = false;
    std::smatch m;
    if (in_types && std::regex_search(l, m, line)) counts[m[1]] = std::stol(m[2]);
  }
  return counts;
}

std::map<std::string, long> diff(const std::map<std::string, long>& before, const std::map<std::string, long>& after) {
  std::map<std::string, long> d;
  for (const auto& [k, v] : after) {
    long was = before.count(k) ? before.at(k) : 0;
    if (v != was && k != "REQUEST_STATS_INFO") d[k] = v - was;
  }
  return d;
}

long rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string l; std::getline(in, l);)
    if (l.rfind("VmRSS:", 0) == 0) return std::stol(l.substr(6));
  return -1;
}

std::vector<std::string> submit_held(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    auto out = run_text("sbatch --parsable --hold --job-name=nymph-bench --chdir=/tmp --output=/dev/null --wrap=true");
    auto id = parse_sbatch_output(out);
    if (!id) throw std::runtime_error("sbatch: " + id.error().message);
    ids.push_back(*id);
  }
  return ids;
}

void run_until(asio::io_context& ioc, const std::function<bool()>& done, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("timed out waiting for a poll cycle");
    ioc.run_for(50ms);
  }
}

void bench(int n, int cycles, const std::filesystem::path& base) {
  auto t0 = std::chrono::steady_clock::now();
  auto ids = submit_held(n);
  double submit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  asio::io_context ioc;
  SlurmRunnerConfig c;
  c.launch_dir = base / ("n" + std::to_string(n));
  c.poll_interval = 2s;
  c.poll_jitter = 0;
  c.max_jobs = n;
  c.output_interval = 2s;
  auto counting = std::make_unique<CountingCommands>();
  CountingCommands& cmds = *counting;
  SlurmRunner runner(ioc.get_executor(), c, std::move(counting), nymph::null_logger());
  NullReporter reporter;
  for (int i = 0; i < n; ++i) {
    JournalEntry e{"bench-" + std::to_string(i), 1, "lease", ids[i], c.launch_dir / ("bench-" + std::to_string(i) + "-1"),
                   WallClock::now()};
    asio::co_spawn(ioc, runner.resume(e, reporter), rethrow_error);
  }
  run_until(ioc, [&] { return cmds.squeue_calls >= 1; }, 120s);  // warm-up cycle
  long total = 0;
  std::map<std::string, long> by_type;
  for (int k = 0; k < cycles; ++k) {
    auto before = rpc_counts();
    int target = cmds.squeue_calls + 1;
    run_until(ioc, [&] { return cmds.squeue_calls >= target; }, 120s);
    auto d = diff(before, rpc_counts());
    for (const auto& [t, v] : d) {
      by_type[t] += v;
      total += v;
    }
  }
  long rss = rss_kib();
  std::printf("N=%-5d tracked=%-5zu rpcs/cycle=%.1f  (", n, runner.tracked(), double(total) / cycles);
  for (const auto& [t, v] : by_type) std::printf("%s %.1f ", t.c_str(), double(v) / cycles);
  std::printf(") squeue/cycle=1 sacct=%d  RSS=%ld KiB  submit=%.1fs\n", cmds.sacct_calls, rss, submit_s);
  std::fflush(stdout);
  for (std::size_t i = 0; i < ids.size(); i += 200) {
    std::string cmd = "scancel";
    for (std::size_t j = i; j < std::min(ids.size(), i + 200); ++j) cmd += " " + ids[j];
    run_text(cmd);
  }
  run_until(ioc, [&] { return runner.tracked() == 0; }, 180s);  // the runner sees them end
  ioc.run_for(3s);
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// slurmctld RPCs per minute (sdiag, all message types but sdiag's own) while a runner tracks the held jobs `ids`
// and nothing changes, over `seconds` after a warm-up cycle: with a fixed cycle (poll_interval 10 s, the old
// behaviour) when `adaptive` is false, else with the agent's defaults (10 s doubling to 60 s, budget 60/min).
void idle_rate(const std::vector<std::string>& ids, bool adaptive, int seconds, const std::filesystem::path& dir) {
  asio::io_context ioc;
  SlurmRunnerConfig c;
  c.launch_dir = dir;
  c.poll_interval = 10s;
  c.poll_interval_max = adaptive ? 60s : 10s;
  c.rpc_budget_per_minute = adaptive ? 60 : 0;
  c.max_jobs = static_cast<int>(ids.size());
  c.output_interval = 10s;
  auto counting = std::make_unique<CountingCommands>();
  CountingCommands& cmds = *counting;
  SlurmRunner runner(ioc.get_executor(), c, std::move(counting), nymph::null_logger());
  NullReporter reporter;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string job = "idle-" + std::to_string(i);
    JournalEntry e{job, 1, "lease", ids[i], c.launch_dir / (job + "-1"), WallClock::now()};
    asio::co_spawn(ioc, runner.resume(e, reporter), rethrow_error);
  }
  run_until(ioc, [&] { return cmds.squeue_calls >= 1; }, 120s);  // warm-up cycle
  auto before = rpc_counts();
  const int squeue_before = cmds.squeue_calls;
  const double cpu_before = cpu_seconds();
  ioc.run_for(std::chrono::seconds(seconds));
  auto d = diff(before, rpc_counts());
  long total = 0;
  for (const auto& [t, v] : d) total += v;
  const double minutes = seconds / 60.0;
  std::printf("N=%-5zu %-8s  slurmctld RPCs/min=%.2f  squeue/min=%.2f  agent CPU/min=%.1f ms  over %d s\n",
              ids.size(), adaptive ? "adaptive" : "fixed", double(total) / minutes,
              double(cmds.squeue_calls - squeue_before) / minutes, (cpu_seconds() - cpu_before) * 1000 / minutes, seconds);
  std::fflush(stdout);
  for (std::size_t i = 0; i < ids.size(); ++i) runner.stop("idle-" + std::to_string(i), StopReason::shutdown);
  ioc.run();  // every resume() returns (detached), the poll loop ends
}

}  // namespace

int main(int argc, char** argv) {
  // NYMPH_BENCH_IDLE_S=S: instead of the per-cycle figures, slurmctld RPCs per minute over S seconds with nothing
  // changing, fixed cycle then adaptive, for each N (the held jobs are shared by both runs).
  if (const char* idle = std::getenv("NYMPH_BENCH_IDLE_S")) {
    std::vector<int> sizes{100, 1000};
    std::filesystem::path base = argc > 1 ? argv[1] : "/var/lib/nymph-slurm-lab/jobs/nymph-bench";
    if (argc > 2) {
      sizes.clear();
      for (int i = 2; i < argc; ++i) sizes.push_back(std::stoi(argv[i]));
    }
    std::filesystem::remove_all(base);
    std::printf("slurmctld RPCs per minute with nothing changing (sdiag, its own calls excluded); load %s",
                run_text("cat /proc/loadavg").c_str());
    for (int n : sizes) {
      auto ids = submit_held(n);
      idle_rate(ids, false, std::stoi(idle), base / ("fixed-" + std::to_string(n)));
      idle_rate(ids, true, std::stoi(idle), base / ("adaptive-" + std::to_string(n)));
      for (std::size_t i = 0; i < ids.size(); i += 200) {
        std::string cmd = "scancel";
        for (std::size_t j = i; j < std::min(ids.size(), i + 200); ++j) cmd += " " + ids[j];
        run_text(cmd);
      }
    }
    std::filesystem::remove_all(base);
    return 0;
  }
  std::vector<int> sizes{1, 100, 1000};
  int cycles = 3;
  std::filesystem::path base = argc > 1 ? argv[1] : "/var/lib/nymph-slurm-lab/jobs/nymph-bench";
  if (argc > 2) {
    sizes.clear();
    for (int i = 2; i < argc; ++i) sizes.push_back(std::stoi(argv[i]));
  }
  std::filesystem::remove_all(base);
  std::printf("slurmctld RPCs per poll cycle (sdiag by message type, sdiag's own calls excluded), %d cycles each\n", cycles);
  for (int n : sizes) bench(n, cycles, base);
  std::filesystem::remove_all(base);
}
