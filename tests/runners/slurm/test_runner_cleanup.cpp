// The Slurm runner's job directories and identities through the scripted FakeSlurm: the directory is gone
// after release() whatever the end (succeeded, failed, cancelled; lost and failed preparations are in
// test_runner_faults.cpp), squeue's final states settle jobs, and the journal and the commands carry what
// identifies a job (name, cluster, submit time).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "slurm/time.hpp"
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

struct CleanupTest : nymph::test::SlurmRunnerFixture {
  void ends(std::deque<std::string> squeue, std::string sacct, std::string wait_status = "0") {
    fake.on_submit = [=](const fs::path&) {
      FakeJob j;
      j.squeue = squeue;
      j.sacct = sacct;
      j.wait_status = wait_status;
      return j;
    };
  }
  // Runs job "a" to its end, checks the directory existed until release() and is gone after it.
  JobUpdate run_and_release(SlurmRunnerConfig c, std::function<void(SlurmRunner&, int)> on_squeue = {}) {
    auto runner = make_runner(std::move(c));
    if (on_squeue) fake.on_squeue = [&](int n) { on_squeue(*runner, n); };
    Recorder rec;
    auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
    EXPECT_TRUE(fs::exists(launch / "a-1" / "job.sbatch")) << "kept until the final event was delivered";
    runner->release("a");
    runner.reset();
    EXPECT_FALSE(fs::exists(launch / "a-1")) << "removed after " << to_string(final.state);
    EXPECT_TRUE(read_journal(launch / kJournalFile).value().empty());
    return final;
  }
};

TEST_F(CleanupTest, JobDirectoryIsRemovedAfterSuccess) {
  ends({"RUNNING|None", ""}, "COMPLETED|0:0");
  EXPECT_EQ(run_and_release(config()).state, JobState::succeeded);
}

TEST_F(CleanupTest, JobDirectoryIsRemovedAfterAFailureThatRan) {
  ends({"RUNNING|None", ""}, "FAILED|3:0");
  auto final = run_and_release(config());
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_EQ(final.exit_code, 3);
}

TEST_F(CleanupTest, JobDirectoryIsRemovedAfterCancel) {
  ends({"RUNNING|None"}, "COMPLETED|0:0");
  auto final = run_and_release(config(), [](SlurmRunner& r, int n) {
    if (n == 2) r.stop("a", StopReason::user_cancel);
  });
  EXPECT_EQ(final.state, JobState::cancelled) << final.message;
  EXPECT_EQ(fake.count("scancel"), 1);
}

TEST_F(CleanupTest, JobDirectoryIsRemovedAfterTheQueueBoundCancelsIt) {
  ends({"PENDING|Priority"}, "COMPLETED|0:0");
  auto c = config();
  c.max_queue_duration = 1ms;
  auto final = run_and_release(c);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("queued longer than max_queue_duration (1ms)"), std::string::npos) << final.message;
  EXPECT_EQ(fake.count("scancel"), 1);
}

TEST_F(CleanupTest, AFinalStateInSqueueSettlesWithoutSacct) {
  ends({"RUNNING|None", "FAILED|NonZeroExitCode"}, "COMPLETED|0:0", "768");
  auto final = run_and_release(config());
  EXPECT_EQ(final.state, JobState::failed) << "squeue's FAILED, not sacct's (made-up) COMPLETED";
  EXPECT_EQ(final.exit_code, 3);
  EXPECT_EQ(fake.count("sacct"), 0);
}

TEST_F(CleanupTest, IdentityIsJournaledAndTheCommandsAskForIt) {
  ends({"RUNNING|None", ""}, "COMPLETED|0:0");
  auto runner = make_runner(config());
  Recorder rec;
  const auto before = WallClock::now();
  rec.on_update = [&](const JobUpdate& u) {
    if (u.state != JobState::running || !rec.updates.empty()) return;
    auto j = read_journal(launch / kJournalFile).value();
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0].job_name, "nymph-a");
    EXPECT_EQ(j[0].cluster, "nymphlab") << "from sbatch's `1000;nymphlab`";
    EXPECT_GE(j[0].submitted_at, before - 1s);
    EXPECT_LE(j[0].submitted_at, WallClock::now());
  };
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  int squeues = 0, saccts = 0;
  for (std::size_t i = 0; i < fake.calls.size(); ++i) {
    const auto& call = fake.calls[i];
    if (call[0] != "squeue" && call[0] != "sacct") continue;
    ASSERT_TRUE(fake.envs[i]);
    EXPECT_EQ(fake.envs[i]->at("SLURM_TIME_FORMAT"), "%s") << "times as epoch seconds";
    if (call[0] == "squeue") {
      ++squeues;
      EXPECT_EQ(call, (std::vector<std::string>{"squeue", "--noheader", "-t", "all", "-r", "-O",
                                                std::string(nymph::slurm::kSqueueJobFormat), "-j", "1000"}));
    } else {
      ++saccts;
      ASSERT_EQ(call.size(), 10u);
      EXPECT_EQ(call[6], "-S");
      // The bound is the submission's lower bound less the margin, in local time.
      EXPECT_GE(call[7], nymph::slurm::format_slurm_time(before - kSubmitTimeMargin - 1s));
      EXPECT_LE(call[7], nymph::slurm::format_slurm_time(WallClock::now() - kSubmitTimeMargin));
      EXPECT_EQ(call[8], "-j");
      EXPECT_EQ(call[9], "1000");
    }
  }
  EXPECT_GE(squeues, 2);
  EXPECT_EQ(saccts, 1);
  runner->release("a");
}

TEST_F(CleanupTest, ClusterComesFromScontrolWhenSbatchDoesNotNameIt) {
  ends({"RUNNING|None", ""}, "COMPLETED|0:0");
  auto c = config();
  c.sbatch = "sbatch-single-cluster";  // answered below without `;cluster`
  struct SingleCluster : nymph::slurm::CommandRunner {
    FakeSlurm& fake;
    int scontrols = 0;
    explicit SingleCluster(FakeSlurm& f) : fake(f) {}
    asio::awaitable<nymph::Result<nymph::slurm::CommandResult>> run(std::vector<std::string> argv,
                                                                   std::optional<nymph::slurm::Environment> env,
                                                                   std::chrono::milliseconds t) override {
      if (argv[0] == "scontrol") {
        ++scontrols;
        co_return nymph::slurm::CommandResult{0, "AuthType = auth/munge\nClusterName = lab2\n", ""};
      }
      bool sbatch = argv[0] == "sbatch-single-cluster";
      if (sbatch) argv[0] = "sbatch";
      auto r = co_await fake.run(std::move(argv), std::move(env), t);
      if (sbatch && r) r->out = r->out.substr(0, r->out.find(';')) + "\n";
      co_return r;
    }
  };
  auto commands = std::make_unique<SingleCluster>(fake);
  auto* seen = commands.get();
  fake.cluster = "lab2";
  auto runner = std::make_unique<SlurmRunner>(ioc.get_executor(), c, std::move(commands), nymph::null_logger());
  Recorder rec;
  rec.on_update = [&](const JobUpdate& u) {
    if (u.state != JobState::running || !rec.updates.empty()) return;
    EXPECT_EQ(read_journal(launch / kJournalFile).value().at(0).cluster, "lab2");
  };
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  Recorder rec2;
  run_coro(ioc, runner->run(spec("b"), rec2), 10s);
  EXPECT_EQ(seen->scontrols, 1) << "asked once per runner";
}

}  // namespace
