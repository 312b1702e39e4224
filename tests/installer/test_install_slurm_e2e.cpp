// `nymph install --slurm` end to end on the lab cluster: the daemon runs inside a real allocation as the
// unprivileged lab user and registers with a real nymph-control as backend slurm with its job id; `nymph kill`
// (scancel) is reported as sigterm; a short walltime with a signal lead is reported as walltime. And a
// login-node manager installed with the site's --account/--qos runs a training profile through sbatch under
// them (issue 16), read back from sacct.
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/agent_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/json_output.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/files.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;
using nymph::test::read_file;

namespace {

constexpr const char* kUser = "nymphci";

class InstallSlurmE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    const passwd* pw = ::getpwnam(kUser);
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    char tmpl[] = "/tmp/nymph-slurm-e2e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    ASSERT_EQ(::chmod(home_.c_str(), 0755), 0);
    ASSERT_EQ(::chown(home_.c_str(), uid_, gid_), 0);
  }

  void TearDown() override {
    if (!local_launch_.empty()) nymph({"kill", local_launch_, "--timeout", "60"});  // a failed test's manager
    if (!id_.empty()) run_as(kUser, {"scancel", "--name=lakeshore-nymph-" + id_});
    fs::remove_all(home_);
  }

  CommandOutput nymph(std::vector<std::string> args) {
    args.insert(args.begin(), {"env", "HOME=" + home_.native(), NYMPH_BINARY});
    return run_as(kUser, args);
  }

  // Installs a --slurm launch against `cp` as the lab user; returns install's JSON object.
  json::object install(const ControlServer& cp, std::vector<std::string> extra) {
    auto tok = home_ / "tok";
    std::ofstream(tok) << cp.agent_token() << "\n";
    EXPECT_EQ(::chown(tok.c_str(), uid_, gid_), 0);
    EXPECT_EQ(::chmod(tok.c_str(), 0600), 0);
    std::vector<std::string> args{"install", "--server", cp.url(), "--token-file", tok.native(), "--label", "alloc",
                                  "--slurm", "--slurm-partition", "debug", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = nymph(args);
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    auto o = one_object(r);
    id_ = str(o, "launchId");
    return o;
  }

  // The worker row of launch `id_` once its status satisfies `want` (bounded; Slurm schedules when it does).
  template <class Want>
  json::object worker(const ControlServer& cp, Want want, std::chrono::seconds bound = 120s) {
    json::object found;
    for (auto deadline = std::chrono::steady_clock::now() + bound; std::chrono::steady_clock::now() < deadline;) {
      auto list = one_object(cp.admin({"workers", "--json"}));
      for (const auto& w : list["workers"].as_array())
        if (str(w.as_object(), "launchId") == id_) found = w.as_object();
      if (!found.empty() && want(str(found, "status"))) return found;
      std::this_thread::sleep_for(250ms);
    }
    auto log = home_ / ".local" / "share" / ("nymph-" + id_ + ".log");
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    ADD_FAILURE() << "worker of launch " << id_ << ": " << json::serialize(found) << "\nlog:\n" << text.str();
    return found;
  }

  // A site fragment (one key the options do not set), readable by the lab user.
  fs::path write_fragment() {
    auto p = home_ / "site.toml";
    std::ofstream(p) << "[runners.slurm]\npoll_interval = \"1s\"\n";
    EXPECT_EQ(::chown(p.c_str(), uid_, gid_), 0);
    return p;
  }

  fs::path home_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string id_;
  std::string local_launch_;  // a login-node manager to stop in TearDown
};

}  // namespace

TEST_F(InstallSlurmE2E, RegistersAsSlurmBackendAndScancelIsSigterm) {
  ControlServer cp({.poll_timeout = "1s"});
  auto o = install(cp, {"--slurm-time", "10"});
  std::string job = str(o, "slurmJobId");
  auto w = worker(cp, [](const std::string& s) { return s != "gone"; });
  EXPECT_EQ(str(w, "label"), "alloc-" + id_);
  EXPECT_EQ(str(w, "backend"), "slurm");
  ASSERT_TRUE(w.contains("slurm") && w.at("slurm").is_object()) << json::serialize(w);
  EXPECT_EQ(str(w.at("slurm").as_object(), "jobId"), job);

  auto k = nymph({"kill", id_, "--timeout", "60"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
  w = worker(cp, [](const std::string& s) { return s == "gone"; }, 60s);
  EXPECT_EQ(str(w, "exitReason"), "sigterm");
}

TEST_F(InstallSlurmE2E, ShortWalltimeWithLeadExitsAsWalltime) {
  ControlServer cp({.poll_timeout = "1s"});
  // Two minutes of walltime, SIGUSR1 100 s before the end: the daemon's own walltime lead (120 s) is already
  // reached when it registers, so it drains at once (the row may be gone by the time it is first listed).
  install(cp, {"--slurm-time", "2", "--slurm-signal-lead", "100"});
  auto w = worker(cp, [](const std::string& s) { return s == "gone"; }, 150s);
  EXPECT_EQ(str(w, "exitReason"), "walltime");
  auto list = one_object(nymph({"launches", "--json"}));
  ASSERT_EQ(list["launches"].as_array().size(), 1u);
  EXPECT_EQ(list["launches"].as_array()[0].at("exitReason"), "walltime");
}

// Issue 18, "no job is cut by a walltime": a worker in a 10-minute allocation serves until its end minus its
// 2-minute lead. It runs a job whose timeout fits and one without a timeout (no worker serves longer), and is never
// handed one whose timeout does not fit: that job stays queued with no attempt (before, the worker failed it).
TEST_F(InstallSlurmE2E, AnAllocationWorkerIsHandedOnlyTheJobsThatFitBeforeItsEnd) {
  ControlServer cp({.poll_timeout = "1s"});
  std::string too_long = nymph::test::submit(cp, {"--timeout", "1h", "--", "/bin/true"});
  std::string fits = nymph::test::submit(cp, {"--timeout", "60s", "--", "/bin/true"});
  std::string unbounded = nymph::test::submit(cp, {"--", "/bin/true"});
  install(cp, {"--slurm-time", "10"});
  auto finished = [](const std::string& j) {
    auto s = nymph::test::job_state(j);
    return s == "succeeded" || s == "failed" || s == "lost" || s == "cancelled";
  };
  EXPECT_EQ(nymph::test::job_state(nymph::test::wait_for_job(cp, fits, finished, 180s)), "succeeded");
  EXPECT_EQ(nymph::test::job_state(nymph::test::wait_for_job(cp, unbounded, finished, 60s)), "succeeded");
  auto w = worker(cp, [](const std::string& s) { return s == "active"; });
  ASSERT_TRUE(w.contains("slurm") && w.at("slurm").is_object()) << json::serialize(w);
  EXPECT_EQ(w.at("slurm").as_object().at("leadS"), 120) << "the worker advertises its lead";
  auto job = json::parse(cp.admin({"job", too_long, "--json"}).out).as_object();
  const json::object& j = job.contains("job") ? job.at("job").as_object() : job;
  EXPECT_EQ(str(j, "state"), "queued") << json::serialize(j);
  EXPECT_FALSE(j.contains("attempts") && !j.at("attempts").as_array().empty()) << json::serialize(j);

  auto k = nymph({"kill", id_, "--timeout", "60"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
}

// Issue 16, "done when": `nymph install --account A2 --qos Q2 --training-profile smoke=...` as the lab user, then the
// seed's exact training submit (no --runner: a training job goes to the Slurm runner of a worker that has one) yields
// a COMPLETED sbatch job whose sacct row shows account A2 and QOS Q2, and its result comes back.
TEST_F(InstallSlurmE2E, SiteAccountAndQosReachATrainingProfilesSbatch) {
  const std::string account2 = std::getenv("SLURM_LAB_ACCOUNT2") ? std::getenv("SLURM_LAB_ACCOUNT2") : "nymph2";
  const std::string qos2 = std::getenv("SLURM_LAB_QOS2") ? std::getenv("SLURM_LAB_QOS2") : "nymphq2";
  ControlServer cp({.poll_timeout = "1s"});
  auto script = home_ / "smoke.sh";
  std::ofstream(script) << read_file(fs::path(NYMPH_SOURCE_DIR) / "packaging/examples/slurm-smoke.sh");
  ASSERT_EQ(::chown(script.c_str(), uid_, gid_), 0);
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  auto tok = home_ / "tok";
  std::ofstream(tok) << cp.agent_token() << "\n";
  ASSERT_EQ(::chown(tok.c_str(), uid_, gid_), 0);
  ASSERT_EQ(::chmod(tok.c_str(), 0600), 0);
  auto r = nymph({"install", "--server", cp.url(), "--token-file", tok.native(), "--label", "site", "--cluster",
                  "site-e2e-" + std::to_string(::getpid()), "--account", account2, "--qos", qos2,
                  "--training-profile", "smoke=" + script.native(), "--launch-dir", (home_ / "jobs").native(),
                  "--config-fragment", write_fragment().native(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto o = one_object(r);
  id_ = str(o, "launchId");
  EXPECT_EQ(str(o.at("siteConfig").as_object(), "account"), account2);
  local_launch_ = id_;

  std::string job = nymph::test::submit(cp, {"--kind", "training", "--payload",
                                             R"({"profile":"smoke","parameters":{"message":"hello"}})"});
  auto done = [](const std::string& j) {
    auto s = nymph::test::job_state(j);
    return s == "succeeded" || s == "failed" || s == "lost" || s == "cancelled";
  };
  auto v = json::parse(nymph::test::wait_for_job(cp, job, done, std::chrono::seconds(180)));
  auto& top = v.as_object();
  const json::object& j = top.contains("job") ? top.at("job").as_object() : top;
  ASSERT_EQ(str(j, "state"), "succeeded") << json::serialize(j);
  ASSERT_TRUE(j.contains("result")) << json::serialize(j);
  EXPECT_EQ(str(j.at("result").as_object(), "message"), "hello");
  std::string slurm_id = str(j.at("result").as_object(), "slurmJobId");
  ASSERT_FALSE(slurm_id.empty());
  std::string row;
  for (auto deadline = std::chrono::steady_clock::now() + 15s; std::chrono::steady_clock::now() < deadline;) {
    row = run_as(kUser, {"sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", "State,Account,QOS"}).out;
    while (!row.empty() && (row.back() == '\n' || row.back() == ' ')) row.pop_back();
    if (row == "COMPLETED|" + account2 + "|" + qos2) break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(row, "COMPLETED|" + account2 + "|" + qos2);

  auto k = nymph({"kill", id_, "--timeout", "60"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
  local_launch_.clear();
  id_.clear();  // a login-node launch has no allocation to scancel
}
