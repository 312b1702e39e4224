// Training profiles end to end on the process runner: a real `nymph run` against a real `nymph-control`.
// Start-up refuses unacceptable scripts (exit 2, naming the profile); a training job is dispatched only to a
// worker advertising its profile, and its checked result shows in `nymph-control job ID`.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "tests/support/agent_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/files.hpp"

namespace json = boost::json;
namespace fs = std::filesystem;
using namespace nymph::test;
using namespace std::chrono_literals;

namespace {

// A directory of approved scripts, removed afterwards.
struct ScriptDir {
  fs::path dir;
  ScriptDir() {
    char tmpl[] = "/tmp/nymph-profiles-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
    fs::permissions(dir, fs::perms(0755));
  }
  ~ScriptDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path smoke() const {
    fs::path p = dir / "slurm-smoke.sh";
    if (!fs::exists(p)) fs::copy_file(fs::path(NYMPH_SOURCE_DIR) / "packaging/examples/slurm-smoke.sh", p);
    fs::permissions(p, fs::perms(0755));
    return p;
  }
  fs::path script(const std::string& name, fs::perms perms) const {
    fs::path p = dir / name;
    std::ofstream(p) << "#!/bin/sh\nexit 0\n";
    fs::permissions(p, perms);
    return p;
  }
};

json::object job_json(const ControlServer& cp, const std::string& id) {
  auto r = cp.admin({"job", id, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto v = json::parse(r.out);
  auto& o = v.as_object();
  if (auto it = o.find("job"); it != o.end() && it->value().is_object()) return it->value().as_object();
  return o;
}

TEST(ProfilesE2E, UnacceptableScriptsAreRefusedAtStartNamingTheProfile) {
  ControlServer cp;
  ScriptDir scripts;
  fs::create_directory(scripts.dir / "adir");
  struct Case {
    std::string path, says;
  };
  const std::vector<Case> cases{{scripts.script("gw.sh", fs::perms(0775)).string(), "writable by group"},
                                {scripts.script("ow.sh", fs::perms(0757)).string(), "writable by others"},
                                {(scripts.dir / "missing.sh").string(), "No such file or directory"},
                                {(scripts.dir / "adir").string(), "not a regular file"}};
  for (const auto& c : cases) {
    AgentProcess agent(cp, {.extra_toml = "[profiles]\nsmoke = \"" + c.path + "\"\n"});
    EXPECT_EQ(agent.wait_exit(30s), 2) << agent.log();
    std::string err = read_file(agent.dir() + "/stderr.log");
    EXPECT_NE(err.find("profile smoke: script " + c.path), std::string::npos) << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
  }

  // The same check for --training-profile NAME=/abs/script on the command line.
  AgentProcess agent(cp, {.start = false});
  auto r = run_command({"env", "-C", agent.dir(), NYMPH_BINARY, "run", "--config", "config.toml", "--training-profile",
                        "train=" + cases[0].path});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("profile train: script " + cases[0].path + ": writable by group"), std::string::npos) << r.err;
  auto rel = run_command({"env", "-C", agent.dir(), NYMPH_BINARY, "run", "--config", "config.toml",
                          "--training-profile", "train=relative.sh"});
  EXPECT_EQ(rel.exit_code, 2);
  EXPECT_NE(rel.err.find("must be absolute"), std::string::npos) << rel.err;
  auto workers = cp.admin({"workers", "--json"});
  EXPECT_EQ(json::parse(workers.out).as_object().at("workers").as_array().size(), 0u) << "none of them registered";
}

TEST(ProfilesE2E, TrainingJobRunsOnTheProcessRunnerAndReturnsItsResult) {
  ControlServer cp({.poll_timeout = "1s"});
  ScriptDir scripts;
  AgentProcess agent(cp, {.extra_toml = "[profiles]\nsmoke = \"" + scripts.smoke().string() + "\"\n"});
  agent.wait_for_state("serving");

  // Queued first, for a profile no worker has: FIFO dispatch passes it over, it stays queued.
  std::string ghost = submit(cp, {"--kind", "training", "--payload", R"({"profile":"ghost","parameters":{}})"});
  const std::string message = "hello $(touch " + agent.dir() + "/pwned) `id` ; 'q' \"dq\"\nline2";
  json::object payload{{"profile", "smoke"}, {"parameters", json::object{{"message", message}}}};
  std::string job = submit(cp, {"--kind", "training", "--payload", json::serialize(payload)});
  wait_for_job(cp, job, [](const std::string& j) { return job_state(j) == "succeeded" || job_state(j) == "failed"; });

  auto o = job_json(cp, job);
  ASSERT_EQ(o.at("state"), "succeeded") << json::serialize(o) << agent.log();
  ASSERT_TRUE(o.contains("result")) << json::serialize(o);
  const auto& result = o.at("result").as_object();
  EXPECT_EQ(result.at("message").as_string(), message);
  EXPECT_TRUE(result.at("slurmJobId").is_null());
  EXPECT_FALSE(fs::exists(agent.dir() + "/pwned"));

  auto human = cp.admin({"job", job});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("result:"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("\"host\""), std::string::npos) << human.out;

  EXPECT_EQ(job_state(json::serialize(job_json(cp, ghost))), "queued") << "only workers with the profile get it";
  auto workers = json::parse(cp.admin({"workers", "--json"}).out);
  EXPECT_EQ(workers.as_object().at("workers").as_array().at(0).as_object().at("profiles"), json::array{"smoke"});
}

TEST(ProfilesE2E, ProfilesOnlyWorkerFailsCommandJobsAndStillRunsProfiles) {
  ControlServer cp({.poll_timeout = "1s"});
  ScriptDir scripts;
  AgentProcess agent(cp, {.extra_toml = "[profiles]\nsmoke = \"" + scripts.smoke().string() + "\"\n",
                          .process_toml = "allow_commands = false\n"});
  agent.wait_for_state("serving");
  std::string argv_job = submit(cp, {"--", "/usr/bin/touch", agent.dir() + "/ran"});
  std::string training =
      submit(cp, {"--kind", "training", "--payload", R"({"profile":"smoke","parameters":{"message":"ok"}})"});
  auto final = [](const std::string& j) { return job_state(j) == "succeeded" || job_state(j) == "failed"; };
  wait_for_job(cp, argv_job, final);
  wait_for_job(cp, training, final);
  auto a = job_json(cp, argv_job);
  EXPECT_EQ(a.at("state"), "failed");
  EXPECT_NE(std::string(a.at("message").as_string()).find("approved training profiles only"), std::string::npos)
      << json::serialize(a);
  EXPECT_FALSE(fs::exists(agent.dir() + "/ran"));
  auto t = job_json(cp, training);
  EXPECT_EQ(t.at("state"), "succeeded") << json::serialize(t);
  EXPECT_EQ(t.at("result").as_object().at("message"), "ok");
}

}  // namespace
