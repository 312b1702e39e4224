// nymph-bench-slurm-rpcs: the Slurm runner with N tracked jobs (issues 5 and 17). Run it as a user that may
// submit jobs (bench/slurm_rpcs/run.sh runs it as the lab user). For each N (default 1, 100, 1 000, 10 000) it
//   - submits N held jobs (sbatch --hold: pending forever, no CPU used), one sbatch each, timed, with the
//     slurmctld RPCs that cost, and for comparison one `sbatch --array` of N held tasks (cancelled at once);
//   - hands the N jobs to a SlurmRunner through resume() (the restart path: the same tracking as after run()'s
//     sbatch) with a fixed 2 s cycle and reads `sdiag` around each of 3 cycles after a warm-up one: RPCs per
//     cycle by type, agent CPU per cycle (getrusage of this process: squeue's own CPU is not in it), and RSS
//     per tracked job (the growth over the RSS before the runner existed, divided by N), once with the runner's
//     malloc_trim after each cycle turned off (the baseline) and once with it, each in a child process;
//   - hands them to a runner with the agent's defaults and submits NYMPH_BENCH_SAMPLE (20) /bin/true jobs
//     through run() beside them: end -> final event p50/p99, from each exit record's appearance (inotify) to
//     run() returning; with NYMPH_BENCH_IDLE_S=S, then slurmctld RPCs per minute by type over S s of quiet.
// RPCs are counted from sdiag's per-message-type table, minus sdiag's own REQUEST_STATS_INFO. The held jobs
// are scancelled at the end of each N. NYMPH_BENCH_FIXED_VS_ADAPTIVE_S=S measures something else: see main.
#include <malloc.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "common/logging.hpp"
#include "runners/slurm/script.hpp"
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

// Counts the commands the runner runs, so the bench knows when a cycle has finished; `on_squeue_start` (when
// set) runs as each squeue is about to start, between two cycles' work.
struct CountingCommands : CommandRunner {
  ChildCommandRunner real;
  int squeue_calls = 0, sacct_calls = 0, scancel_calls = 0, sbatch_calls = 0;
  std::function<void()> on_squeue_start;
  asio::awaitable<nymph::Result<CommandResult>> run(std::vector<std::string> argv,
                                                   std::optional<std::map<std::string, std::string>> env,
                                                   std::chrono::milliseconds timeout) override {
    std::string prog = argv[0];
    if (prog == "squeue" && on_squeue_start) on_squeue_start();
    auto r = co_await real.run(std::move(argv), std::move(env), timeout);
    squeue_calls += prog == "squeue";
    sacct_calls += prog == "sacct";
    scancel_calls += prog == "scancel";
    sbatch_calls += prog == "sbatch";
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

// A "Vm...:" figure of /proc/self/status in KiB (-1 when missing).
long status_kib(std::string_view field) {
  std::ifstream in("/proc/self/status");
  for (std::string l; std::getline(in, l);)
    if (l.rfind(field, 0) == 0) return std::stol(l.substr(field.size()));
  return -1;
}

long rss_kib() { return status_kib("VmRSS:"); }

// VmHWM: the peak RSS since the process started or since reset_peak_rss().
long peak_rss_kib() { return status_kib("VmHWM:"); }

// Resets VmHWM to the current RSS (Linux >= 4.0: "5" to /proc/self/clear_refs).
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// glibc's malloc_stats() (per-arena bytes from the system and in use) and RSS by kind of mapping, to stderr.
void print_memory_map() {
  ::malloc_stats();
  std::ifstream in("/proc/self/smaps");
  std::map<std::string, long> rss_by_kind;
  std::string kind;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && std::isxdigit(static_cast<unsigned char>(l[0])) && l.find('-') < l.find(' ')) {
      std::istringstream fields(l);
      std::string range, perms, offset, dev, inode, name;
      fields >> range >> perms >> offset >> dev >> inode >> name;
      kind = name.empty() ? "anonymous" : name[0] == '/' ? "file-backed" : name;
    } else if (l.rfind("Rss:", 0) == 0) {
      rss_by_kind[kind] += std::stol(l.substr(4));
    }
  }
  for (const auto& [k, v] : rss_by_kind) std::fprintf(stderr, "  RSS %s: %ld KiB\n", k.c_str(), v);
}

// Bytes the allocator has handed out and not had back (RSS also counts what it keeps after a free).
long heap_in_use() {
  auto m = ::mallinfo2();
  return static_cast<long>(m.uordblks + m.hblkhd);
}

// The job id and lease id of the bench's job `i`, as long as the control plane's ("job_" / "lse_" and a 26-character
// ULID): their strings are part of what a tracked job costs.
std::string bench_job_id(const std::string& prefix, std::size_t i) {
  std::string number = std::to_string(i);
  const std::size_t digits = std::max<std::size_t>(number.size(), 26 - std::min<std::size_t>(prefix.size(), 18));
  return "job_" + prefix + std::string(digits - number.size(), '0') + number;
}

// The Slurm job name of the bench's held job `i`, the name an agent gives its job (slurm_job_name): the tracker
// checks it against squeue's rows, and it is part of what a tracked job costs.
std::string held_job_name(std::size_t i) { return slurm_job_name(bench_job_id("held", i)); }

std::vector<std::string> submit_held(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    // A busy slurmctld (purging the previous N's records) may time a submission out: try again, a few times.
    for (int tries = 1;; ++tries) {
      auto out = run_text("sbatch --parsable --hold --job-name=" + held_job_name(static_cast<std::size_t>(i)) +
                          " --chdir=/tmp --output=/dev/null --wrap=true");
      auto id = parse_sbatch_output(out);
      if (id) {
        ids.push_back(*id);
        break;
      }
      if (tries == 5) throw std::runtime_error("sbatch: " + id.error().message);
      ::sleep(static_cast<unsigned>(tries));
    }
  }
  return ids;
}

// Hands the held Slurm jobs `ids` to `runner` as journaled attempts "<prefix>-<i>" in `dir` (resume(): the
// restart path, the same tracking as after run()'s sbatch).
void track_held(asio::io_context& ioc, SlurmRunner& runner, JobReporter& reporter, const std::vector<std::string>& ids,
                const std::string& prefix, const std::filesystem::path& dir) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string job = bench_job_id(prefix, i);
    std::string lease = "lse_" + job.substr(4);
    // The held jobs may come from an earlier run (NYMPH_BENCH_HELD_FILE): the lower bound of their submit time the
    // tracker checks rows against is a day back.
    JournalEntry e{job, 1, lease, ids[i], dir / (job + "-1"), WallClock::now() - std::chrono::hours(24), held_job_name(i)};
    asio::co_spawn(ioc, runner.resume(e, reporter), rethrow_error);
  }
}

// Detaches the `n` attempts track_held gave `runner` (the jobs stay in Slurm), then runs `ioc` until every resume()
// has returned and the poll loop has ended.
void detach_held(asio::io_context& ioc, SlurmRunner& runner, std::size_t n, const std::string& prefix) {
  for (std::size_t i = 0; i < n; ++i) runner.stop(bench_job_id(prefix, i), StopReason::shutdown);
  ioc.run();
}

void run_until(asio::io_context& ioc, const std::function<bool()>& done, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("timed out waiting for a poll cycle");
    ioc.run_for(50ms);
  }
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void cancel_all(const std::vector<std::string>& ids) {
  for (std::size_t i = 0; i < ids.size(); i += 200) {
    std::string cmd = "scancel";
    for (std::size_t j = i; j < std::min(ids.size(), i + 200); ++j) cmd += " " + ids[j];
    run_text(cmd);
  }
}

std::string by_type_text(const std::map<std::string, long>& by_type, double per) {
  std::string s;
  char buf[96];
  for (const auto& [t, v] : by_type) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f", s.empty() ? "" : ", ", t.c_str(), double(v) / per);
    s += buf;
  }
  return s.empty() ? "none" : s;
}

long total_of(const std::map<std::string, long>& by_type) {
  long t = 0;
  for (const auto& [k, v] : by_type) t += v;
  return t;
}

// The times exit records appear in `dir` (the trap of each job's script creates one as the job ends), by file
// name, from an inotify watch on its own thread: the "end" of end → final event.
class ExitRecordWatch {
 public:
  explicit ExitRecordWatch(const std::filesystem::path& dir) : fd_(::inotify_init1(IN_CLOEXEC)) {
    if (fd_ < 0 || ::inotify_add_watch(fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
      throw std::runtime_error("inotify on " + dir.string() + " failed");
    thread_ = std::thread([this] { watch(); });
  }
  ~ExitRecordWatch() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  // When the record named `name` appeared, if it has.
  std::optional<std::chrono::system_clock::time_point> seen(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = seen_.find(name);
    if (it == seen_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void watch() {
    alignas(inotify_event) char buf[4096];
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::read(fd_, buf, sizeof buf);
      auto now = std::chrono::system_clock::now();
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        if (ev->len > 0) {
          std::lock_guard lock(mutex_);
          seen_.emplace(ev->name, now);
        }
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
    }
  }
  int fd_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::string, std::chrono::system_clock::time_point> seen_;
  std::thread thread_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(std::lround(p * double(v.size() - 1)));
  return v[std::min(i, v.size() - 1)];
}

// End → final event with `ids` tracked by a runner with the agent's defaults (poll 10 s doubling to 60 s, RPC
// budget 60/min, exit records listed every 2 s): `sample` `/bin/true` jobs submitted through run() at once
// (they run two at a time on the lab's 2 CPUs), each timed from its exit record appearing to run() returning
// its final update. Then, when `idle_s` > 0, slurmctld RPCs per minute by type over idle_s seconds with
// nothing changing.
void with_defaults(const std::vector<std::string>& ids, int sample, int idle_s, const std::filesystem::path& dir) {
  asio::io_context ioc;
  SlurmRunnerConfig c;
  c.launch_dir = dir;
  c.poll_interval = 10s;
  c.poll_interval_max = 60s;
  c.rpc_budget_per_minute = 60;
  c.max_jobs = static_cast<int>(ids.size()) + sample;
  c.output_interval = 2s;
  auto counting = std::make_unique<CountingCommands>();
  CountingCommands& cmds = *counting;
  SlurmRunner runner(ioc.get_executor(), c, std::move(counting), nymph::null_logger());
  NullReporter reporter;
  track_held(ioc, runner, reporter, ids, "held", c.launch_dir);
  run_until(ioc, [&] { return cmds.squeue_calls >= 1; }, 600s);  // warm-up cycle
  ExitRecordWatch watch(dir / "exits");
  std::vector<double> latency_s;
  std::vector<std::string> failures;
  int done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < sample; ++i) {
    JobSpec spec;
    spec.job_id = "sample-" + std::to_string(i);
    spec.lease_id = "lease";
    spec.argv = {"/bin/true"};
    auto record = nymph::runners::slurm::job_dir_name(spec.job_id, spec.attempt);
    asio::co_spawn(ioc, runner.run(spec, reporter),
                   [&, job = spec.job_id, record](std::exception_ptr e, JobUpdate u) {
                     if (e) std::rethrow_exception(e);
                     auto final_at = std::chrono::system_clock::now();
                     ++done;
                     runner.release(job);
                     auto ended = watch.seen(record);
                     if (u.state != JobState::succeeded || !ended)
                       failures.push_back(job + ": " + std::string(to_string(u.state)) + " " + u.message);
                     else latency_s.push_back(std::chrono::duration<double>(final_at - *ended).count());
                   });
  }
  run_until(ioc, [&] { return done == sample; }, 1200s);
  const double sample_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  defaults, %d /bin/true jobs beside them: end -> final event p50 %.2f s, p99 %.2f s, max %.2f s "
              "(all %d done in %.1f s)\n",
              sample, percentile(latency_s, 0.5), percentile(latency_s, 0.99), percentile(latency_s, 1.0), sample,
              sample_s);
  for (const auto& f : failures) std::printf("    not timed: %s\n", f.c_str());
  std::fflush(stdout);
  if (idle_s > 0) {
    auto before = rpc_counts();
    const int squeue_before = cmds.squeue_calls;
    const double cpu_before = cpu_seconds();
    ioc.run_for(std::chrono::seconds(idle_s));
    auto d = diff(before, rpc_counts());
    const double minutes = idle_s / 60.0;
    std::printf("  defaults, nothing changing for %d s: slurmctld RPCs/min %.2f (%s), squeue/min %.2f, agent CPU/min "
                "%.1f ms\n",
                idle_s, double(total_of(d)) / minutes, by_type_text(d, minutes).c_str(),
                double(cmds.squeue_calls - squeue_before) / minutes, (cpu_seconds() - cpu_before) * 1000 / minutes);
  }
  std::fflush(stdout);
  detach_held(ioc, runner, ids.size(), "held");
}

void track_fixed(const std::vector<std::string>& ids, int n, int cycles, bool trim, const std::filesystem::path& base);

// One N: submits N held jobs one sbatch each (timed, RPCs by type), and for comparison one array of N held tasks;
// tracks the N jobs with a fixed 2 s cycle for `cycles` cycles (RPCs per cycle by type, agent CPU per cycle, RSS
// per tracked job: track_fixed, without then with the runner's malloc_trim), then with the agent's defaults
// (with_defaults).
// The held jobs of a previous run kept in `file` (one Slurm id per line), when it lists `n` of them that Slurm
// still knows; else none.
std::vector<std::string> held_jobs_kept(const std::string& file, int n) {
  std::vector<std::string> ids;
  std::ifstream in(file);
  for (std::string id; std::getline(in, id);)
    if (!id.empty()) ids.push_back(id);
  if (static_cast<int>(ids.size()) != n) return {};
  if (run_text("squeue --noheader --format=%i --job=" + ids.back()).find(ids.back()) == std::string::npos) return {};
  return ids;
}

// Submits `n` held jobs one sbatch each and, for comparison, one array of `n` held tasks (cancelled at once);
// prints the time and slurmctld RPCs of each; returns the held jobs' ids.
std::vector<std::string> submit_held_timed(int n) {
  auto rpcs_before = rpc_counts();
  auto t0 = std::chrono::steady_clock::now();
  auto ids = submit_held(n);
  double submit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto submit_rpcs = diff(rpcs_before, rpc_counts());
  rpcs_before = rpc_counts();
  t0 = std::chrono::steady_clock::now();
  auto array_out = run_text("sbatch --parsable --hold --job-name=nymph-bench-array --chdir=/tmp --output=/dev/null "
                            "--array=0-" + std::to_string(n - 1) + " --wrap=true");
  double array_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto array_rpcs = diff(rpcs_before, rpc_counts());
  auto array_id = parse_sbatch_output(array_out);
  if (!array_id) throw std::runtime_error("sbatch --array: " + array_id.error().message);
  run_text("scancel " + *array_id);
  std::printf("N=%d\n  submit: %d sbatch calls %.1f s (%.2f ms each), slurmctld RPCs %ld (%s); one sbatch --array of "
              "%d tasks %.3f s, RPCs %ld (%s)\n",
              n, n, submit_s, submit_s * 1000 / n, total_of(submit_rpcs), by_type_text(submit_rpcs, 1).c_str(), n,
              array_s, total_of(array_rpcs), by_type_text(array_rpcs, 1).c_str());
  return ids;
}

void bench(int n, int cycles, int sample, int idle_s, const std::filesystem::path& base) {
  // NYMPH_BENCH_HELD_FILE=F: the held jobs are kept (not cancelled) in F for the next run, which reuses them
  // (no submission figures then): to measure tracking again without 10 000 sbatch calls.
  const char* held_file = std::getenv("NYMPH_BENCH_HELD_FILE");
  const std::string kept_in = held_file ? std::string(held_file) + "." + std::to_string(n) : "";
  auto ids = held_file ? held_jobs_kept(kept_in, n) : std::vector<std::string>{};
  if (!ids.empty()) {
    std::printf("N=%d\n  submit: not measured, %d held jobs kept from %s\n", n, n, kept_in.c_str());
  } else {
    ids = submit_held_timed(n);
    if (held_file) {
      std::ofstream out(kept_in);
      for (const auto& id : ids) out << id << '\n';
    }
  }
  std::fflush(stdout);

  // Each in a child process of its own, from the same heap: neither reuses what the other freed.
  for (bool trim : {false, true}) {
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
      track_fixed(ids, n, cycles, trim, base);
      std::fflush(stdout);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("the tracking run failed");
  }
  with_defaults(ids, sample, idle_s, base / ("defaults-" + std::to_string(n)));
  if (!held_file) cancel_all(ids);
}

// Tracks the held jobs `ids` with a fixed 2 s cycle for `cycles` cycles: RPCs per cycle by type, agent CPU per
// cycle, and memory per tracked job: RSS and heap in use as the cycle after them starts (between two cycles: the
// previous cycle's squeue output and parse are gone, as they are for most of an agent's life), and the peak RSS
// during the cycles (VmHWM, reset after the warm-up cycle). Each is the growth over the figure before the runner
// existed, divided by N. `trim` false turns the runner's malloc_trim after each cycle off (the baseline of the
// same run). NYMPH_BENCH_MALLOC_STATS=1 also prints glibc's malloc_stats() and RSS by mapping at that point.
void track_fixed(const std::vector<std::string>& ids, int n, int cycles, bool trim, const std::filesystem::path& base) {
  const long rss_before = rss_kib();
  const long heap_before = heap_in_use();
  {
    asio::io_context ioc;
    SlurmRunnerConfig c;
    c.launch_dir = base / ("n" + std::to_string(n) + (trim ? "-trim" : ""));
    c.trim_from_tracked_jobs = trim ? 1000 : 0;
    c.poll_interval = 2s;
    c.poll_jitter = 0;
    c.max_jobs = n;
    c.output_interval = 2s;
    auto counting = std::make_unique<CountingCommands>();
    CountingCommands& cmds = *counting;
    SlurmRunner runner(ioc.get_executor(), c, std::move(counting), nymph::null_logger());
    NullReporter reporter;
    track_held(ioc, runner, reporter, ids, "bench", c.launch_dir);
    run_until(ioc, [&] { return cmds.squeue_calls >= 1; }, 600s);  // warm-up cycle
    reset_peak_rss();
    std::map<std::string, long> by_type;
    const double cpu_before = cpu_seconds();
    const int squeue_before = cmds.squeue_calls;
    for (int k = 0; k < cycles; ++k) {
      auto before = rpc_counts();
      int target = cmds.squeue_calls + 1;
      run_until(ioc, [&] { return cmds.squeue_calls >= target; }, 600s);
      for (const auto& [t, v] : diff(before, rpc_counts())) by_type[t] += v;
    }
    // The wait between cycles is idle (timers only): the CPU measured is the cycles'.
    const double cpu_ms = (cpu_seconds() - cpu_before) * 1000 / cycles;
    long rss = -1, heap = 0;
    cmds.on_squeue_start = [&] {
      if (rss >= 0) return;
      rss = rss_kib();
      heap = heap_in_use();
      if (std::getenv("NYMPH_BENCH_MALLOC_STATS")) print_memory_map();
    };
    run_until(ioc, [&] { return rss >= 0; }, 600s);
    const long peak = peak_rss_kib();
    std::printf("  tracking, fixed 2 s cycle, malloc_trim %s: tracked %zu, slurmctld RPCs/cycle %.1f (%s), squeue/cycle %.1f, "
                "agent CPU/cycle %.1f ms; between cycles RSS %ld KiB (+%ld KiB: %.0f bytes per tracked job; heap in "
                "use +%.0f bytes per tracked job); peak RSS during the cycles %ld KiB (+%.0f bytes per tracked job)\n",
                trim ? "from 1000 jobs (default)" : "off (baseline)", runner.tracked(), double(total_of(by_type)) / cycles, by_type_text(by_type, cycles).c_str(),
                double(cmds.squeue_calls - squeue_before) / cycles, cpu_ms, rss, rss - rss_before,
                double(rss - rss_before) * 1024 / n, double(heap - heap_before) / n, peak,
                double(peak - rss_before) * 1024 / n);
    std::fflush(stdout);
    cmds.on_squeue_start = nullptr;
    detach_held(ioc, runner, ids.size(), "bench");
  }
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
  track_held(ioc, runner, reporter, ids, "idle", c.launch_dir);
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
  detach_held(ioc, runner, ids.size(), "idle");
}

// Counts the attempts reported submitted (their first update with a Slurm id) and keeps those ids.
struct SubmitReporter : JobReporter {
  std::set<std::string> slurm_ids;
  void update(JobUpdate u) override {
    if (u.slurm_job_id) slurm_ids.insert(*u.slurm_job_id);
  }
  asio::awaitable<void> output(Stream, std::uint64_t, std::string) override { co_return; }
};

struct SubmitFigures {
  double seconds = 0;
  int sbatch_calls = 0;
  long submit_rpcs = 0;  // sdiag REQUEST_SUBMIT_BATCH_JOB
  long all_rpcs = 0;     // every message type but sdiag's own
};

// `n` `/bin/sleep 600` jobs (they pend on the lab's few CPUs) handed to one runner through run() at once, as an
// agent hands it a burst of leases: the time until every attempt was reported submitted, the sbatch calls it
// made and the slurmctld RPCs of that time. `max_array_tasks` 1 is one sbatch per job; `budget` is
// rpc_budget_per_minute (0: none). The attempts are then detached and their jobs scancelled.
SubmitFigures submit_through_run(int n, std::size_t max_array_tasks, int budget, const std::filesystem::path& dir) {
  asio::io_context ioc;
  SlurmRunnerConfig c;
  c.launch_dir = dir;
  c.poll_interval = 10s;
  c.poll_interval_max = 60s;
  c.rpc_budget_per_minute = budget;
  c.max_jobs = n;
  c.max_array_tasks = max_array_tasks;
  c.output_interval = 10s;
  auto counting = std::make_unique<CountingCommands>();
  CountingCommands& cmds = *counting;
  SlurmRunner runner(ioc.get_executor(), c, std::move(counting), nymph::null_logger());
  std::vector<SubmitReporter> reporters(static_cast<std::size_t>(n));
  std::vector<std::string> failures;  // attempts that ended before they were submitted
  auto before = rpc_counts();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    JobSpec spec;
    spec.job_id = "burst-" + std::to_string(i);
    spec.lease_id = "lease";
    spec.argv = {"/bin/sleep", "600"};
    auto& reporter = reporters[static_cast<std::size_t>(i)];
    asio::co_spawn(ioc, runner.run(spec, reporter), [&failures, &reporter, job = spec.job_id](std::exception_ptr e, JobUpdate u) {
      if (e) std::rethrow_exception(e);
      if (reporter.slurm_ids.empty()) failures.push_back(job + ": " + std::string(to_string(u.state)) + " " + u.message);
    });
  }
  auto submitted = [&] {
    return std::all_of(reporters.begin(), reporters.end(), [](const auto& r) { return !r.slurm_ids.empty(); });
  };
  run_until(ioc, [&] { return !failures.empty() || submitted(); }, 3600s);
  if (!failures.empty()) throw std::runtime_error(std::to_string(failures.size()) + " not submitted, e.g. " + failures[0]);
  SubmitFigures f;
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto d = diff(before, rpc_counts());
  f.sbatch_calls = cmds.sbatch_calls;
  f.submit_rpcs = d.count("REQUEST_SUBMIT_BATCH_JOB") ? d.at("REQUEST_SUBMIT_BATCH_JOB") : 0;
  f.all_rpcs = total_of(d);
  std::set<std::string> jobs;  // an array's tasks go with the array
  for (const auto& r : reporters)
    for (const auto& id : r.slurm_ids) jobs.insert(id.substr(0, id.find('_')));
  detach_held(ioc, runner, static_cast<std::size_t>(n), "burst");
  cancel_all(std::vector<std::string>(jobs.begin(), jobs.end()));
  return f;
}

// For each N: N sbatch calls one after another (the baseline: the fastest one sbatch per job goes, as
// submit_held does), then N jobs through the runner's run() with job arrays, without an RPC budget and under the
// agent's default of 60 RPCs a minute, one sbatch per job through run() without a budget (at most
// max_concurrent_commands, 4, sbatch calls at once), and for N <= 100 one sbatch per job under the budget (beyond,
// that budget alone makes it N seconds or more).
void submit_bench(const std::vector<int>& sizes, const std::filesystem::path& base) {
  for (int n : sizes) {
    SubmitFigures one_each;
    auto before = rpc_counts();
    const auto t0 = std::chrono::steady_clock::now();
    auto held = submit_held(n);
    one_each.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto d = diff(before, rpc_counts());
    one_each.sbatch_calls = n;
    one_each.submit_rpcs = d.count("REQUEST_SUBMIT_BATCH_JOB") ? d.at("REQUEST_SUBMIT_BATCH_JOB") : 0;
    one_each.all_rpcs = total_of(d);
    cancel_all(held);
    auto line = [n](const char* what, const SubmitFigures& f, const SubmitFigures& baseline) {
      std::printf("N=%-5d %-44s %7.2f s (%.3f x baseline)  sbatch calls %5d (%.4f x)  submit RPCs %5ld  all RPCs %5ld\n",
                  n, what, f.seconds, f.seconds / baseline.seconds, f.sbatch_calls,
                  double(f.sbatch_calls) / baseline.sbatch_calls, f.submit_rpcs, f.all_rpcs);
      std::fflush(stdout);
    };
    line("N sbatch calls in a row (baseline)", one_each, one_each);
    line("run(), job arrays, no RPC budget", submit_through_run(n, 1000, 0, base / ("arrays-" + std::to_string(n))),
         one_each);
    line("run(), job arrays, budget 60 RPCs/min", submit_through_run(n, 1000, 60, base / ("budget-" + std::to_string(n))),
         one_each);
    line("run(), one sbatch per job, no budget, 4 at once",
         submit_through_run(n, 1, 0, base / ("one-free-" + std::to_string(n))), one_each);
    if (n <= 100)
      line("run(), one sbatch per job, budget 60 RPCs/min",
           submit_through_run(n, 1, 60, base / ("one-" + std::to_string(n))), one_each);
  }
}

// The bench's arguments: the working directory (argv[1], else the lab's), and the N to run (argv[2...]; replacing
// `sizes`, the mode's defaults, when given).
std::filesystem::path read_arguments(int argc, char** argv, std::vector<int>& sizes) {
  if (argc > 2) {
    sizes.clear();
    for (int i = 2; i < argc; ++i) sizes.push_back(std::stoi(argv[i]));
  }
  return argc > 1 ? argv[1] : "/var/lib/nymph-slurm-lab/jobs/nymph-bench";
}

}  // namespace

int main(int argc, char** argv) {
  // NYMPH_BENCH_SUBMIT=1: instead of the per-N figures, the time and calls to submit N jobs through the runner's
  // run(), one sbatch per job against job arrays (submit_bench).
  if (std::getenv("NYMPH_BENCH_SUBMIT")) {
    std::vector<int> sizes{1, 100, 1000, 10000};
    const auto base = read_arguments(argc, argv, sizes);
    std::filesystem::remove_all(base);
    std::printf("Submitting N jobs through SlurmRunner::run() at once (slurmctld RPCs from sdiag); load %s",
                run_text("cat /proc/loadavg").c_str());
    submit_bench(sizes, base);
    std::filesystem::remove_all(base);
    return 0;
  }
  // NYMPH_BENCH_FIXED_VS_ADAPTIVE_S=S: instead of the per-N figures, slurmctld RPCs per minute over S seconds with
  // nothing changing, fixed cycle then adaptive, for each N (the held jobs are shared by both runs).
  if (const char* idle = std::getenv("NYMPH_BENCH_FIXED_VS_ADAPTIVE_S")) {
    std::vector<int> sizes{100, 1000};
    const auto base = read_arguments(argc, argv, sizes);
    std::filesystem::remove_all(base);
    std::printf("slurmctld RPCs per minute with nothing changing (sdiag, its own calls excluded); load %s",
                run_text("cat /proc/loadavg").c_str());
    for (int n : sizes) {
      auto ids = submit_held(n);
      idle_rate(ids, false, std::stoi(idle), base / ("fixed-" + std::to_string(n)));
      idle_rate(ids, true, std::stoi(idle), base / ("adaptive-" + std::to_string(n)));
      cancel_all(ids);
    }
    std::filesystem::remove_all(base);
    return 0;
  }
  std::vector<int> sizes{1, 100, 1000, 10000};
  int cycles = 3;
  auto env_int = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v ? std::stoi(v) : fallback;
  };
  const int sample = env_int("NYMPH_BENCH_SAMPLE", 20);
  const int idle_s = env_int("NYMPH_BENCH_IDLE_S", 0);
  const auto base = read_arguments(argc, argv, sizes);
  std::filesystem::remove_all(base);
  std::printf("The Slurm runner with N tracked jobs (slurmctld RPCs from sdiag by message type, sdiag's own calls "
              "excluded); load %s", run_text("cat /proc/loadavg").c_str());
  for (int n : sizes) bench(n, cycles, sample, idle_s, base);
  std::filesystem::remove_all(base);
}
