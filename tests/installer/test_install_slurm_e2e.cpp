// `nymph install --slurm` end to end on the lab cluster: the daemon runs inside a real allocation as the
// unprivileged lab user and registers with a real nymph-control as backend slurm with its job id; `nymph kill`
// (scancel) is reported as sigterm; a short walltime with a signal lead is reported as walltime. And a
// login-node manager installed with the site's --account/--qos runs a training profile through sbatch under
// them (issue 16), read back from sacct.
#include "tests/installer/slurm_e2e_fixture.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;
using nymph::test::read_file;

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
  // Two minutes of walltime, SIGUSR1 100 s before the end and the daemon's own walltime lead as long: it serves for
  // about 20 s, then drains (the row may be gone by the time it is first listed).
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
    row = run_as(kLabUser, {"sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", "State,Account,QOS"}).out;
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
