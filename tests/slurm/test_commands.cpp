// The Slurm command lines: each builder's argv, in the format its parser reads.
#include <gtest/gtest.h>

#include "slurm/commands.hpp"

namespace {

using namespace nymph::slurm;
using V = std::vector<std::string>;

TEST(SlurmCommands, Tracking) {
  // Final states included (-t all), each array task on its own line (-r, JobArrayID "<array>_<i>"), with what
  // identifies a job besides its id; sacct bounded by a start time.
  EXPECT_EQ(squeue_jobs_argv("squeue", {"1", "2"}),
            (V{"squeue", "--noheader", "-t", "all", "-r", "-O",
               "JobArrayID:|,State:|,Reason:|,exit_code:|,SubmitTime:|,StartTime:|,Cluster:|,Name:", "-j", "1,2"}));
  EXPECT_EQ(sacct_jobs_argv("sacct", {"3", "4"}, "2026-12-01T05:00:00"),
            (V{"sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode,Submit,Cluster,JobName", "-S",
               "2026-12-01T05:00:00", "-j", "3,4"}));
  EXPECT_EQ(show_config_argv("scontrol"), (V{"scontrol", "show", "config"}));
  EXPECT_EQ(scancel_argv("/bin/scancel", {"4", "5"}), (V{"/bin/scancel", "4", "5"}));
}

TEST(SlurmCommands, Submission) {
  EXPECT_EQ(sbatch_file_argv("sbatch", "/l/a-1/job.sbatch"), (V{"sbatch", "--parsable", "/l/a-1/job.sbatch"}));
  EXPECT_EQ(sbatch_stdin_argv("/opt/sbatch"), (V{"/opt/sbatch", "--parsable"}));
}

TEST(SlurmCommands, UserQueries) {
  EXPECT_EQ(squeue_user_argv("squeue", "1001"), (V{"squeue", "--noheader", "-o", "%i|%T|%r", "-u", "1001"}));
  EXPECT_EQ(sacct_user_argv("sacct", "ada"), (V{"sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-u", "ada"}));
  EXPECT_EQ(default_account_argv("sacctmgr", "ada"),
            (V{"sacctmgr", "-n", "-P", "show", "user", "ada", "format=DefaultAccount"}));
  EXPECT_EQ(version_argv("sinfo"), (V{"sinfo", "--version"}));
  EXPECT_EQ(list_json_argv("squeue"), (V{"squeue", "--me", "--json"}));
  EXPECT_EQ(list_text_argv("squeue"), (V{"squeue", "--me", "--noheader", "-o", "%i,%T,%P,%V,%j,%a"}));
  EXPECT_EQ(allocation_argv("squeue", "9"), (V{"squeue", "-h", "-j", "9", "-o", "%P|%L"}));
  EXPECT_EQ(squeue_by_name_hint("lakeshore-nymph-X"), "squeue --name=\"lakeshore-nymph-X\" -o '%.18i %.48j %.10T'");
}

}  // namespace
