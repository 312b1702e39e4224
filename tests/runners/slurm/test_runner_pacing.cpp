// How the Slurm runner paces its calls to slurmctld, driven through the scripted FakeSlurm: it backs off from a
// rate-limiting controller instead of flooding it (and says so), never exceeds its RPC budget in any window,
// learns of ends from exit records without waiting for its next cycle, and tries a refused sbatch again.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include "runners/slurm/script.hpp"
#include "tests/runners/slurm/runner_fixture.hpp"
#include "tests/support/run_coro.hpp"

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace nymph::runners;
using namespace nymph::runners::slurm;
using namespace std::chrono_literals;
using nymph::test::FakeJob;
using nymph::test::FakeSlurm;
using nymph::test::Recorder;
using nymph::test::run_coro;

struct PacingTest : nymph::test::SlurmRunnerFixture {
  // A job squeue shows pending, then running for `running` answers, then no longer (sacct: COMPLETED).
  void script_jobs(int running) {
    fake.on_submit = [running](const fs::path&) {
      FakeJob j;
      j.squeue = {"PENDING|Priority"};
      for (int i = 0; i < running; ++i) j.squeue.emplace_back("RUNNING|None");
      j.squeue.emplace_back("");
      return j;
    };
  }
};

asio::awaitable<JobUpdate> run_one(SlurmRunner* runner, JobSpec spec, Recorder* rec) {
  co_return co_await runner->run(std::move(spec), *rec);
}

TEST_F(PacingTest, ARateLimitingSlurmctldIsBackedOffFromNotFloodedAndTheTroubleIsSaid) {
  // A token every 100 ms after the first three: at its 1 ms cycle the runner would be refused ~500 times.
  fake.rate_limit = FakeSlurm::RateLimit{.capacity = 3, .per_second = 10, .tokens = 3};
  script_jobs(3);
  auto runner = make_runner(config());
  std::vector<std::string> troubles;
  runner->on_trouble_change([&] { troubles.push_back(runner->trouble()); });
  Recorder rec;
  auto final = run_coro(ioc, run_one(runner.get(), spec("j"), &rec), 20s);

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_GT(fake.rate_limited, 0) << "the bucket never ran dry: nothing was tested";
  EXPECT_LT(fake.rate_limited, 120) << "refused " << fake.rate_limited << " times: the runner did not back off";
  ASSERT_FALSE(troubles.empty());
  EXPECT_NE(troubles.front().find("squeue: error: Rate limit exceeded"), std::string::npos) << troubles.front();
  EXPECT_NE(troubles.front().find("next try in"), std::string::npos) << troubles.front();
  EXPECT_EQ(troubles.back(), "") << "the trouble was not cleared once slurmctld answered again";
  EXPECT_EQ(runner->trouble(), "");
}

TEST_F(PacingTest, NoWindowHoldsMoreSlurmctldRpcsThanTheBudget) {
  script_jobs(8);
  auto c = config();
  c.rpc_budget_per_minute = 4;
  c.rpc_budget_window = 200ms;
  std::ostringstream log_text;
  auto log = std::make_shared<spdlog::logger>("runner", std::make_shared<spdlog::sinks::ostream_sink_st>(log_text));
  auto runner = make_runner(c, log);
  Recorder rec;
  auto final = run_coro(ioc, run_one(runner.get(), spec("j"), &rec), 20s);

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  // The log says the calls wait for the budget, once per stretch of waiting rather than once per call.
  const std::string logged = log_text.str();
  std::size_t said = 0;
  for (auto at = logged.find("wait for the RPC budget"); at != std::string::npos;
       at = logged.find("wait for the RPC budget", at + 1))
    ++said;
  EXPECT_GE(said, 1u) << logged;
  EXPECT_LE(said, fake.rpc_times.size() / 2) << logged;
  // The fake stamps a call a little after the runner counted it (more on a loaded machine): 50 ms of slack. At its
  // 1 ms cycle the runner would make the five calls within a few milliseconds without the budget.
  const auto& t = fake.rpc_times;  // sbatch + 10 squeue calls
  ASSERT_GE(t.size(), 10u);
  for (std::size_t i = 0; i + 4 < t.size(); ++i)
    EXPECT_GE(t[i + 4] - t[i], 150ms) << "RPCs " << i << " to " << i + 4 << " fell within one 200 ms window";
}

TEST_F(PacingTest, AnExitRecordBringsTheNextCycleForward) {
  fake.on_submit = [](const fs::path&) {
    FakeJob j;
    j.squeue = {""};  // once asked, it has ended (sacct: COMPLETED)
    return j;
  };
  auto c = config();
  c.poll_interval = 1h;  // no cycle of its own before the hang guard
  c.exit_scan_interval = 1ms;
  auto runner = make_runner(c);
  Recorder rec;
  rec.on_update = [&](const JobUpdate& u) {
    if (u.state != JobState::running || !u.slurm_job_id) return;
    // What the job's EXIT trap does as it ends.
    std::ofstream record(launch / kExitRecordDir / job_dir_name("j", 1));
  };
  auto final = run_coro(ioc, run_one(runner.get(), spec("j"), &rec), 10s);

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(fake.count("squeue"), 1);
  runner->release("j");
  runner.reset();  // waits for the I/O threads' cleanup
  EXPECT_FALSE(fs::exists(launch / kExitRecordDir / job_dir_name("j", 1))) << "release() leaves the record behind";
}

TEST_F(PacingTest, AJobStillActiveAfterItsExitRecordIsLookedAtAgainSoon) {
  fake.on_submit = [](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None", ""};  // slurmd had not yet reported the end when the record brought the cycle
    return j;
  };
  auto c = config();
  c.poll_interval = 1h;
  c.exit_scan_interval = 1ms;
  auto runner = make_runner(c);
  Recorder rec;
  rec.on_update = [&](const JobUpdate& u) {
    if (u.state == JobState::running && u.slurm_job_id && u.message.starts_with("submitted"))
      std::ofstream record(launch / kExitRecordDir / job_dir_name("j", 1));
  };
  auto final = run_coro(ioc, run_one(runner.get(), spec("j"), &rec), 10s);  // 1 s, not the hour

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(fake.count("squeue"), 2);
}

TEST_F(PacingTest, ExitRecordsOfAttemptsNotInTheJournalAreRemovedAtStartUp) {
  fs::create_directories(launch / kExitRecordDir);
  { std::ofstream left_over(launch / kExitRecordDir / "old-1"); }
  auto runner = make_runner(config());
  EXPECT_FALSE(fs::exists(launch / kExitRecordDir / "old-1"));
  EXPECT_EQ(fs::status(launch / kExitRecordDir).permissions(), fs::perms::owner_all);
}

TEST_F(PacingTest, ASbatchRefusedByTheRateLimitIsTriedAgainAndTheJobIsSubmittedOnce) {
  script_jobs(1);
  fake.sbatch_refusals = 2;
  auto runner = make_runner(config());
  Recorder rec;
  auto final = run_coro(ioc, run_one(runner.get(), spec("j"), &rec), 20s);

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(fake.count("sbatch"), 3);
  EXPECT_EQ(fake.jobs.size(), 1u);
}

TEST_F(PacingTest, ASbatchThatTimedOutIsNotTriedAgainItMayHaveQueuedTheJob) {
  fake.sbatch_answer = nymph::slurm::CommandResult{
      1, "", "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"};
  auto runner = make_runner(config());
  Recorder rec;
  auto final = run_coro(ioc, run_one(runner.get(), spec("j"), &rec), 20s);

  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("Socket timed out"), std::string::npos) << final.message;
  EXPECT_EQ(fake.count("sbatch"), 1);
}

}  // namespace
