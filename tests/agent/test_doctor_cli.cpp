// `nymph doctor` through the real binary: fake Slurm commands on PATH, a real nymph-control (up and down),
// token permissions, a hung Slurm command bounded by --timeout, and the text output.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/deploy/deploy_support.hpp"

using namespace nymph::test;
using namespace nymph::test::deploy;
namespace json = boost::json;

namespace {

// A HOME, a fake Slurm bin directory and a config for one control plane.
class DoctorCli : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(home_ / "bin");
    write_fake_slurm(home_ / "bin");
  }

  void write_config(const std::string& url, const std::string& token, fs::perms token_mode = fs::perms(0600)) {
    write_file(home_ / "token", token + "\n", token_mode);
    write_file(home_ / "config.toml", "[server]\nurl = \"" + url + "\"\ntoken_file = \"" + (home_ / "token").string() +
                                          "\"\n[runners.slurm]\nlaunch_dir = \"" + home_.path().string() + "\"\n");
  }

  CommandOutput doctor(std::vector<std::string> args, std::string path = {}) {
    if (path.empty()) path = (home_ / "bin").string() + ":/usr/bin:/bin";
    std::vector<std::string> argv{NYMPH_BINARY, "doctor"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_with_env({{"HOME", home_.path().string()}, {"PATH", path}, {"USER", "alice"}}, argv);
  }

  static std::string verdict(const json::object& report, const std::string& name) {
    for (const auto& c : report.at("checks").as_array())
      if (std::string_view(c.as_object().at("name").as_string()) == name) return std::string(c.as_object().at("verdict").as_string());
    return "(missing)";
  }
  static std::string detail(const json::object& report, const std::string& name) {
    for (const auto& c : report.at("checks").as_array())
      if (std::string_view(c.as_object().at("name").as_string()) == name) return std::string(c.as_object().at("detail").as_string());
    return "(missing)";
  }

  TempDir home_;
};

}  // namespace

TEST_F(DoctorCli, AllGoodWithFakeSlurmAndARealControlPlane) {
  ControlServer cp;
  write_config(cp.url(), cp.agent_token());
  auto r = doctor({"--json", "--config", (home_ / "config.toml").string()});
  auto report = one_object(r.out);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(report.at("ok"), true) << r.out;
  for (auto name : {"config", "slurm.sbatch", "slurm.squeue", "slurm.sacct", "slurm.scancel", "slurm.controller",
                    "slurm.accounting", "slurm.account", "slurm.launch_dir", "control.reachable", "control.tls",
                    "token.file", "state.disk"})
    EXPECT_EQ(verdict(report, name), "ok") << name << ": " << r.out;
  EXPECT_NE(detail(report, "slurm.sbatch").find("slurm 22.05.8"), std::string::npos) << r.out;
  EXPECT_NE(detail(report, "slurm.controller").find("2 job(s)"), std::string::npos) << r.out;
  EXPECT_NE(detail(report, "slurm.account").find("proj"), std::string::npos) << r.out;
  // nymph-control sends a Date header and shares this machine's clock: the skew is measured and small.
  EXPECT_EQ(verdict(report, "control.clock"), "ok") << r.out;
  EXPECT_EQ(r.out.find(cp.agent_token()), std::string::npos);
}

TEST_F(DoctorCli, ControlPlaneDownFails) {
  std::string url;
  {
    ControlServer cp;
    url = cp.url();
    write_config(url, cp.agent_token());
  }  // stopped: nothing listens on that port any more
  auto r = doctor({"--json", "--config", (home_ / "config.toml").string(), "--timeout", "5"});
  auto report = one_object(r.out);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(report.at("ok"), false);
  EXPECT_EQ(verdict(report, "control.reachable"), "fail") << r.out;
  EXPECT_NE(detail(report, "control.reachable").find("cannot connect"), std::string::npos) << r.out;
  EXPECT_EQ(verdict(report, "slurm.sbatch"), "ok") << r.out;  // the rest still ran
  EXPECT_EQ(verdict(report, "token.file"), "ok") << r.out;
}

TEST_F(DoctorCli, OpenTokenFileFailsWithTheFix) {
  ControlServer cp;
  write_config(cp.url(), cp.agent_token(), fs::perms(0640));
  auto r = doctor({"--config", (home_ / "config.toml").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL  token.file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chmod 600"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(cp.agent_token()), std::string::npos);
}

TEST_F(DoctorCli, HungSlurmCommandIsBoundedByTheTimeout) {
  write_script(home_ / "bin", "squeue",
               "if [ \"$1\" = --version ]; then echo 'slurm 22.05.8'; exit 0; fi\nexec sleep 60");
  auto start = std::chrono::steady_clock::now();
  auto r = doctor({"--json", "--timeout", "1"});
  auto took = std::chrono::steady_clock::now() - start;
  auto report = one_object(r.out);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(verdict(report, "slurm.controller"), "fail") << r.out;
  EXPECT_NE(detail(report, "slurm.controller").find("did not finish"), std::string::npos) << r.out;
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_EQ(verdict(report, "config"), "warn") << r.out;  // no --config, no ~/.config/nymph/config.toml
}

TEST_F(DoctorCli, NoAccountingIsAWarning) {
  write_script(home_ / "bin", "sacct",
               "if [ \"$1\" = --version ]; then echo 'slurm 22.05.8'; exit 0; fi\n"
               "echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1");
  auto r = doctor({"--json"});
  auto report = one_object(r.out);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(verdict(report, "slurm.accounting"), "warn") << r.out;
  EXPECT_NE(detail(report, "slurm.accounting").find("accounting storage is disabled"), std::string::npos) << r.out;
}

TEST_F(DoctorCli, MissingOneSlurmCommandFailsNoneAtAllWarns) {
  fs::remove(home_ / "bin" / "scancel");
  auto partial = doctor({"--json"}, (home_ / "bin").string());
  auto report = one_object(partial.out);
  EXPECT_EQ(partial.exit_code, 1) << partial.out;
  EXPECT_EQ(verdict(report, "slurm.scancel"), "fail") << partial.out;
  EXPECT_EQ(verdict(report, "slurm.sbatch"), "ok") << partial.out;

  TempDir empty;
  auto none = doctor({"--json"}, empty.path().string());
  auto report2 = one_object(none.out);
  EXPECT_EQ(none.exit_code, 0) << none.out;
  EXPECT_EQ(verdict(report2, "slurm"), "warn") << none.out;
}

TEST_F(DoctorCli, DefaultConfigIsPickedUpFromXdgLocation) {
  ControlServer cp;
  write_config(cp.url(), cp.agent_token());
  fs::create_directories(home_ / ".config/nymph");
  fs::copy_file(home_ / "config.toml", home_ / ".config/nymph/config.toml");
  auto r = doctor({"--json"});
  auto report = one_object(r.out);
  EXPECT_EQ(verdict(report, "config"), "ok") << r.out;
  EXPECT_EQ(verdict(report, "control.reachable"), "ok") << r.out;
}

TEST_F(DoctorCli, InvalidConfigFails) {
  write_file(home_ / "bad.toml", "[server]\nurl = 42\n");
  auto r = doctor({"--json", "--config", (home_ / "bad.toml").string()});
  auto report = one_object(r.out);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(verdict(report, "config"), "fail") << r.out;
  EXPECT_NE(detail(report, "config").find("url"), std::string::npos) << r.out;
}
