// Training profiles on the process runner, with real scripts (among them packaging/examples/slurm-smoke.sh):
// parameters reach input.json byte-exact and are never executed, the result is read only after exit 0.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "common/logging.hpp"
#include "runners/process_runner.hpp"
#include "tests/runners/process_helpers.hpp"
#include "tests/support/run_coro.hpp"
#include "tests/support/files.hpp"

using nymph::test::read_file;

namespace nymph::runners {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using test::run_coro;

class ProcessTrainingTest : public ::testing::Test {
 protected:
  // Installs `text` as an approved script `name`.sh (mode 0755) and returns its profile.
  Profile install(const std::string& name, const std::string& text) {
    fs::path path = tmp / (name + ".sh");
    std::ofstream(path) << text;
    fs::permissions(path, fs::perms(0755));
    return Profile{name, path, {}, 64 * 1024};
  }
  Profile install_smoke() {
    fs::path path = tmp / "slurm-smoke.sh";
    fs::copy_file(fs::path(NYMPH_SOURCE_DIR) / "packaging/examples/slurm-smoke.sh", path);
    fs::permissions(path, fs::perms(0755));
    return Profile{"smoke", path, {}, 64 * 1024};
  }
  ProcessRunnerConfig config(std::vector<Profile> profiles) {
    ProcessRunnerConfig c;
    c.work_dir = tmp / "work";
    c.kill_grace = 300ms;
    c.profiles = ProfileCatalog(std::move(profiles));
    return c;
  }
  static JobSpec training(std::string profile, json::object parameters, std::string id = "t1") {
    JobSpec s;
    s.job_id = std::move(id);
    s.kind = "training";
    s.profile = std::move(profile);
    s.parameters = std::move(parameters);
    return s;
  }
  JobUpdate run(ProcessRunner& runner, JobSpec spec) { return run_coro(ioc, runner.run(std::move(spec), reporter), 60s); }
  fs::path job_dir(const std::string& id = "t1") const { return tmp / "work" / (id + "-1"); }

  boost::asio::io_context ioc;
  test::TempDir tmp;
  test::RecordingReporter reporter;
};

TEST_F(ProcessTrainingTest, SmokeProfileReturnsItsResult) {
  ProcessRunner runner(config({install_smoke()}), null_logger());
  auto final = run(runner, training("smoke", {{"message", "hello"}}));
  ASSERT_EQ(final.state, JobState::succeeded) << final.message << "\n" << reporter.err;
  EXPECT_EQ(final.exit_code, 0);
  ASSERT_TRUE(final.result);
  const auto& r = final.result->as_object();
  EXPECT_EQ(r.at("message"), "hello");
  EXPECT_TRUE(r.at("slurmJobId").is_null()) << "not under Slurm";
  EXPECT_FALSE(r.at("host").as_string().empty());
  ASSERT_EQ(reporter.updates.size(), 1u);
  EXPECT_FALSE(reporter.updates[0].result);
  EXPECT_TRUE(fs::exists(job_dir() / "input.json"));
  runner.release("t1");
  std::function<bool()> gone = [&] { return !fs::exists(job_dir()); };
  run_coro(ioc, test::poll_until(gone, std::chrono::milliseconds(10'000)), 20s);
  EXPECT_FALSE(fs::exists(job_dir())) << "the work directory is cleaned after the final event";
}

TEST_F(ProcessTrainingTest, HostileParametersArriveByteExactAndNothingExecutes) {
  const fs::path m = tmp / "marker";
  std::string big(1'000'000, 'A');
  big += "$(touch " + (m.string() + "-big") + ")";
  json::object params{
      {"message", "$(touch " + m.string() + "-subst) `touch " + m.string() + "-tick` ; touch " + m.string() +
                      "-semi && echo 'single' \"double\" \\ back\nnew line\r\ttab \x01 ctl é \xe2\x82\xac"},
      {"big", big},
      {"nested", json::object{{"$(id)", json::array{"`id`", 1, nullptr, true}}}}};
  Profile smoke = install_smoke();
  smoke.max_input_bytes = 2 * 1024 * 1024;  // the 1 MB string needs more than the default 64 KiB
  ProcessRunner runner(config({smoke}), null_logger());
  auto final = run(runner, training("smoke", params));
  ASSERT_EQ(final.state, JobState::succeeded) << final.message << "\n" << reporter.err;
  EXPECT_EQ(read_file(job_dir() / "input.json"), json::serialize(params)) << "input.json byte-exact";
  ASSERT_TRUE(final.result);
  EXPECT_EQ(final.result->as_object().at("message"), params.at("message")) << "the smoke script copies it verbatim";
  for (const char* suffix : {"-subst", "-tick", "-semi", "-big"})
    EXPECT_FALSE(fs::exists(m.string() + suffix)) << "executed a parameter: " << suffix;
}

TEST_F(ProcessTrainingTest, ScriptGetsPathsAsArgumentsAndEnvironment) {
  auto probe = install("probe",
                       "#!/bin/sh\n"
                       "printf '{\"argc\":%d,\"arg1\":\"%s\",\"arg2\":\"%s\",\"input\":\"%s\",\"result\":\"%s\",\"pwd\":\"%s\"}' "
                       "\"$#\" \"$1\" \"$2\" \"$NYMPH_INPUT\" \"$NYMPH_RESULT\" \"$(pwd)\" >\"$2\"\n");
  ProcessRunner runner(config({probe}), null_logger());
  auto final = run(runner, training("probe", {{"x", 1}}));
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  ASSERT_TRUE(final.result);
  const auto& r = final.result->as_object();
  const std::string in = (job_dir() / "input.json").string(), out = (job_dir() / "result.json").string();
  EXPECT_EQ(r.at("argc"), 2);
  EXPECT_EQ(r.at("arg1").as_string(), in);
  EXPECT_EQ(r.at("arg2").as_string(), out);
  EXPECT_EQ(r.at("input").as_string(), in);
  EXPECT_EQ(r.at("result").as_string(), out);
  EXPECT_EQ(r.at("pwd").as_string(), job_dir().string());
}

TEST_F(ProcessTrainingTest, MissingOrInvalidResultFails) {
  auto none = install("none", "#!/bin/sh\necho working\n");
  auto bad = install("bad", "#!/bin/sh\nprintf '{\"a\":' >\"$2\"\n");
  ProcessRunner runner(config({none, bad}), null_logger());
  auto f1 = run(runner, training("none", {}, "n1"));
  EXPECT_EQ(f1.state, JobState::failed);
  EXPECT_EQ(f1.exit_code, 0);
  EXPECT_FALSE(f1.result);
  EXPECT_NE(f1.message.find("wrote no result.json"), std::string::npos) << f1.message;
  EXPECT_EQ(reporter.out, "working\n");
  auto f2 = run(runner, training("bad", {}, "n2"));
  EXPECT_EQ(f2.state, JobState::failed);
  EXPECT_FALSE(f2.result);
  EXPECT_NE(f2.message.find("not valid JSON"), std::string::npos) << f2.message;
}

TEST_F(ProcessTrainingTest, FailingProfileHasItsExitCodeAndNoResult) {
  auto failing = install("failing", "#!/bin/sh\necho '{\"partial\":1}' >\"$2\"\nexit 3\n");
  ProcessRunner runner(config({failing}), null_logger());
  auto final = run(runner, training("failing", {}));
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_EQ(final.exit_code, 3);
  EXPECT_FALSE(final.result);
}

TEST_F(ProcessTrainingTest, UnknownProfileAndRefusedJobsStartNothing) {
  const fs::path marker = tmp / "ran";
  auto p = install("p", "#!/bin/sh\ntouch '" + marker.string() + "'\necho '{}' >\"$2\"\n");
  ProcessRunner runner(config({p}), null_logger());
  auto unknown = run(runner, training("nope", {}, "u1"));
  EXPECT_EQ(unknown.state, JobState::failed);
  EXPECT_NE(unknown.message.find("unknown training profile 'nope'"), std::string::npos) << unknown.message;
  EXPECT_FALSE(fs::exists(job_dir("u1")));

  auto params = run(runner, training("p", {}, "u2"));  // sanity: the profile itself does run
  ASSERT_EQ(params.state, JobState::succeeded) << params.message;
  ASSERT_TRUE(fs::remove(marker));

  JobSpec not_object = training("p", {}, "u3");
  not_object.parameters = json::array{1, 2};
  auto f3 = run(runner, not_object);
  EXPECT_NE(f3.message.find("must be a JSON object"), std::string::npos) << f3.message;

  JobSpec with_env = training("p", {}, "u4");
  with_env.env["BASH_ENV"] = "/tmp/evil";
  auto f4 = run(runner, with_env);
  EXPECT_NE(f4.message.find("not environment variables"), std::string::npos) << f4.message;

  fs::permissions(p.script, fs::perms(0775));  // changed after start-up: refused at run time
  auto f5 = run(runner, training("p", {}, "u5"));
  EXPECT_EQ(f5.state, JobState::failed);
  EXPECT_NE(f5.message.find("writable by group"), std::string::npos) << f5.message;
  EXPECT_FALSE(fs::exists(marker)) << "a refused job ran the script";
}

TEST_F(ProcessTrainingTest, ProfilesOnlyWorkerRefusesArgvAndCommandJobs) {
  auto c = config({install_smoke()});
  c.allow_commands = false;
  c.profiles_only = true;
  ProcessRunner runner(c, null_logger());
  const fs::path marker = tmp / "ran";
  JobSpec argv_job;
  argv_job.job_id = "a1";
  argv_job.argv = {"/usr/bin/touch", marker.string()};
  auto f1 = run(runner, argv_job);
  EXPECT_EQ(f1.state, JobState::failed);
  EXPECT_NE(f1.message.find("approved training profiles only"), std::string::npos) << f1.message;
  JobSpec command_job;
  command_job.job_id = "a2";
  command_job.command = "touch " + marker.string();
  auto f2 = run(runner, command_job);
  EXPECT_EQ(f2.state, JobState::failed);
  EXPECT_FALSE(fs::exists(marker));
  auto ok = run(runner, training("smoke", {{"message", "still works"}}));
  EXPECT_EQ(ok.state, JobState::succeeded) << ok.message;
}

}  // namespace
}  // namespace nymph::runners
