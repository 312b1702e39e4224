#pragma once
// A scripted Slurm behind the CommandRunner interface: sbatch hands out ids and can "run" the job by
// writing its output files; squeue answers from a per-job script of states; sacct from a per-job final line.
// Every call is recorded, so tests can count squeue/sacct invocations per cycle. Forward and Recorder connect
// it and a reporter to a SlurmRunner.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "runners/runner.hpp"
#include "runners/slurm/script.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::test {

using nymph::slurm::CommandResult;

struct FakeJob {
  std::filesystem::path dir;
  std::deque<std::string> squeue;  // "STATE|reason" per squeue call (last one repeats); "" = not shown
  std::string sacct = "COMPLETED|0:0";    // "STATE|CODE:SIG"; "" = no accounting record
  std::string name;                        // the --job-name it was submitted with
  std::string wait_status = "0";           // squeue's exit_code field
  std::int64_t submit_time = 0;            // epoch seconds, set at submission
  std::string stdout_bytes, stderr_bytes;  // written to the job's files when it is first shown RUNNING
  bool wrote = false;
};

class FakeSlurm : public nymph::slurm::CommandRunner {
 public:
  std::map<std::string, FakeJob> jobs;            // by Slurm id
  std::vector<std::vector<std::string>> calls;    // every argv
  std::vector<std::optional<std::map<std::string, std::string>>> envs;
  std::function<FakeJob(const std::filesystem::path& dir)> on_submit = [](const auto&) { return FakeJob{}; };
  std::function<void(int squeue_call)> on_squeue;  // called before answering the n-th squeue (1-based)
  nymph::Result<CommandResult> sbatch_answer{CommandResult{}};  // exit_code != 0: sbatch fails with it
  int next_id = 1000;
  int squeue_calls = 0;
  std::string cluster = "nymphlab";        // printed in squeue's and sacct's rows
  bool accounting = true;                  // false: sacct fails as on a cluster without slurmdbd
  int sbatch_refusals = 0;                 // refuse this many sbatch calls as rate limited first
  // Job arrays: a script with #SBATCH --array=0-N and a `case` line per task (render_array_script) becomes the
  // jobs "<id>_<i>", each with its task's directory. `max_array_size` is scontrol's MaxArraySize; sbatch refuses
  // an array beyond it, and every array while `refuse_arrays`.
  std::size_t max_array_size = 1001;
  bool refuse_arrays = false;
  std::vector<std::size_t> array_sizes;    // tasks of each array submitted, in order
  std::vector<std::string> array_scripts;  // the text of each array script submitted (refused ones too)
  // While `hold_sbatch`, each sbatch call waits (counted in sbatch_in_flight) until release_sbatch().
  bool hold_sbatch = false;
  int sbatch_in_flight = 0;
  int max_sbatch_in_flight = 0;  // the most sbatch calls held at once
  void release_sbatch() {
    hold_sbatch = false;
    for (auto* t : gates_) t->cancel();
  }

  // slurmctld's per-user RPC rate limit as Slurm 23.02 does it (rl_enable): a bucket of `capacity` tokens that
  // refills `per_second` tokens a second (Slurm's defaults: 30 and 2). Each sbatch, squeue and scontrol call,
  // and each id given to scancel, takes a token; a call that finds none is refused ("Rate limit exceeded").
  struct RateLimit {
    double capacity = 30, per_second = 2;
    double tokens = capacity;
    std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
  };
  std::optional<RateLimit> rate_limit;
  int rate_limited = 0;                                        // calls refused by rate_limit
  std::vector<std::chrono::steady_clock::time_point> rpc_times;  // of each slurmctld RPC asked for, refused too

  int count(const std::string& program) const {
    int n = 0;
    for (const auto& c : calls) n += c[0] == program;
    return n;
  }

  boost::asio::awaitable<nymph::Result<CommandResult>> run(std::vector<std::string> argv,
                                                          std::optional<std::map<std::string, std::string>> env,
                                                          std::chrono::milliseconds) override {
    calls.push_back(argv);
    envs.push_back(env);
    if (argv[0] == "sbatch" && hold_sbatch) {
      boost::asio::steady_timer gate(co_await boost::asio::this_coro::executor,
                                     boost::asio::steady_timer::time_point::max());
      gates_.push_back(&gate);
      max_sbatch_in_flight = std::max(max_sbatch_in_flight, ++sbatch_in_flight);
      while (hold_sbatch) {
        boost::system::error_code ec;
        co_await gate.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      }
      --sbatch_in_flight;
      std::erase(gates_, &gate);
    }
    co_return answer(argv);
  }

 private:
  std::vector<boost::asio::steady_timer*> gates_;

  // The task directories of an array script ("  <i>) nymph_dir='<dir>' ;;" lines), or none for a plain script.
  static std::vector<std::filesystem::path> array_tasks(const std::string& text) {
    std::vector<std::filesystem::path> dirs;
    if (text.find("#SBATCH --array=") == std::string::npos) return dirs;
    std::size_t at = 0;
    while ((at = text.find(") nymph_dir='", at)) != std::string::npos) {
      auto start = at + 13;
      auto end = text.find('\'', start);
      dirs.emplace_back(text.substr(start, end - start));
      at = end;
    }
    return dirs;
  }

  static std::string text_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static std::vector<std::string> ids_of(const std::string& list) {
    std::vector<std::string> ids;
    std::size_t pos = 0;
    while (pos <= list.size()) {
      auto comma = list.find(',', pos);
      ids.push_back(list.substr(pos, comma - pos));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    return ids;
  }

  // Takes `n` tokens from the bucket at `now`, or none when it holds fewer.
  bool take_tokens(std::chrono::steady_clock::time_point now, int n) {
    auto& b = *rate_limit;
    b.tokens = std::min(b.capacity, b.tokens + std::chrono::duration<double>(now - b.at).count() * b.per_second);
    b.at = now;
    if (b.tokens < n) return false;
    b.tokens -= n;
    return true;
  }

  nymph::Result<CommandResult> answer(const std::vector<std::string>& argv) {
    const std::string& prog = argv[0];
    if (prog != "sacct") {
      const auto now = std::chrono::steady_clock::now();
      const int rpcs = prog == "scancel" ? static_cast<int>(argv.size()) - 1 : 1;
      for (int i = 0; i < rpcs; ++i) rpc_times.push_back(now);
      if (rate_limit && !take_tokens(now, rpcs)) {
        ++rate_limited;
        return CommandResult{1, "", prog + ": error: Rate limit exceeded, please try again later\n"};
      }
    }
    if (prog == "sbatch" && sbatch_refusals > 0) {
      --sbatch_refusals;
      return CommandResult{1, "", "sbatch: error: Batch job submission failed: Rate limit exceeded\n"};
    }
    if (prog == "sbatch") {
      const std::string script = text_of(argv.back());
      const auto tasks = array_tasks(script);
      if (!tasks.empty()) array_scripts.push_back(script);
      if (!tasks.empty() && (refuse_arrays || tasks.size() > max_array_size))
        return CommandResult{1, "", "sbatch: error: Batch job submission failed: Invalid job array specification\n"};
      if (!sbatch_answer || sbatch_answer->exit_code != 0) return sbatch_answer;
      std::string id = std::to_string(next_id++);
      auto dir = std::filesystem::path(argv.back()).parent_path();
      std::string name;
      for (const auto& a : argv)
        if (a.starts_with("--job-name=")) name = a.substr(11);
      if (name.empty()) name = name_in_script(argv.back());
      const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
      if (!tasks.empty()) {
        array_sizes.push_back(tasks.size());
        for (std::size_t i = 0; i < tasks.size(); ++i) {
          FakeJob task = on_submit(tasks[i]);
          task.dir = tasks[i];
          task.name = name;
          task.submit_time = now_s;
          jobs[id + "_" + std::to_string(i)] = std::move(task);
        }
        return CommandResult{0, id + ";nymphlab\n", ""};
      }
      FakeJob job = on_submit(dir);
      job.dir = dir;
      job.name = name;
      job.submit_time = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
      jobs[id] = std::move(job);
      return CommandResult{0, id + ";nymphlab\n", ""};
    }
    if (prog == "squeue") {
      ++squeue_calls;
      if (on_squeue) on_squeue(squeue_calls);
      std::string out;
      for (const auto& id : ids_of(argv.back())) {
        auto it = jobs.find(id);
        if (it == jobs.end() || it->second.squeue.empty()) continue;
        std::string state = it->second.squeue.front();
        if (it->second.squeue.size() > 1) it->second.squeue.pop_front();
        if (state.starts_with("RUNNING")) write_output(it->second);
        // kSqueueJobFormat: id|state|reason|exit_code|submit|start|cluster|name (state holds "STATE|reason").
        if (!state.empty())
          out += id + "|" + state + "|" + it->second.wait_status + "|" + std::to_string(it->second.submit_time) + "|" +
                 std::to_string(it->second.submit_time) + "|" + cluster + "|" + it->second.name + "\n";
      }
      return CommandResult{0, out, ""};
    }
    if (prog == "sacct") {
      if (!accounting) return CommandResult{1, "", "sacct: error: Slurm accounting storage is disabled\n"};
      std::string out;
      for (const auto& id : ids_of(argv.back())) {
        auto it = jobs.find(id);
        if (it == jobs.end()) continue;
        write_output(it->second);
        if (it->second.sacct.empty()) continue;
        // kSacctJobFormat: id|state|code|submit|cluster|name.
        std::string rest = "|" + std::to_string(it->second.submit_time) + "|" + cluster + "|" + it->second.name + "\n";
        out += id + "|" + it->second.sacct + rest + id + ".batch|" + it->second.sacct + rest;
      }
      return CommandResult{0, out, ""};
    }
    if (prog == "scancel") {
      for (std::size_t i = 1; i < argv.size(); ++i) {
        auto it = jobs.find(argv[i]);
        if (it == jobs.end()) continue;
        it->second.squeue = {""};
        it->second.sacct = "CANCELLED by 1001|0:15";
      }
      return CommandResult{0, "", ""};
    }
    if (prog == "scontrol")
      return CommandResult{0, "ClusterName             = " + cluster + "\nMaxArraySize            = " +
                                  std::to_string(max_array_size) + "\n", ""};
    return nymph::fail("fake slurm: unexpected program " + prog);
  }

  static std::string name_in_script(const std::string& script) {
    std::ifstream in(script);
    std::string line;
    while (std::getline(in, line))
      if (auto at = line.find("--job-name="); at != std::string::npos) {
        auto v = line.substr(at + 11);
        if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
        return v;
      }
    return {};
  }

  static void write_output(FakeJob& job) {
    if (job.wrote) return;
    job.wrote = true;
    std::ofstream(job.dir / nymph::runners::slurm::kStdoutFile, std::ios::binary) << job.stdout_bytes;
    std::ofstream(job.dir / nymph::runners::slurm::kStderrFile, std::ios::binary) << job.stderr_bytes;
  }
};

// Hands every call to a FakeSlurm that outlives the runner (the runner owns its CommandRunner).
struct Forward : nymph::slurm::CommandRunner {
  explicit Forward(FakeSlurm& f) : fake(f) {}
  FakeSlurm& fake;
  boost::asio::awaitable<nymph::Result<CommandResult>> run(std::vector<std::string> argv,
                                                          std::optional<std::map<std::string, std::string>> env,
                                                          std::chrono::milliseconds timeout) override {
    return fake.run(std::move(argv), std::move(env), timeout);
  }
};

// Records what a runner reports for one attempt; output offsets must be contiguous.
struct Recorder : nymph::runners::JobReporter {
  std::vector<nymph::runners::JobUpdate> updates;
  std::string out, err;
  std::function<void(const nymph::runners::JobUpdate&)> on_update;
  std::function<void()> on_output;  // called as each chunk of output arrives
  void update(nymph::runners::JobUpdate u) override {
    if (on_update) on_update(u);
    updates.push_back(std::move(u));
  }
  boost::asio::awaitable<void> output(nymph::runners::Stream s, std::uint64_t offset, std::string bytes) override {
    if (on_output) on_output();
    std::string& dst = s == nymph::runners::Stream::out ? out : err;
    EXPECT_EQ(offset, dst.size()) << "offsets are contiguous";
    dst += bytes;
    co_return;
  }
  std::vector<nymph::runners::JobState> states() const {
    std::vector<nymph::runners::JobState> s;
    for (const auto& u : updates) s.push_back(u.state);
    return s;
  }
};

}  // namespace nymph::test
