// launch.json round trip, status.json parsing and the state of a launch from what can be observed.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <boost/json.hpp>

#include "installer/launch_record.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::installer;

namespace {

LaunchRecord local_record() {
  LaunchRecord r;
  r.launch_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
  r.worker_label = "login1-01ARZ3NDEKTSV4RRFFQ69G5FAV";
  r.mode = "local";
  r.host = "login1";
  r.server = "https://cp";
  r.config_path = "/s/launches/01ARZ3NDEKTSV4RRFFQ69G5FAV/config.toml";
  r.log_path = "/h/.local/share/nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV.log";
  r.command = {"/bin/nymph", "run", "--config", r.config_path.native()};
  r.created_at_ms = 1469922850259;
  r.pid = 4242;
  return r;
}

LaunchRecord slurm_record() {
  auto r = local_record();
  r.mode = "slurm";
  r.pid.reset();
  r.slurm_job_id = "77";
  return r;
}

}  // namespace

TEST(LaunchRecord, JsonRoundTrip) {
  for (auto r : {local_record(), slurm_record()}) {
    r.start_error = "it failed";
    auto back = launch_record_from_json(to_json(r));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->launch_id, r.launch_id);
    EXPECT_EQ(back->worker_label, r.worker_label);
    EXPECT_EQ(back->mode, r.mode);
    EXPECT_EQ(back->host, r.host);
    EXPECT_EQ(back->config_path, r.config_path);
    EXPECT_EQ(back->log_path, r.log_path);
    EXPECT_EQ(back->command, r.command);
    EXPECT_EQ(back->created_at_ms, r.created_at_ms);
    EXPECT_EQ(back->pid, r.pid);
    EXPECT_EQ(back->slurm_job_id, r.slurm_job_id);
    EXPECT_EQ(back->start_error, r.start_error);
  }
  auto j = to_json(slurm_record()).as_object();
  EXPECT_TRUE(j["pid"].is_null());
  EXPECT_EQ(j["slurmJobId"].as_string(), "77");
}

TEST(LaunchRecord, DamagedRecordsAreErrors) {
  auto j = to_json(local_record()).as_object();
  j.erase("workerLabel");
  EXPECT_NE(launch_record_from_json(j).error().message.find("workerLabel"), std::string::npos);
  j = to_json(local_record()).as_object();
  j["mode"] = "cloud";
  EXPECT_FALSE(launch_record_from_json(j));
  j = to_json(local_record()).as_object();
  j["pid"] = 1;  // never signal init
  EXPECT_FALSE(launch_record_from_json(j));
  j["pid"] = "12";
  EXPECT_FALSE(launch_record_from_json(j));
  EXPECT_FALSE(launch_record_from_json(boost::json::value(3)));
}

TEST(LaunchRecord, AFifoOrDeviceInALaunchDirIsRefusedWithoutBlocking) {
  nymph::test::TempDir dir("nymph-launch");
  ASSERT_EQ(::mkfifo((dir.path() / "launch.json").c_str(), 0600), 0);  // blocked in open() before
  auto r = read_launch_record(dir.path());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  std::filesystem::create_symlink("/dev/zero", dir.path() / "status.json");  // grew without bound before
  auto s = read_status(dir.path());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not a regular file"), std::string::npos) << s.error().message;
}

TEST(StatusFile, ParsesTheDaemonsFields) {
  auto s = parse_status(R"({"pid":12,"launchId":"X","label":"l","workerId":"w-1","state":"exited",
                            "exitReason":"sigterm","message":"bye","startedAtMs":1,"updatedAtMs":2,"runningJobs":0})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->pid, 12);
  EXPECT_EQ(s->state, "exited");
  EXPECT_EQ(s->worker_id, "w-1");
  EXPECT_EQ(s->exit_reason, "sigterm");
  EXPECT_EQ(s->message, "bye");
  auto running = parse_status(R"({"pid":12,"state":"serving","exitReason":null})");
  ASSERT_TRUE(running);
  EXPECT_FALSE(running->exit_reason);
  EXPECT_FALSE(parse_status(R"({"state":"serving"})"));
  EXPECT_FALSE(parse_status(R"({"pid":-3,"state":"serving"})"));
  EXPECT_FALSE(parse_status("{\"pid\":12,\"state\":"));
}

TEST(StatusFile, ARunnersTroubleIsReadForLaunches) {
  auto s = parse_status(R"({"pid":12,"state":"serving","runnerTrouble":{"slurm":"slurmctld: Rate limit exceeded","x":7}})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->runner_trouble, (std::map<std::string, std::string>{{"slurm", "slurmctld: Rate limit exceeded"}}));
  EXPECT_TRUE(parse_status(R"({"pid":12,"state":"serving"})")->runner_trouble.empty());
}

// Found by the records fuzz target: a status.json with an empty "state" was read as a launch in no state at all.
TEST(StatusFile, AnEmptyStateIsNotAState) {
  auto s = parse_status(R"({"pid":12,"launchI`":"x","state":"","message":"bye"})");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("\"state\" is empty"), std::string::npos) << s.error().message;
}

TEST(Classify, LocalLaunches) {
  auto r = local_record();
  EXPECT_EQ(classify(r, {.process_running = true}), LaunchState::running);
  EXPECT_EQ(classify(r, {.process_running = false}), LaunchState::exited);
  EXPECT_EQ(classify(r, {.on_this_host = false}), LaunchState::unknown);
  r.pid.reset();
  EXPECT_EQ(classify(r, {}), LaunchState::unknown);
  r.start_error = "did not come up";
  EXPECT_EQ(classify(r, {}), LaunchState::exited);
}

TEST(Classify, SlurmLaunches) {
  auto r = slurm_record();
  auto with = [&](std::optional<std::string> s) { return classify(r, {.slurm_state = std::move(s)}); };
  EXPECT_EQ(with("PENDING"), LaunchState::queued);
  EXPECT_EQ(with("REQUEUED"), LaunchState::queued);
  EXPECT_EQ(with("RUNNING"), LaunchState::running);
  EXPECT_EQ(with("CONFIGURING"), LaunchState::running);
  EXPECT_EQ(with("COMPLETING"), LaunchState::running);
  EXPECT_EQ(with("COMPLETED"), LaunchState::exited);
  EXPECT_EQ(with("CANCELLED"), LaunchState::exited);
  EXPECT_EQ(with("TIMEOUT"), LaunchState::exited);
  EXPECT_EQ(with(""), LaunchState::exited);
  EXPECT_EQ(with(std::nullopt), LaunchState::unknown);
  r.slurm_job_id.clear();
  EXPECT_EQ(with("RUNNING"), LaunchState::unknown);
}
