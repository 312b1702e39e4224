// The Slurm command lines: each builder's argv, in the format its parser reads.
#include <gtest/gtest.h>

#include "slurm/commands.hpp"

namespace {

using namespace nymph::slurm;
using V = std::vector<std::string>;

TEST(SlurmCommands, Tracking) {
  EXPECT_EQ(squeue_jobs_argv("squeue", {"1", "2"}), (V{"squeue", "--noheader", "-o", "%i|%T|%r", "-j", "1,2"}));
  EXPECT_EQ(sacct_jobs_argv("sacct", {"3"}), (V{"sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", "3"}));
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
