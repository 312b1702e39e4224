// Parsers for every sbatch / squeue / sacct output shape seen on Slurm 22.05, and the state mapping.
#include <gtest/gtest.h>

#include "slurm/parse.hpp"

namespace {

using namespace nymph::slurm;

TEST(ParseSbatch, EveryShape) {
  EXPECT_EQ(parse_sbatch_output("42\n").value(), "42");
  EXPECT_EQ(parse_sbatch_output("42;nymphlab\n").value(), "42");
  EXPECT_EQ(parse_sbatch_output("Submitted batch job 42\n").value(), "42");
  EXPECT_EQ(parse_sbatch_output("Submitted batch job 42 on cluster nymphlab\n").value(), "42");
  EXPECT_EQ(parse_sbatch_output("\n  7 \r\n\n").value(), "7");
  EXPECT_EQ(parse_sbatch_output("sbatch: some notice\n43\n").value(), "43");
}

TEST(ParseSbatch, Garbage) {
  for (const char* bad : {"", "\n", "Submitted batch job", "Submitted batch job x", "abc", "12a", ";cluster",
                          "-1"}) {
    auto r = parse_sbatch_output(bad);
    EXPECT_FALSE(r) << bad;
  }
  EXPECT_NE(parse_sbatch_output("oops\n").error().message.find("\"oops\\n\""), std::string::npos);
}

TEST(ParseSqueue, RowsAsCapturedOnTheLab) {
  // squeue -h -j 4,5,6,7,99999 -o '%i|%T|%r' (Slurm 22.05.8): the unknown id is simply omitted.
  auto r = parse_squeue("7|PENDING|Resources\n4|PENDING|JobHeldUser\n5|RUNNING|None\n6|RUNNING|None\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[1].job_id, "4");
  EXPECT_EQ((*r)[1].state, "PENDING");
  EXPECT_EQ((*r)[1].reason, "JobHeldUser");
  EXPECT_TRUE(parse_squeue("").value().empty());
  EXPECT_TRUE(parse_squeue("7|COMPLETING|").has_value()) << "an empty reason is fine";
}

TEST(ParseSqueue, MalformedLines) {
  for (const char* bad : {"7|PENDING", "7|PENDING|a|b", "|PENDING|x", "7||x", "JOBID STATE REASON"})
    EXPECT_FALSE(parse_squeue(bad)) << bad;
}

TEST(ParseSqueue, InvalidJobIdMessage) {
  EXPECT_TRUE(squeue_says_invalid_job("slurm_load_jobs error: Invalid job id specified\n"));
  EXPECT_FALSE(squeue_says_invalid_job("slurm_load_jobs error: Unable to contact slurm controller"));
}

TEST(ParseSacct, RowsAsCapturedOnTheLab) {
  auto r = parse_sacct("4|CANCELLED by 1001|0:0\n5|COMPLETED|0:0\n5.batch|COMPLETED|0:0\n7|FAILED|3:0\n"
                       "8|TIMEOUT|0:0\n9|OUT_OF_MEMORY|0:125\n10|CANCELLED by 0|0:15\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 6u) << "step lines are skipped";
  EXPECT_EQ((*r)[0].state, "CANCELLED");
  EXPECT_EQ((*r)[0].state_text, "CANCELLED by 1001");
  EXPECT_EQ((*r)[2].exit_code, 3);
  EXPECT_EQ((*r)[5].signal, 15);
}

TEST(ParseSacct, RequeuedJobLastLineWins) {
  auto r = parse_sacct("5|NODE_FAIL|0:0\n5|COMPLETED|0:0\n");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].state, "COMPLETED");
}

TEST(ParseSacct, MalformedLines) {
  for (const char* bad : {"5|COMPLETED", "5|COMPLETED|0", "5|COMPLETED|x:0", "5||0:0", "|COMPLETED|0:0",
                          "5|COMPLETED|0:0|extra"})
    EXPECT_FALSE(parse_sacct(bad)) << bad;
}

TEST(ParseSacct, AccountingDisabledMessage) {
  EXPECT_TRUE(sacct_says_accounting_disabled("sacct: error: Slurm accounting storage is disabled\n"));
  EXPECT_FALSE(sacct_says_accounting_disabled("sacct: error: Problem talking to the database: Connection refused"));
}

TEST(ParseSacctmgr, DefaultAccountIsTheFirstLine) {
  EXPECT_EQ(parse_default_account("proj\n"), "proj");
  EXPECT_EQ(parse_default_account("\n  proj  \nother\n"), "proj");
  EXPECT_EQ(parse_default_account(""), "");
}

TEST(SlurmStates, Phases) {
  for (auto s : {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
    EXPECT_EQ(phase_of(s), SlurmPhase::pending) << s;
  for (auto s : {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"})
    EXPECT_EQ(phase_of(s), SlurmPhase::running) << s;
  for (auto s : {"COMPLETED", "FAILED", "CANCELLED", "CANCELLED by 1001", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                 "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})
    EXPECT_EQ(phase_of(s), SlurmPhase::finished) << s;
  EXPECT_EQ(phase_of("running"), SlurmPhase::unknown);
  EXPECT_EQ(phase_of(""), SlurmPhase::unknown);
}

}  // namespace
