// Faults injected into the Slurm runner through the scripted FakeSlurm (labels: unit, faults): a job Slurm
// loses, a preparation that fails after the job directory exists, and a recycled Slurm id whose accounting
// record belongs to another job. Nothing leaks and nothing is misreported.
#include <gtest/gtest.h>

#include <set>

#include <boost/asio/io_context.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "tests/runners/slurm/fake_slurm.hpp"
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
using nymph::test::Forward;
using nymph::test::Recorder;
using nymph::test::run_coro;

using FaultTest = nymph::test::SlurmRunnerFixture;

TEST_F(FaultTest, AJobSlurmLostEndsLostAndItsDirectoryIsRemoved) {
  fake.on_submit = [](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None", ""};  // gone from squeue, no accounting record, no exit-status file
    j.sacct = "";
    return j;
  };
  auto runner = make_runner(config());
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::lost) << final.message;
  EXPECT_TRUE(fs::exists(launch / "a-1"));
  runner->release("a");
  runner.reset();
  EXPECT_FALSE(fs::exists(launch / "a-1"));
  EXPECT_TRUE(read_journal(launch / kJournalFile).value().empty());
}

TEST_F(FaultTest, APreparationFailureAfterTheDirectoryExistsLeavesNothing) {
  auto c = config();
  int created = 0;
  c.after_job_dir_created = [&](const fs::path& dir) -> nymph::Result<void> {
    ++created;
    EXPECT_TRUE(fs::is_directory(dir));
    return nymph::fail("injected: disk full while writing " + dir.string());
  };
  auto runner = make_runner(c);
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("injected"), std::string::npos) << final.message;
  EXPECT_EQ(created, 1);
  EXPECT_FALSE(fs::exists(launch / "a-1")) << "removed at once, before any release()";
  EXPECT_EQ(fake.count("sbatch"), 0);
  runner->release("a");
  runner.reset();
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(launch)) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{std::string(kJournalFile), std::string(kExitRecordDir), std::string(kArrayScriptDir)}))
      << "only the journal and the (empty) exit-record and array-script directories are left in launch_dir";
  EXPECT_TRUE(fs::is_empty(launch / kExitRecordDir));
}

// sbatch gave the job an id, but the journal could not record it: a restarted manager would not know the job, so
// it is cancelled, and the attempt fails saying so (never reported running, never tracked).
TEST_F(FaultTest, ASubmissionTheJournalCannotRecordIsCancelledAndFails) {
  auto c = config();
  c.max_array_tasks = 1;  // one sbatch per attempt (the array path: ArrayTest)
  c.before_journal_append = [] { return nymph::Result<void>(nymph::fail("injected: No space left on device")); };
  auto runner = make_runner(c);
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("No space left on device; Slurm job 1000 cancelled"), std::string::npos)
      << final.message;
  EXPECT_EQ(final.slurm_job_id, "1000");
  EXPECT_TRUE(rec.updates.empty()) << "never reported running";
  EXPECT_EQ(fake.calls.back(), (std::vector<std::string>{"scancel", "1000"}));
  EXPECT_EQ(fake.count("squeue"), 0) << "never tracked";
  EXPECT_EQ(runner->tracked(), 0u);
  runner->release("a");
  runner.reset();
  EXPECT_FALSE(fs::exists(launch / "a-1"));
}

TEST_F(FaultTest, APreparedTrainingJobThatFailsAfterItsDirectoryExistsLeavesNothing) {
  fs::path script = launch.string() + "-profile.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  auto c = config();
  c.profiles = ProfileCatalog({Profile{"smoke", script, {}, 4096}});
  c.after_job_dir_created = [](const fs::path&) -> nymph::Result<void> { return nymph::fail("injected"); };
  auto runner = make_runner(c);
  JobSpec s;
  s.job_id = "t";
  s.lease_id = "lease-t";
  s.kind = "training";
  s.profile = "smoke";
  Recorder rec;
  auto final = run_coro(ioc, runner->run(s, rec), 10s);
  fs::remove(script);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_FALSE(fs::exists(launch / "t-1"));
  EXPECT_EQ(fake.count("sbatch"), 0);
}

TEST_F(FaultTest, ARecycledIdsAccountingRecordUnderAnotherNameIsIgnored) {
  // Our job 1000 vanishes (a slurmctld reset lost it) and accounting holds another job's FAILED record for the
  // same id: the attempt must not be reported failed (nor succeeded) from it; with no record of its own it is
  // lost.
  fake.on_submit = [](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None", ""};
    j.sacct = "FAILED|1:0";
    return j;
  };
  fake.on_squeue = [&](int n) {
    if (n == 2) fake.jobs["1000"].name = "someone-elses-job";
  };
  auto runner = make_runner(config());
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::lost) << final.message;
  EXPECT_GE(fake.count("sacct"), 3) << "asked on each cycle, never believed";
  runner->release("a");
}

TEST_F(FaultTest, ARecycledIdInSqueueIsNotTakenForOurRunningJob) {
  // Squeue shows id 1000 RUNNING, but it is another job (another name): ours is missing from squeue, and its
  // own accounting record then settles it.
  fake.on_submit = [](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None"};
    j.sacct = "NODE_FAIL|0:0";
    return j;
  };
  fake.on_squeue = [&](int n) {
    if (n != 2) return;
    // From now on squeue answers for someone else's job 1000; sacct still holds ours.
    auto& j = fake.jobs["1000"];
    j.squeue = {"RUNNING|None"};
    j.name = "someone-elses-job";
  };
  struct SacctAsOurs : nymph::slurm::CommandRunner {
    FakeSlurm& fake;
    explicit SacctAsOurs(FakeSlurm& f) : fake(f) {}
    asio::awaitable<nymph::Result<nymph::slurm::CommandResult>> run(std::vector<std::string> argv,
                                                                   std::optional<nymph::slurm::Environment> env,
                                                                   std::chrono::milliseconds t) override {
      bool sacct = argv[0] == "sacct";
      auto r = co_await fake.run(std::move(argv), std::move(env), t);
      if (sacct && r) {
        std::string& out = r->out;
        for (auto at = out.find("someone-elses-job"); at != std::string::npos; at = out.find("someone-elses-job"))
          out.replace(at, 17, "nymph-a");
      }
      co_return r;
    }
  };
  auto runner = std::make_unique<SlurmRunner>(ioc.get_executor(), config(), std::make_unique<SacctAsOurs>(fake),
                                              nymph::null_logger());
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed) << final.message;
  EXPECT_NE(final.message.find("NODE_FAIL"), std::string::npos) << final.message;
  runner->release("a");
}

}  // namespace
