// The slow real-Slurm runner tests: each waits for Slurm's own timers, so ctest runs them in parallel with
// the rest of the suite (no RESOURCE_LOCK). One CPU each.
#include "tests/slurm/lab/lab_runner_support.hpp"

namespace {

using namespace nymph::test::lab;
using nymph::test::run_command;

TEST(SlurmRunnerLabSlow, TimeLimitEndsFailedWithTimeout) {
  Lab lab("timeout", [](SlurmRunnerConfig& c) { c.poll_interval = 3s; });
  Recorder rec;
  auto s = spec("timeout", {"/bin/sleep", "600"});
  s.slurm_options["time"] = "1";
  auto final = lab.run(s, rec, 240s);  // limits are enforced every 30 s: 60-90 s after the start
  EXPECT_EQ(final.state, JobState::failed) << final.message;
  EXPECT_NE(final.message.find("TIMEOUT"), std::string::npos) << final.message;
  EXPECT_EQ(sacct_fields(*final.slurm_job_id, "State"), "TIMEOUT");
}

TEST(SlurmRunnerLabSlow, AJobPurgedBeforeTheNextCycleStillEndsRight) {
  // MinJobAge=10 on the lab: a finished job is purged from slurmctld 10-16 s after its end. With a 25 s
  // poll interval the first cycle after submission finds it already purged.
  Lab lab("purged", [](SlurmRunnerConfig& c) {
    c.poll_interval = 25s;
    c.poll_jitter = 0;
    c.exit_scan_interval = 0ms;  // the job's exit record would bring the cycle forward (next test)
  });
  Recorder rec;
  auto final = lab.run(spec("purged", {"/bin/sh", "-c", "echo quick; exit 7"}), rec);
  EXPECT_EQ(final.state, JobState::failed) << final.message;
  EXPECT_EQ(final.exit_code, 7);
  EXPECT_EQ(rec.out, "quick\n");
  // What the runner saw: its single squeue no longer knew the job, and sacct gave the final state.
  ASSERT_EQ(lab.count("squeue"), 1);
  for (const auto& c : *lab.calls) {
    if (c.argv[0] != "squeue") continue;
    ASSERT_TRUE(c.result);
    EXPECT_EQ(c.result->out, "");
    EXPECT_NE(c.result->err.find("Invalid job id specified"), std::string::npos) << c.result->err;
  }
  EXPECT_EQ(lab.count("sacct"), 1);
}

TEST(SlurmRunnerLabSlow, AnExitRecordReportsTheEndLongBeforeTheNextCycle) {
  // The same job and poll interval as above, with the exit records listed every 500 ms: the job's EXIT trap
  // drops its record, the cycle comes at once, and squeue still shows the job (MinJobAge=10 has not purged it).
  Lab lab("exitrecord", [](SlurmRunnerConfig& c) {
    c.poll_interval = 25s;
    c.poll_jitter = 0;
    c.exit_scan_interval = 500ms;
  });
  Recorder rec;
  auto final = lab.run(spec("exitrecord", {"/bin/sh", "-c", "echo quick; exit 7"}), rec);
  EXPECT_EQ(final.state, JobState::failed) << final.message;
  EXPECT_EQ(final.exit_code, 7);
  EXPECT_EQ(rec.out, "quick\n");
  // One squeue, or a few 1 s apart when the first came while slurmd was still reporting the end.
  EXPECT_GE(lab.count("squeue"), 1);
  EXPECT_LE(lab.count("squeue"), 4);
  for (const auto& c : *lab.calls) {
    if (c.argv[0] != "squeue") continue;
    ASSERT_TRUE(c.result);
    EXPECT_NE(c.result->out.find('|'), std::string::npos) << "squeue no longer knew the job: the cycle was not early";
  }
  EXPECT_EQ(lab.count("sacct"), 0) << "squeue's final state settled it";
}

}  // namespace
