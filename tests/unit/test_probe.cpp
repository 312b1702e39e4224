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
