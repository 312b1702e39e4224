// `nymph doctor` on the lab cluster (tests/slurm-lab), as its unprivileged user: real sbatch/squeue/sacct/
// scancel, slurmctld and slurmdbd answering, the user's default account from sacctmgr.
#include <pwd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "tests/deploy/deploy_support.hpp"

using namespace nymph::test;
using namespace nymph::test::deploy;

TEST(DoctorSlurmLab, RealSlurmChecksPass) {
  const char* user = std::getenv("SLURM_LAB_USER");
  std::string lab_user = user && *user ? user : "nymphci";
  const passwd* pw = ::getpwnam(lab_user.c_str());
  ASSERT_NE(pw, nullptr) << lab_user;
  std::string home = pw->pw_dir;
  const char* conf = std::getenv("SLURM_CONF");
  ASSERT_NE(conf, nullptr);
  auto r = run_command({"runuser", "-u", lab_user, "--", "/usr/bin/env", "-i", "HOME=" + home,
                        "PATH=/usr/local/bin:/usr/bin:/bin", "USER=" + lab_user, std::string("SLURM_CONF=") + conf,
                        NYMPH_BINARY, "doctor", "--json", "--timeout", "30"});
  auto report = one_object(r.out);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<std::string, boost::json::object> checks;
  for (const auto& c : report.at("checks").as_array()) checks[std::string(c.as_object().at("name").as_string())] = c.as_object();
  for (auto name : {"slurm.sbatch", "slurm.squeue", "slurm.sacct", "slurm.scancel", "slurm.controller",
                    "slurm.accounting", "slurm.account"}) {
    ASSERT_TRUE(checks.count(name)) << name << " missing: " << r.out;
    EXPECT_EQ(checks[name].at("verdict"), "ok") << name << ": " << r.out;
  }
  EXPECT_NE(std::string(checks["slurm.sbatch"].at("detail").as_string()).find("22.05"), std::string::npos) << r.out;
  EXPECT_NE(std::string(checks["slurm.controller"].at("detail").as_string()).find("Slurm user " + lab_user),
            std::string::npos) << r.out;
  const char* account = std::getenv("SLURM_LAB_ACCOUNT");
  EXPECT_NE(std::string(checks["slurm.account"].at("detail").as_string()).find(account && *account ? account : "nymph"),
            std::string::npos) << r.out;
}
