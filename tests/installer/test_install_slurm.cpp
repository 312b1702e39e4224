// `nymph install --slurm` against the real lab cluster, as the unprivileged lab user: the job is submitted
// under its lakeshore-nymph-<ULID> name, `nymph launches` sees it, `nymph kill` scancels it and the launch
// then reads as exited. Whether the lab schedules the job at once or keeps it queued does not matter here.
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/json_output.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using nymph::test::one_object;
using nymph::test::CommandOutput;
using nymph::test::run_as;

namespace {

constexpr const char* kUser = "nymphci";

class InstallSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    const passwd* pw = ::getpwnam(kUser);
    ASSERT_NE(pw, nullptr) << "the lab user " << kUser << " is missing";
    char tmpl[] = "/tmp/nymph-slurm-install-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    ASSERT_EQ(::chmod(home_.c_str(), 0755), 0);
    std::ofstream(home_ / "tok") << "slurm-secret-token\n";
    for (const auto& p : {home_, home_ / "tok"}) ASSERT_EQ(::chown(p.c_str(), pw->pw_uid, pw->pw_gid), 0);
    ASSERT_EQ(::chmod((home_ / "tok").c_str(), 0600), 0);
  }

  void TearDown() override {
    if (!id_.empty()) run_as(kUser, {"scancel", "--name=lakeshore-nymph-" + id_});
    fs::remove_all(home_);
  }

  // Runs nymph as the lab user with HOME set to the temporary home.
  CommandOutput nymph(std::vector<std::string> args) {
    args.insert(args.begin(), {"env", "HOME=" + home_.native(), NYMPH_BINARY});
    return run_as(kUser, args);
  }

  std::string squeue_ids() {
    auto r = run_as(kUser, {"squeue", "-h", "--name=lakeshore-nymph-" + id_, "-o", "%i"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  }

  fs::path home_;
  std::string id_;
};

}  // namespace

TEST_F(InstallSlurm, SubmitListKillPrune) {
  auto r = nymph({"install", "--server", "http://127.0.0.1:9", "--token-file", (home_ / "tok").native(), "--label",
                  "lab", "--slurm", "--slurm-partition", "debug", "--slurm-time", "10", "--slurm-signal-lead", "60",
                  "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto o = one_object(r);
  id_ = std::string(o["launchId"].as_string());
  std::string job(o["slurmJobId"].as_string());
  EXPECT_FALSE(job.empty());
  EXPECT_NE(std::string(o["warning"].as_string()).find("nothing renews"), std::string::npos);
  EXPECT_EQ(squeue_ids(), job);

  auto list = one_object(nymph({"launches", "--json"}))["launches"].as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].at("slurmJobId"), json::value(job));
  auto state = std::string(list[0].at("state").as_string());
  EXPECT_TRUE(state == "queued" || state == "running") << state;

  auto k = nymph({"kill", "lab-" + id_, "--timeout", "60", "--json"});
  ASSERT_EQ(k.exit_code, 0) << k.err << k.out;
  EXPECT_EQ(one_object(k)["stopped"], true);
  EXPECT_EQ(squeue_ids(), "");
  list = one_object(nymph({"launches", "--json"}))["launches"].as_array();
  EXPECT_EQ(list[0].at("state"), "exited");

  auto prune = nymph({"launches", "prune", "--json"});
  EXPECT_EQ(prune.exit_code, 0) << prune.err;
  EXPECT_EQ(one_object(prune)["removed"].as_array().size(), 1u);
  EXPECT_FALSE(fs::exists(home_ / ".local" / "share" / ("nymph-" + id_ + ".log")));
}
