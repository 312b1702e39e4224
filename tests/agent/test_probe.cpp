#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "agent/probe.hpp"
#include "common/logging.hpp"
#include "tests/support/run_coro.hpp"

namespace fs = std::filesystem;
using namespace nymph::agent;
using namespace std::chrono_literals;
using nymph::Result;
using nymph::slurm::CommandResult;
using nymph::slurm::Environment;

namespace {
struct FakeBin {
  fs::path dir = fs::temp_directory_path() / ("nymph-probe-" + std::to_string(::getpid()));
  FakeBin() {
    fs::create_directories(dir);
    for (const char* tool : {"sbatch", "squeue"}) {
      std::ofstream(dir / tool) << "#!/bin/sh\nexit 0\n";
      fs::permissions(dir / tool, fs::perms::owner_all);
    }
  }
  ~FakeBin() { fs::remove_all(dir); }
};

// Answers every command with `answer` and records what it was asked.
struct FakeSlurm : nymph::slurm::CommandRunner {
  Result<CommandResult> answer;
  std::vector<std::vector<std::string>> calls;
  explicit FakeSlurm(Result<CommandResult> a) : answer(std::move(a)) {}
  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv, std::optional<Environment>,
                                                   std::chrono::milliseconds) override {
    calls.push_back(std::move(argv));
    co_return answer;
  }
};

// Inside Slurm job 42, with `bin` (sbatch and squeue) on PATH.
ProbeInputs inside_job_42(const FakeBin& bin) {
  ProbeInputs in;
  in.path_env = bin.dir.string();
  in.slurm_job_id = "42";
  return in;
}

ProbeResult run_probe(ProbeInputs in, FakeSlurm& slurm) {
  boost::asio::io_context ioc;
  return nymph::test::run_coro(ioc, probe(std::move(in), slurm, nymph::null_logger()), 10s);
}
}  // namespace

TEST(Probe, LoginNodeWithSbatchIsLocalBackendWithSlurmRunner) {
  FakeBin bin;
  ProbeInputs in;
  in.path_env = "/nonexistent:" + bin.dir.string();
  auto r = probe_host(in);
  EXPECT_EQ(r.backend, "local");
  EXPECT_EQ(r.runners, (std::vector<std::string>{"process", "slurm"}));
  EXPECT_EQ(r.tags.at("host"), "slurm");
  EXPECT_EQ(*r.sbatch_path, (bin.dir / "sbatch").string());
  auto j = to_json(r).as_object();
  EXPECT_TRUE(j.at("slurm").is_null());
}

TEST(Probe, WithoutSbatchOnlyProcess) {
  ProbeInputs in;
  in.path_env = "/nonexistent";
  auto r = probe_host(in);
  EXPECT_EQ(r.runners, (std::vector<std::string>{"process"}));
  EXPECT_TRUE(r.tags.empty());
}

TEST(Probe, SlurmRunnerCanBeDisabled) {
  FakeBin bin;
  ProbeInputs in;
  in.path_env = bin.dir.string();
  in.slurm_runner_enabled = false;
  EXPECT_EQ(probe_host(in).runners, (std::vector<std::string>{"process"}));
}

TEST(Probe, InsideAnAllocationSqueueSaysItsPartitionAndEnd) {
  FakeBin bin;
  ProbeInputs in = inside_job_42(bin);
  FakeSlurm slurm(CommandResult{0, "debug|10:00\n", ""});
  const auto before = std::chrono::system_clock::now();
  const auto steady_before = std::chrono::steady_clock::now();
  auto r = run_probe(in, slurm);
  ASSERT_EQ(slurm.calls.size(), 1u) << "one squeue";
  EXPECT_EQ(slurm.calls[0], (std::vector<std::string>{(bin.dir / "squeue").string(), "-h", "-j", "42", "-o", "%P|%L"}));
  EXPECT_EQ(r.backend, "slurm");
  ASSERT_TRUE(r.allocation);
  EXPECT_EQ(r.allocation->job_id, "42");
  EXPECT_EQ(r.allocation->partition, "debug");
  ASSERT_TRUE(r.allocation->end_time && r.allocation->walltime_end);
  EXPECT_GE(*r.allocation->end_time, before + 10min);
  EXPECT_LT(*r.allocation->end_time, before + 11min);
  EXPECT_GE(*r.allocation->walltime_end, steady_before + 10min);
  EXPECT_LT(*r.allocation->walltime_end, steady_before + 11min);
  EXPECT_EQ(r.runners, (std::vector<std::string>{"process", "slurm"}));
  EXPECT_FALSE(to_json(r).as_object().at("slurm").is_null());
}

TEST(Probe, AnUnlimitedAllocationHasNoEnd) {
  FakeBin bin;
  ProbeInputs in = inside_job_42(bin);
  FakeSlurm slurm(CommandResult{0, "long|UNLIMITED\n", ""});
  auto r = run_probe(in, slurm);
  ASSERT_TRUE(r.allocation);
  EXPECT_FALSE(r.allocation->end_time);
  EXPECT_FALSE(r.allocation->walltime_end);
}

TEST(Probe, AJobSqueueDoesNotShowMeansALocalWorker) {
  FakeBin bin;
  ProbeInputs in = inside_job_42(bin);
  for (const auto& answer : {Result<CommandResult>(CommandResult{1, "", "Invalid job id specified\n"}),
                             Result<CommandResult>(nymph::fail("squeue did not finish within 30s")),
                             Result<CommandResult>(CommandResult{0, "garbage\n", ""})}) {
    FakeSlurm slurm(answer);
    auto r = run_probe(in, slurm);
    EXPECT_EQ(r.backend, "local");
    EXPECT_FALSE(r.allocation);
  }
}

TEST(Probe, NoSlurmCallOutsideAnAllocationOrWithoutSqueue) {
  FakeBin bin;
  ProbeInputs in;
  in.path_env = bin.dir.string();
  FakeSlurm slurm(CommandResult{0, "debug|10:00\n", ""});
  EXPECT_EQ(run_probe(in, slurm).backend, "local");
  in.slurm_job_id = "42";
  in.path_env = "/nonexistent";
  EXPECT_EQ(run_probe(in, slurm).backend, "local");
  EXPECT_TRUE(slurm.calls.empty());
}

TEST(ExitBudget, KillWaitFromScontrolShowConfig) {
  const std::string text =
      "Configuration data as of 2026-12-01T05:00:00\nJobCompType             = (null)\n"
      "KillOnBadExit           = 0\nKillWait                = 30 sec\nLaunchParameters        = (null)\n";
  EXPECT_EQ(nymph::agent::parse_kill_wait(text), std::chrono::seconds(30));
  EXPECT_EQ(nymph::agent::parse_kill_wait("KillWait = 120 sec\n"), std::chrono::seconds(120));
  EXPECT_FALSE(nymph::agent::parse_kill_wait("KillOnBadExit = 0\n").has_value());
  EXPECT_FALSE(nymph::agent::parse_kill_wait("KillWait = (null)\n").has_value());
}

TEST(ExitBudget, StopTimeoutOnALoginNodeAtMostKillWaitMinus3sInAnAllocation) {
  using namespace std::chrono_literals;
  using nymph::agent::exit_budget;
  EXPECT_EQ(exit_budget(30s, std::nullopt), 30s);
  nymph::agent::SlurmAllocation a{.job_id = "1"};
  EXPECT_EQ(exit_budget(30s, a), 27s);  // KillWait unknown: Slurm's default 30 s
  a.kill_wait = 30s;
  EXPECT_EQ(exit_budget(30s, a), 27s);
  EXPECT_EQ(exit_budget(10s, a), 10s);
  a.kill_wait = 2s;
  EXPECT_EQ(exit_budget(30s, a), 1s);
}
