#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <boost/json.hpp>

#include "agent/probe.hpp"

namespace fs = std::filesystem;
using namespace nymph::agent;

namespace {
struct FakeBin {
  fs::path dir = fs::temp_directory_path() / ("nymph-probe-" + std::to_string(::getpid()));
  FakeBin() {
    fs::create_directories(dir);
    std::ofstream(dir / "sbatch") << "#!/bin/sh\nexit 0\n";
    fs::permissions(dir / "sbatch", fs::perms::owner_all);
  }
  ~FakeBin() { fs::remove_all(dir); }
};
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

TEST(Probe, SlurmTimeLeftFormats) {
  using std::chrono::seconds;
  EXPECT_EQ(parse_slurm_time_left("59:40"), seconds(59 * 60 + 40));
  EXPECT_EQ(parse_slurm_time_left("1:00:00"), seconds(3600));
  EXPECT_EQ(parse_slurm_time_left("2-03:04:05"), seconds(((2 * 24 + 3) * 60 + 4) * 60 + 5));
  EXPECT_EQ(parse_slurm_time_left("1-12"), seconds(36 * 3600));
  EXPECT_FALSE(parse_slurm_time_left("UNLIMITED"));
  EXPECT_FALSE(parse_slurm_time_left("NOT_SET"));
  EXPECT_FALSE(parse_slurm_time_left("12"));
  EXPECT_FALSE(parse_slurm_time_left("1:99"));
  EXPECT_FALSE(parse_slurm_time_left("a:b"));
}

TEST(Probe, AllocationLine) {
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1000));
  auto a = parse_allocation_line("42", "debug|10:00\n", now);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->partition, "debug");
  EXPECT_EQ(a->end_time, now + std::chrono::minutes(10));
  auto unlimited = parse_allocation_line("42", "long|UNLIMITED", now);
  ASSERT_TRUE(unlimited.has_value());
  EXPECT_FALSE(unlimited->end_time.has_value());
  EXPECT_FALSE(parse_allocation_line("42", "garbage", now).has_value());
  EXPECT_FALSE(parse_allocation_line("42", "debug|soon", now).has_value());
}
