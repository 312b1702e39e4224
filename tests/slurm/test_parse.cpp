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

TEST(ParseSqueueJobs, ArrayTasksKeepTheirOwnIds) {
  // squeue -t all -r -O kSqueueJobFormat on the lab: a pending task and a running one of array 2, a plain job.
  auto r = parse_squeue_jobs("2_4|PENDING|Resources|0|1796102661|N/A|nymphlab|nymph-array-a-1\n"
                             "2_0|RUNNING|None|0|1796102661|1796102662|nymphlab|nymph-array-a-1\n"
                             "1|COMPLETED|None|0|1796102600|1796102601|nymphlab|nymph-b\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].job_id, "2_4");
  EXPECT_EQ((*r)[1].job_id, "2_0");
  EXPECT_EQ((*r)[2].job_id, "1");
}

TEST(ParseSqueueJobs, RowsViewTheOutputAndAreHeldAtTheirCount) {
  // A cycle at ten thousand jobs must not copy each row's text nor hold a doubled vector.
  const std::string out = "7|RUNNING|None|0|1796102661|1796102662|nymphlab|a-long-job-name-past-the-sso\n"
                          "8|PENDING|Resources|0|1796102661|N/A|nymphlab|b\n"
                          "9|PENDING|Priority|0|1796102661|N/A|nymphlab|c\n";
  auto r = parse_squeue_jobs(out);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(r->capacity(), 3u);
  const auto within_out = [&](std::string_view v) {
    return v.data() >= out.data() && v.data() + v.size() <= out.data() + out.size();
  };
  for (const auto& row : *r) {
    EXPECT_TRUE(within_out(row.job_id) && within_out(row.state) && within_out(row.reason) &&
                within_out(row.cluster) && within_out(row.name))
        << row.job_id;
  }
  EXPECT_EQ((*r)[0].name, "a-long-job-name-past-the-sso");
}

TEST(ParseSqueueJobs, EachRowInTurnAndNoneWhenALineCannotBeRead) {
  std::vector<std::string> ids;
  auto count = for_each_squeue_job("7|RUNNING|None|0|1|1|c|a\n\n8|PENDING|Resources|0|1|N/A|c|b\n",
                                   [&](const SqueueJob& row) { ids.emplace_back(row.job_id); });
  ASSERT_TRUE(count) << count.error().message;
  EXPECT_EQ(*count, 2u);
  EXPECT_EQ(ids, (std::vector<std::string>{"7", "8"}));
  // A bad last line (as a cut answer would end) acts on none of the good ones before it.
  ids.clear();
  auto bad = for_each_squeue_job("7|RUNNING|None|0|1|1|c|a\n8|PENDING|Reso",
                                 [&](const SqueueJob& row) { ids.emplace_back(row.job_id); });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, parse_squeue_jobs("7|RUNNING|None|0|1|1|c|a\n8|PENDING|Reso").error().message);
  EXPECT_TRUE(ids.empty());
}

TEST(ParseSqueueJobs, RowsAsCapturedOnTheLab) {
  // squeue -t all -O kSqueueJobFormat with SLURM_TIME_FORMAT=%s on Slurm 22.05 (a name may contain '|').
  auto r = parse_squeue_jobs("24|PENDING|JobHeldUser|0|1796102661|N/A|nymphlab|slurmhelper-held\n"
                             "23|FAILED|NonZeroExitCode|512|1796102661|1796102662|nymphlab|slurmhelper|p x\n"
                             "25|COMPLETING|None||Unknown|2026-12-01T05:00:00||\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].state, "PENDING");
  EXPECT_EQ((*r)[0].reason, "JobHeldUser");
  EXPECT_EQ((*r)[0].submit_time, 1796102661);
  EXPECT_FALSE((*r)[0].start_time) << "N/A";
  EXPECT_EQ((*r)[1].wait_status, 512);
  EXPECT_EQ((*r)[1].start_time, 1796102662);
  EXPECT_EQ((*r)[1].cluster, "nymphlab");
  EXPECT_EQ((*r)[1].name, "slurmhelper|p x");
  EXPECT_FALSE((*r)[2].wait_status);
  EXPECT_FALSE((*r)[2].submit_time);
  EXPECT_FALSE((*r)[2].start_time) << "a date (SLURM_TIME_FORMAT not honoured) reads as absent";
  EXPECT_EQ((*r)[2].name, "");
  for (const char* bad : {"7|PENDING|x", "7|PENDING|a|b|c|d|e", "|PENDING|||||x|y", "7||||||x|y"})
    EXPECT_FALSE(parse_squeue_jobs(bad)) << bad;
}

TEST(ParseSqueueJobs, WaitStatus) {
  EXPECT_EQ(decode_wait_status(0), (std::pair<int, int>{0, 0}));
  EXPECT_EQ(decode_wait_status(768), (std::pair<int, int>{3, 0}));
  EXPECT_EQ(decode_wait_status(15), (std::pair<int, int>{0, 15}));
  EXPECT_EQ(decode_wait_status(9), (std::pair<int, int>{0, 9}));
}

TEST(ParseSacctJobs, EveryJobLineIsKeptWithItsIdentity) {
  auto r = parse_sacct_jobs("23|FAILED|2:0|1796102661|nymphlab|slurmhelper|p x\n"
                            "23.batch|FAILED|2:0|1796102661|nymphlab|batch\n"
                            "23|COMPLETED|0:0|Unknown|nymphlab|nymph-a\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u) << "a recycled id's records are all kept; step lines are not";
  EXPECT_EQ((*r)[0].exit_code, 2);
  EXPECT_EQ((*r)[0].submit_time, 1796102661);
  EXPECT_EQ((*r)[0].name, "slurmhelper|p x");
  EXPECT_EQ((*r)[1].state, "COMPLETED");
  EXPECT_FALSE((*r)[1].submit_time);
  for (const char* bad : {"5|COMPLETED|0:0", "5|COMPLETED|x:0|1||n", "|COMPLETED|0:0|1||n"})
    EXPECT_FALSE(parse_sacct_jobs(bad)) << bad;
}

// Found by fuzz/slurm_output: a blank id (" |RUNNING|...", trimmed to "") or one with a NUL or control character
// was accepted as a job, then used as a map key and as an squeue/scancel argument.
TEST(SlurmJobIds, BlankOrControlCharacterIdsAreRefused) {
  EXPECT_TRUE(is_job_id("42"));
  EXPECT_TRUE(is_job_id("42_[1-5%2]"));
  EXPECT_TRUE(is_job_id("42+1"));
  for (const std::string& bad : {std::string(), std::string(" "), std::string("4 2"), std::string("4\x01"),
                                std::string("4\0", 2), std::string(65, '1'), std::string("4\xc3\xa9")})
    EXPECT_FALSE(is_job_id(bad)) << bad;
  EXPECT_FALSE(parse_squeue_jobs(" |RUNNING|None|0|1|1|c|n\n"));
  EXPECT_FALSE(parse_squeue_jobs("7| |None|0|1|1|c|n\n"));
  EXPECT_FALSE(parse_squeue(std::string("7\0|RUNNING|None\n", 16)));
  EXPECT_FALSE(parse_sacct("\x01|COMPLETED|0:0\n"));
  EXPECT_FALSE(parse_sacct_jobs("\x7f|COMPLETED|0:0|1|c|n\n"));
}

TEST(ParseSbatch, ClusterAndScontrolClusterName) {
  EXPECT_EQ(parse_sbatch_cluster("42;nymphlab\n"), "nymphlab");
  EXPECT_EQ(parse_sbatch_cluster("42\n"), "");
  EXPECT_EQ(parse_cluster_name("AuthType                = auth/munge\nClusterName             = nymphlab\n"), "nymphlab");
  EXPECT_EQ(parse_cluster_name("AuthType = auth/munge\n"), "");
}

TEST(ParseSbatch, ScontrolMaxArraySize) {
  EXPECT_EQ(parse_max_array_size("MaxArraySize            = 1001\nMaxJobCount             = 10000\n"), 1001u);
  EXPECT_EQ(parse_max_array_size("MaxArraySize = 0\n"), 0u) << "arrays disabled by the site";
  EXPECT_EQ(parse_max_array_size("MaxJobCount = 10000\n"), std::nullopt);
  EXPECT_EQ(parse_max_array_size("MaxArraySize = (null)\n"), std::nullopt);
  EXPECT_EQ(parse_max_array_size("MaxArraySize = 99999999999999999999\n"), std::nullopt) << "not a size_t";
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
