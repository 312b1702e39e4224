// The tracking state machine, stepped through whole poll cycles with made-up Slurm outputs: no processes,
// no files, no sleeps.
#include <gtest/gtest.h>

#include "runners/slurm/tracker.hpp"

namespace {

using namespace nymph::runners::slurm;
using nymph::Result;
using nymph::runners::JobState;
namespace ev = tracker_event;
using std::chrono::hours;
using std::chrono::minutes;

const WallClock::time_point t0 = WallClock::time_point(std::chrono::seconds(1'800'000'000));

Result<CommandResult> out(std::string text) { return CommandResult{0, std::move(text), ""}; }
Result<CommandResult> failed(int code, std::string err) { return CommandResult{code, "", std::move(err)}; }
Result<CommandResult> timed_out() { return nymph::fail("squeue did not finish within 30s"); }

std::vector<std::string> ids(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

struct TrackerTest : ::testing::Test {
  Tracker tracker{TrackerConfig{hours(24), minutes(5), 3}};
  WallClock::time_point now = t0;

  TrackerAction step(TrackerEvent e) { return tracker.resume(e, now); }
  // Starts a cycle and expects the squeue action.
  TrackerAction start_expecting_squeue(std::vector<std::string> expected) {
    auto a = step(ev::CycleStart{});
    EXPECT_EQ(a.step, TrackerStep::squeue);
    EXPECT_EQ(a.slurm_ids, expected);
    return a;
  }
};

TEST_F(TrackerTest, PendingRunningThenPurgedAndCompletedInSacct) {
  tracker.add({"101", t0});
  start_expecting_squeue(ids({"101"}));
  auto a = step(ev::SqueueDone{out("101|PENDING|Resources\n")});
  ASSERT_EQ(a.step, TrackerStep::cycle_done);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::pending);
  EXPECT_NE(a.reports[0].update.message.find("(Resources)"), std::string::npos);
  EXPECT_EQ(a.reports[0].update.slurm_job_id, "101");

  start_expecting_squeue(ids({"101"}));
  a = step(ev::SqueueDone{out("101|RUNNING|None\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::running);

  start_expecting_squeue(ids({"101"}));
  a = step(ev::SqueueDone{out("101|RUNNING|None\n")});
  EXPECT_TRUE(a.reports.empty()) << "an unchanged state is not reported again";

  start_expecting_squeue(ids({"101"}));
  a = step(ev::SqueueDone{out("")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  EXPECT_EQ(a.slurm_ids, ids({"101"}));
  a = step(ev::SacctDone{out("101|COMPLETED|0:0\n")});
  ASSERT_EQ(a.step, TrackerStep::cycle_done);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded);
  EXPECT_EQ(a.reports[0].update.exit_code, 0);
  EXPECT_TRUE(tracker.empty());
}

TEST_F(TrackerTest, OneSqueueForAllJobsAndOneSacctForTheMissingOnes) {
  for (const char* id : {"1", "2", "3", "4"}) tracker.add({id, t0});
  start_expecting_squeue(ids({"1", "2", "3", "4"}));
  auto a = step(ev::SqueueDone{out("2|RUNNING|None\n4|PENDING|Priority\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  EXPECT_EQ(a.slurm_ids, ids({"1", "3"}));
  a = step(ev::SacctDone{out("1|FAILED|3:0\n3|CANCELLED by 0|0:15\n")});
  ASSERT_EQ(a.step, TrackerStep::cycle_done);
  // Non-final reports come with the squeue answer's action; finals with sacct's.
  ASSERT_EQ(a.reports.size(), 2u);
  EXPECT_EQ(a.reports[0].slurm_id, "1");
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_EQ(a.reports[0].update.exit_code, 3);
  EXPECT_EQ(a.reports[1].update.state, JobState::failed) << "cancelled by someone else is a failure";
  EXPECT_EQ(a.reports[1].update.signal, 15);
  EXPECT_NE(a.reports[1].update.message.find("CANCELLED by 0"), std::string::npos);
  EXPECT_EQ(tracker.size(), 2u);
}

TEST_F(TrackerTest, NonFinalReportsOfTheSqueueAnswerArriveWithTheSacctAction) {
  tracker.add({"1", t0});
  tracker.add({"2", t0});
  start_expecting_squeue(ids({"1", "2"}));
  auto a = step(ev::SqueueDone{out("2|RUNNING|None\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].slurm_id, "2");
}

TEST_F(TrackerTest, ASinglePurgedIdThatSqueueRejectsGoesToSacct) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{failed(1, "slurm_load_jobs error: Invalid job id specified\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  a = step(ev::SacctDone{out("7|COMPLETED|0:0\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded);
}

TEST_F(TrackerTest, ASlowSqueueEndsTheCycleAndTheNextCycleRetries) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{timed_out()});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_TRUE(a.reports.empty());
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("did not finish"), std::string::npos);
  EXPECT_TRUE(tracker.tracking("7"));
  start_expecting_squeue(ids({"7"}));
  a = step(ev::SqueueDone{failed(1, "slurm_load_jobs error: Unable to contact slurm controller")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_TRUE(tracker.tracking("7")) << "a failing squeue never makes a job look gone";
}

TEST_F(TrackerTest, UnreadableSqueueOutputIsAFailedCycleNotAnEnd) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{out("garbage without separators\n")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_FALSE(a.warnings.empty());
  EXPECT_TRUE(tracker.tracking("7"));
}

TEST_F(TrackerTest, ASlowSacctFallsBackToTheExitFileButNeverDeclaresLost) {
  tracker.add({"7", t0});
  for (int cycle = 0; cycle < 6; ++cycle) {
    start_expecting_squeue(ids({"7"}));
    auto a = step(ev::SqueueDone{out("")});
    ASSERT_EQ(a.step, TrackerStep::sacct);
    a = step(ev::SacctDone{timed_out()});
    ASSERT_EQ(a.step, TrackerStep::read_exit_files);
    a = step(ev::ExitFilesRead{{{"7", std::nullopt}}});
    EXPECT_EQ(a.step, TrackerStep::cycle_done);
    EXPECT_TRUE(a.reports.empty());
  }
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("")});
  step(ev::SacctDone{timed_out()});
  auto a = step(ev::ExitFilesRead{{{"7", 4}}});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_EQ(a.reports[0].update.exit_code, 4);
}

TEST_F(TrackerTest, AccountingDisabledUsesExitFilesAndStopsAskingSacct) {
  tracker.add({"7", t0});
  tracker.add({"8", t0});
  start_expecting_squeue(ids({"7", "8"}));
  auto a = step(ev::SqueueDone{out("8|RUNNING|None\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  a = step(ev::SacctDone{failed(1, "sacct: error: Slurm accounting storage is disabled\n")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files);
  EXPECT_EQ(a.slurm_ids, ids({"7"}));
  EXPECT_TRUE(tracker.accounting_disabled());
  a = step(ev::ExitFilesRead{{{"7", 0}}});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded);
  EXPECT_NE(a.reports[0].update.message.find("exit-status file"), std::string::npos);

  start_expecting_squeue(ids({"8"}));
  a = step(ev::SqueueDone{out("")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files) << "sacct is not asked again";
  a = step(ev::ExitFilesRead{{{"8", 3}}});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_EQ(a.reports[0].update.exit_code, 3);
}

TEST_F(TrackerTest, NeitherAccountingNorExitFileIsLostAfterSomeCyclesNeverSuccess) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("")});
  auto a = step(ev::SacctDone{failed(1, "sacct: error: Slurm accounting storage is disabled")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files);
  a = step(ev::ExitFilesRead{});
  EXPECT_TRUE(a.reports.empty());
  for (int cycle = 2; cycle <= 3; ++cycle) {
    start_expecting_squeue(ids({"7"}));
    a = step(ev::SqueueDone{out("")});
    ASSERT_EQ(a.step, TrackerStep::read_exit_files);
    a = step(ev::ExitFilesRead{{{"7", std::nullopt}}});
    if (cycle == 2) {
      EXPECT_TRUE(a.reports.empty());
    }
  }
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::lost);
  EXPECT_NE(a.reports[0].update.message.find("accounting is disabled"), std::string::npos);
  EXPECT_NE(a.reports[0].update.message.find("no exit-status file"), std::string::npos);
  EXPECT_TRUE(tracker.empty());
}

TEST_F(TrackerTest, SacctWithoutARecordIsLostAfterSomeCycles) {
  tracker.add({"7", t0});
  TrackerAction a;
  for (int cycle = 1; cycle <= 3; ++cycle) {
    start_expecting_squeue(ids({"7"}));
    step(ev::SqueueDone{out("")});
    a = step(ev::SacctDone{out("")});
    ASSERT_EQ(a.step, TrackerStep::read_exit_files);
    a = step(ev::ExitFilesRead{});
  }
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::lost);
  EXPECT_NE(a.reports[0].update.message.find("sacct has no record"), std::string::npos);
}

TEST_F(TrackerTest, SacctLaggingBehindWaitsForTheFinalStateRatherThanTheExitFile) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("")});
  auto a = step(ev::SacctDone{out("7|RUNNING|0:0\n")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files);
  a = step(ev::ExitFilesRead{{{"7", 0}}});
  EXPECT_TRUE(a.reports.empty()) << "sacct will soon say TIMEOUT/CANCELLED/COMPLETED: wait for it";
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("")});
  a = step(ev::SacctDone{out("7|TIMEOUT|0:0\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_NE(a.reports[0].update.message.find("TIMEOUT"), std::string::npos);
}

TEST_F(TrackerTest, RequeueGoesBackToPendingWithoutAFinalState) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  EXPECT_EQ(step(ev::SqueueDone{out("7|RUNNING|None")}).reports.at(0).update.state, JobState::running);
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{out("7|REQUEUED|NodeFail")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::pending);
  EXPECT_NE(a.reports[0].update.message.find("NodeFail"), std::string::npos);
  start_expecting_squeue(ids({"7"}));
  a = step(ev::SqueueDone{out("7|PENDING|BeginTime")});
  EXPECT_EQ(a.reports.at(0).update.state, JobState::pending);
  start_expecting_squeue(ids({"7"}));
  EXPECT_EQ(step(ev::SqueueDone{out("7|RUNNING|None")}).reports.at(0).update.state, JobState::running);
  start_expecting_squeue(ids({"7"}));
  a = step(ev::SqueueDone{out("7|COMPLETING|None")});
  EXPECT_TRUE(a.reports.empty()) << "COMPLETING is still running";
  EXPECT_TRUE(tracker.tracking("7"));
}

TEST_F(TrackerTest, UserCancelIsScancelledAtTheNextCycleAndConfirmedLater) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("7|RUNNING|None")});
  tracker.request_cancel("7", CancelCause::user);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel);
  EXPECT_EQ(a.slurm_ids, ids({"7"}));
  a = step(ev::ScancelDone{out("")});
  ASSERT_EQ(a.step, TrackerStep::squeue);
  a = step(ev::SqueueDone{out("7|COMPLETING|None")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_TRUE(a.reports.empty());
  // Next cycle: no second scancel for a completing job; squeue no longer shows it; sacct confirms.
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("")});
  a = step(ev::SacctDone{out("7|CANCELLED by 1001|0:15\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::cancelled);
}

TEST_F(TrackerTest, ACancelledJobStillRunningIsScancelledAgain) {
  tracker.add({"7", t0});
  tracker.request_cancel("7", CancelCause::lease_lost);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel);
  step(ev::ScancelDone{out("")});
  step(ev::SqueueDone{out("7|RUNNING|None")});
  a = step(ev::CycleStart{});
  EXPECT_EQ(a.step, TrackerStep::scancel);
}

TEST_F(TrackerTest, AFailedScancelIsRetriedNextCycle) {
  tracker.add({"7", t0});
  tracker.request_cancel("7", CancelCause::user);
  step(ev::CycleStart{});
  auto a = step(ev::ScancelDone{failed(1, "scancel: error: Unable to contact slurm controller")});
  EXPECT_EQ(a.step, TrackerStep::squeue);
  EXPECT_FALSE(a.warnings.empty());
  step(ev::SqueueDone{timed_out()});
  a = step(ev::CycleStart{});
  EXPECT_EQ(a.step, TrackerStep::scancel);
}

TEST_F(TrackerTest, MaxPollDurationCancelsAndEndsFailed) {
  tracker.add({"7", t0});
  now = t0 + hours(25);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel);
  step(ev::ScancelDone{out("")});
  step(ev::SqueueDone{out("")});
  a = step(ev::SacctDone{out("7|CANCELLED by 1001|0:15\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_NE(a.reports[0].update.message.find("max_poll_duration"), std::string::npos);
}

TEST_F(TrackerTest, MaxPollDurationGivesUpWhenSlurmNeverConfirms) {
  tracker.add({"7", t0});
  now = t0 + hours(25);
  step(ev::CycleStart{});
  step(ev::ScancelDone{timed_out()});
  step(ev::SqueueDone{timed_out()});
  now += minutes(6);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::lost);
  EXPECT_TRUE(tracker.empty());
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
}

TEST_F(TrackerTest, AJobAddedDuringACycleIsNotTakenForGone) {
  tracker.add({"1", t0});
  start_expecting_squeue(ids({"1"}));
  tracker.add({"2", t0});  // submitted while squeue was running
  auto a = step(ev::SqueueDone{out("1|RUNNING|None")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done) << "no sacct for a job squeue was not asked about";
  start_expecting_squeue(ids({"1", "2"}));
}

TEST_F(TrackerTest, AJobRemovedDuringACycleGetsNoReport) {
  tracker.add({"1", t0});
  start_expecting_squeue(ids({"1"}));
  tracker.remove("1");
  auto a = step(ev::SqueueDone{out("")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_TRUE(a.reports.empty());
  EXPECT_EQ(step(ev::CycleStart{}).step, TrackerStep::cycle_done) << "nothing tracked: no squeue at all";
}

TEST_F(TrackerTest, RowsOfOtherJobsAndFinalStatesInSqueueAreHandled) {
  tracker.add({"1", t0});
  start_expecting_squeue(ids({"1"}));
  auto a = step(ev::SqueueDone{out("99|RUNNING|None\n1|COMPLETED|None\n")});
  EXPECT_TRUE(a.reports.empty());
  ASSERT_EQ(a.step, TrackerStep::sacct) << "a final state in squeue still needs sacct's exit code";
  EXPECT_EQ(a.slurm_ids, ids({"1"}));
}

TEST_F(TrackerTest, AnEventThatDoesNotAnswerTheLastActionIsABug) {
  tracker.add({"1", t0});
  EXPECT_THROW(step(ev::SqueueDone{out("")}), std::logic_error);
  step(ev::CycleStart{});
  EXPECT_THROW(step(ev::CycleStart{}), std::logic_error);
}

}  // namespace
