// Training profiles against the real lab cluster, as the unprivileged lab user (ctest runs this binary through
// `runuser -u nymphci --`, so the control plane and the agent it starts run as that user too).
//  - SlurmRunner level: the smoke profile with hostile parameters (and a 1 MB string), a profile that writes
//    no result, a failing profile, an unknown profile;
//  - end to end: `nymph-control submit --runner slurm --kind training` → real `nymph run` → sbatch → result
//    in `nymph-control job ID`.
// Each job asks for one CPU for a second or two, so these run alongside the other lab tests (no lock).
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "tests/slurm/lab/lab_runner_support.hpp"
#include "tests/support/agent_process.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/files.hpp"

namespace {

using namespace nymph::test::lab;
namespace json = boost::json;
using nymph::test::AgentProcess;
using nymph::test::read_file;
using nymph::test::ControlServer;

// Approved scripts in a directory of their own (mode 0755, readable by the lab user who submits them).
struct Scripts {
  fs::path dir;
  Scripts() {
    char tmpl[] = "/tmp/nymph-lab-profiles-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
    fs::permissions(dir, fs::perms(0755));
  }
  ~Scripts() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Profile install(const std::string& name, const std::string& text) const {
    fs::path p = dir / (name + ".sh");
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms(0755));
    return Profile{name, p, {}, 64 * 1024};
  }
  Profile smoke() const {
    return install("smoke", read_file(fs::path(NYMPH_SOURCE_DIR) / "packaging/examples/slurm-smoke.sh"));
  }
};

JobSpec training(const std::string& id, std::string profile, json::object parameters) {
  JobSpec s;
  s.job_id = id + "-" + std::to_string(::getpid());
  s.lease_id = "lease-" + id;
  s.kind = "training";
  s.profile = std::move(profile);
  s.parameters = std::move(parameters);
  return s;
}

TEST(ProfilesLab, SmokeProfileWithHostileParametersReturnsItsResultAndExecutesNothing) {
  Scripts scripts;
  const std::string marker = (scripts.dir / "pwned").string();
  Profile smoke = scripts.smoke();
  smoke.max_input_bytes = 2 * 1024 * 1024;  // room for the 1 MB string
  Lab lab("profile-smoke", [&](SlurmRunnerConfig& c) { c.profiles = ProfileCatalog({smoke}); });
  const std::string message = "$(touch " + marker + "-subst) `touch " + marker + "-tick` ; touch " + marker +
                              "-semi && echo 'single' \"double\" \\ back\nnew line\ttab \x01 \xc3\xa9";
  json::object params{{"message", message}, {"big", std::string(1'000'000, 'B') + "$(touch " + marker + "-big)"}};
  Recorder rec;
  auto s = training("smoke", "smoke", params);
  auto final = lab.run(s, rec);
  ASSERT_EQ(final.state, JobState::succeeded) << final.message << "\n" << rec.err;
  ASSERT_TRUE(final.slurm_job_id);
  EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "State,ExitCode", "COMPLETED|0:0"), "COMPLETED|0:0");
  ASSERT_TRUE(final.result);
  const auto& r = final.result->as_object();
  EXPECT_EQ(r.at("message").as_string(), message) << "byte-exact through input.json, the profile and result.json";
  EXPECT_EQ(r.at("slurmJobId").as_string(), *final.slurm_job_id);
  EXPECT_FALSE(r.at("host").as_string().empty());
  EXPECT_NE(rec.out.find("slurm-smoke: result written"), std::string::npos) << rec.out;

  const fs::path dir = lab.launch / (s.job_id + "-1");
  EXPECT_EQ(read_file(dir / "input.json"), json::serialize(params)) << "input.json byte-exact";
  for (const char* suffix : {"-subst", "-tick", "-semi", "-big"})
    EXPECT_FALSE(fs::exists(marker + suffix)) << "a parameter was executed: " << suffix;
  // Nothing of the parameters reached a command line.
  for (const auto& call : *lab.calls)
    for (const auto& arg : call.argv) EXPECT_EQ(arg.find("touch"), std::string::npos) << arg;
  lab.runner->release(s.job_id);
  lab.runner.reset();  // release() removes the directory on the runner's I/O threads; the destructor waits for it
  EXPECT_FALSE(fs::exists(dir));
}

TEST(ProfilesLab, WithoutAccountingACompletedProfileSucceeds) {
  // A profile script has no exit-status file; without accounting (sacct stands in for a cluster without
  // slurmdbd) squeue's COMPLETED is the only word, and the result must not be lost.
  Scripts scripts;
  fs::path fake_sacct = scripts.dir / "sacct";
  std::ofstream(fake_sacct) << "#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n";
  fs::permissions(fake_sacct, fs::perms(0755));
  Lab lab("profile-noacct", [&](SlurmRunnerConfig& c) {
    c.profiles = ProfileCatalog({scripts.smoke()});
    c.sacct = fake_sacct.string();
  });
  Recorder rec;
  auto s = training("noacct", "smoke", {{"message", "no accounting"}});
  auto final = lab.run(s, rec);
  ASSERT_EQ(final.state, JobState::succeeded) << final.message << "\n" << rec.err;
  ASSERT_TRUE(final.result);
  EXPECT_EQ(final.result->as_object().at("message").as_string(), "no accounting");
  EXPECT_EQ(lab.count(fake_sacct.string()), 0) << "squeue settled it";
  lab.runner->release(s.job_id);
}

TEST(ProfilesLab, CompletedWithoutResultFails) {
  Scripts scripts;
  auto p = scripts.install("quiet", "#!/bin/sh\n#SBATCH --ntasks=1\n#SBATCH --mem=50M\n#SBATCH --time=00:02:00\necho no result\n");
  Lab lab("profile-noresult", [&](SlurmRunnerConfig& c) { c.profiles = ProfileCatalog({p}); });
  Recorder rec;
  auto final = lab.run(training("quiet", "quiet", {}), rec);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_FALSE(final.result);
  EXPECT_NE(final.message.find("COMPLETED, but the profile wrote no result.json"), std::string::npos) << final.message;
  EXPECT_EQ(rec.out, "no result\n");
}

TEST(ProfilesLab, FailingProfileHasSlurmsExitCodeAndNoResult) {
  Scripts scripts;
  auto p = scripts.install("failing", "#!/bin/sh\n#SBATCH --ntasks=1\n#SBATCH --mem=50M\n#SBATCH --time=00:02:00\n"
                                      "echo '{\"partial\":true}' >\"$NYMPH_RESULT\"\nexit 3\n");
  Lab lab("profile-failing", [&](SlurmRunnerConfig& c) { c.profiles = ProfileCatalog({p}); });
  Recorder rec;
  auto final = lab.run(training("failing", "failing", {}), rec);
  EXPECT_EQ(final.state, JobState::failed) << final.message;
  EXPECT_EQ(final.exit_code, 3);
  EXPECT_FALSE(final.result);
  ASSERT_TRUE(final.slurm_job_id);
  EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "State,ExitCode", "FAILED|3:0"), "FAILED|3:0");
}

TEST(ProfilesLab, UnknownProfileSubmitsNothing) {
  Scripts scripts;
  Lab lab("profile-unknown", [&](SlurmRunnerConfig& c) { c.profiles = ProfileCatalog({scripts.smoke()}); });
  Recorder rec;
  auto s = training("unknown", "nope", {{"message", "x"}});
  auto final = lab.run(s, rec);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("unknown training profile 'nope'"), std::string::npos) << final.message;
  EXPECT_EQ(lab.count("sbatch"), 0);
  EXPECT_FALSE(fs::exists(lab.launch / (s.job_id + "-1")));
}

// The whole path: nymph-control → nymph run (slurm runner) → sbatch of the profile → result in `job ID`.
TEST(ProfilesLab, EndToEndThroughTheControlPlane) {
  Scripts scripts;
  const fs::path launch = fs::path(env_or("SLURM_LAB_JOBS_DIR", "/var/lib/nymph-slurm-lab/jobs")) /
                          ("nymph-profiles-e2e-" + std::to_string(::getpid()));
  fs::remove_all(launch);
  ControlServer cp({.poll_timeout = "1s"});
  AgentProcess agent(cp, {.extra_toml = "[profiles]\nsmoke = \"" + scripts.smoke().script.string() + "\"\n",
                          .slurm_toml = "enabled = true\npoll_interval = \"1s\"\nkeep_job_dirs = true\nlaunch_dir = \"" +
                                        launch.string() + "\"\n"});
  agent.wait_for_state("serving");

  std::string ghost = nymph::test::submit(cp, {"--runner", "slurm", "--kind", "training", "--payload",
                                               R"({"profile":"ghost","parameters":{"message":"never"}})"});
  std::string hello = nymph::test::submit(cp, {"--runner", "slurm", "--kind", "training", "--payload",
                                               R"({"profile":"smoke","parameters":{"message":"hello"}})"});
  const std::string marker = (scripts.dir / "pwned").string();
  const std::string hostile = "$(touch " + marker + ") `touch " + marker + "` ; touch " + marker + " 'q' \"dq\"\nline2";
  json::object hostile_params{{"message", hostile}};
  json::object payload{{"profile", "smoke"}, {"parameters", hostile_params}};
  std::string evil = nymph::test::submit(cp, {"--runner", "slurm", "--kind", "training", "--payload", json::serialize(payload)});

  auto finished = [](const std::string& j) {
    auto s = nymph::test::job_state(j);
    return s == "succeeded" || s == "failed" || s == "lost" || s == "cancelled";
  };
  auto job = [&](const std::string& id) {
    auto v = json::parse(nymph::test::wait_for_job(cp, id, finished, std::chrono::seconds(120)));
    auto& o = v.as_object();
    return o.contains("job") ? json::object(o.at("job").as_object()) : json::object(o);
  };
  for (const auto& [id, expected] : {std::pair{hello, std::string("hello")}, std::pair{evil, hostile}}) {
    auto o = job(id);
    ASSERT_EQ(o.at("state"), "succeeded") << json::serialize(o) << "\n" << agent.log();
    ASSERT_TRUE(o.contains("result")) << json::serialize(o);
    const auto& r = o.at("result").as_object();
    EXPECT_EQ(r.at("message").as_string(), expected);
    // The result's Slurm id is the one the agent reported for the attempt.
    bool seen = false;
    for (const auto& e : o.at("events").as_array())
      if (auto it = e.as_object().find("slurmJobId"); it != e.as_object().end() && !it->value().is_null())
        seen = seen || it->value() == r.at("slurmJobId");
    EXPECT_TRUE(seen) << json::serialize(o);
  }
  const fs::path evil_input = launch / (evil + "-1") / "input.json";
  EXPECT_EQ(read_file(evil_input), json::serialize(hostile_params)) << "input.json byte-exact";
  EXPECT_FALSE(fs::exists(marker)) << "a parameter was executed";

  auto shown = cp.admin({"job", hello});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("result:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("\"message\":\"hello\""), std::string::npos) << shown.out;
  EXPECT_EQ(nymph::test::job_state(cp.admin({"job", ghost, "--json"}).out), "queued")
      << "no worker advertises profile ghost";

  agent.signal(SIGTERM);
  agent.wait_exit();
  std::error_code ec;
  fs::remove_all(launch, ec);
}

// Site defaults on the real cluster (docs/profiles.md "Account, QOS and partition"): each level of the
// precedence shows in sacct's Account and QOS. The lab has a second account and QOS (SLURM_LAB_ACCOUNT2,
// SLURM_LAB_QOS2, created by tests/slurm-lab/start.sh); the lab user's defaults are SLURM_LAB_ACCOUNT and
// "normal".
TEST(ProfilesLab, SiteDefaultsReachTheProfilesSbatchUnlessTheProfileOrTheJobSetsThem) {
  const std::string account = env_or("SLURM_LAB_ACCOUNT", "nymph"), account2 = env_or("SLURM_LAB_ACCOUNT2", "nymph2");
  const std::string qos2 = env_or("SLURM_LAB_QOS2", "nymphq2");
  Scripts scripts;
  const std::string body = "#!/bin/sh\n#SBATCH --ntasks=1\n#SBATCH --mem=50M\n#SBATCH --time=00:02:00\n";
  const std::string write_result = "echo '{\"ok\":true}' >\"$NYMPH_RESULT\"\n";
  auto plain = scripts.install("plain", body + write_result);
  auto pinned =
      scripts.install("pinned", body + "#SBATCH --account=" + account + "\n#SBATCH -q normal\n" + write_result);
  // The Account|QOS sacct reports for the job, once it reads `expected` (slurmdbd fills QOS in after the job's end
  // record: right after the end it can read "Unknown").
  auto runs_under = [&](const std::string& name, bool site, boost::json::object run_config,
                        const std::string& expected) {
    Lab lab("site-" + name, [&](SlurmRunnerConfig& c) {
      c.profiles = ProfileCatalog({plain, pinned});
      if (site) {
        c.account = account2;
        c.qos = qos2;
      }
    });
    Recorder rec;
    auto s = training("site-" + name, name.starts_with("pinned") ? "pinned" : "plain", {});
    s.slurm_options = std::move(run_config);
    auto final = lab.run(s, rec);
    EXPECT_EQ(final.state, JobState::succeeded) << name << ": " << final.message << "\n" << rec.err;
    lab.runner->release(s.job_id);
    if (!final.slurm_job_id) return std::string("(no Slurm job)");
    return sacct_fields_settled(*final.slurm_job_id, "Account,QOS", expected);
  };
  const std::string site = account2 + "|" + qos2, slurm_default = account + "|normal";
  EXPECT_EQ(runs_under("plain-site", true, {}, site), site) << "site defaults apply";
  EXPECT_EQ(runs_under("pinned-site", true, {}, slurm_default), slurm_default) << "the profile's #SBATCH lines win";
  EXPECT_EQ(runs_under("pinned-job", true, {{"account", account2}, {"qos", qos2}}, site), site)
      << "the job's runConfig.slurm wins over the profile";
  EXPECT_EQ(runs_under("plain-none", false, {}, slurm_default), slurm_default) << "Slurm's own defaults";
}

}  // namespace
