// The lab cluster is real: a trivial sbatch job submitted as the unprivileged user reaches COMPLETED in sacct.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/support/commands.hpp"

namespace {

using nymph::test::run_as;
using nymph::test::run_command;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

TEST(SlurmLab, TrivialJobCompletesInSacct) {
  auto submit = run_as("nymphci", {"sbatch", "--parsable", "--job-name=nymph-harness-check",
                                   "--chdir=/var/lib/nymph-slurm-lab/jobs", "--output=/dev/null",
                                   "--wrap=true"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string job_id = trim(submit.out);
  job_id = job_id.substr(0, job_id.find(';'));
  ASSERT_FALSE(job_id.empty());

  // Slurm is an external system: its state can only be observed by asking it. Ask sacct until the job
  // reaches a final state, bounded by a deadline.
  std::string state;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto q = run_command({"sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State"});
    ASSERT_EQ(q.exit_code, 0) << "sacct failed: " << q.err;
    state = trim(q.out);
    if (state == "COMPLETED" || state.starts_with("FAILED") || state.starts_with("CANCELLED")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(state, "COMPLETED") << "job " << job_id;
}

}  // namespace
