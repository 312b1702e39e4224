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
// Lines in the old short layouts (id|state|reason, id|state|code) padded to kSqueueJobFormat's eight fields and
// kSacctJobFormat's six, with nothing in the added ones (no exit code, times, cluster or name).
std::string pad(std::string text, const std::string& extra) {
  std::string r;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!line.empty()) r += line + extra + "\n";
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return r;
}
Result<CommandResult> squeue_out(std::string text) { return out(pad(std::move(text), "|||||")); }
Result<CommandResult> sacct_out(std::string text) { return out(pad(std::move(text), "|||")); }

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
  auto a = step(ev::SqueueDone{squeue_out("101|PENDING|Resources\n")});
  ASSERT_EQ(a.step, TrackerStep::cycle_done);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::pending);
  EXPECT_NE(a.reports[0].update.message.find("(Resources)"), std::string::npos);
  EXPECT_EQ(a.reports[0].update.slurm_job_id, "101");

  start_expecting_squeue(ids({"101"}));
  a = step(ev::SqueueDone{squeue_out("101|RUNNING|None\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::running);

  start_expecting_squeue(ids({"101"}));
  a = step(ev::SqueueDone{squeue_out("101|RUNNING|None\n")});
  EXPECT_TRUE(a.reports.empty()) << "an unchanged state is not reported again";

  start_expecting_squeue(ids({"101"}));
  a = step(ev::SqueueDone{squeue_out("")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  EXPECT_EQ(a.slurm_ids, ids({"101"}));
  a = step(ev::SacctDone{sacct_out("101|COMPLETED|0:0\n")});
  ASSERT_EQ(a.step, TrackerStep::cycle_done);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded);
  EXPECT_EQ(a.reports[0].update.exit_code, 0);
  EXPECT_TRUE(tracker.empty());
}

// The runner keeps no map from Slurm id to its attempt: each report hands back the record tracked with its job.
struct Record : TrackedRecord {
  explicit Record(int number) : n(number) {}
  int n;
};

TEST_F(TrackerTest, EachReportCarriesTheRecordTrackedWithItsJob) {
  Record first(1), second(2);
  tracker.add({"101", t0, "", "", &first});
  tracker.add({"102", t0, "", "", &second});
  EXPECT_EQ(tracker.record_of("102"), &second);
  EXPECT_EQ(tracker.record_of("103"), nullptr);
  start_expecting_squeue(ids({"101", "102"}));
  auto a = step(ev::SqueueDone{squeue_out("101|RUNNING|None\n102|COMPLETED|None\n")});
  ASSERT_EQ(a.reports.size(), 2u);
  for (const auto& r : a.reports) {
    ASSERT_NE(r.record, nullptr) << r.slurm_id;
    EXPECT_EQ(static_cast<Record*>(r.record)->n, r.slurm_id == "101" ? 1 : 2) << r.slurm_id;
  }
  EXPECT_EQ(tracker.record_of("102"), nullptr) << "finished: tracked no more";
}

TEST_F(TrackerTest, OneSqueueForAllJobsAndOneSacctForTheMissingOnes) {
  for (const char* id : {"1", "2", "3", "4"}) tracker.add({id, t0});
  start_expecting_squeue(ids({"1", "2", "3", "4"}));
  auto a = step(ev::SqueueDone{squeue_out("2|RUNNING|None\n4|PENDING|Priority\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  EXPECT_EQ(a.slurm_ids, ids({"1", "3"}));
  a = step(ev::SacctDone{sacct_out("1|FAILED|3:0\n3|CANCELLED by 0|0:15\n")});
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
  auto a = step(ev::SqueueDone{squeue_out("2|RUNNING|None\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].slurm_id, "2");
}

TEST_F(TrackerTest, ASinglePurgedIdThatSqueueRejectsGoesToSacct) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{failed(1, "slurm_load_jobs error: Invalid job id specified\n")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  a = step(ev::SacctDone{sacct_out("7|COMPLETED|0:0\n")});
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
  auto a = step(ev::SqueueDone{squeue_out("garbage without separators\n")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_FALSE(a.warnings.empty());
  EXPECT_TRUE(tracker.tracking("7"));
}

TEST_F(TrackerTest, ASlowSacctFallsBackToTheExitFileButNeverDeclaresLost) {
  tracker.add({"7", t0});
  for (int cycle = 0; cycle < 6; ++cycle) {
    start_expecting_squeue(ids({"7"}));
    auto a = step(ev::SqueueDone{squeue_out("")});
    ASSERT_EQ(a.step, TrackerStep::sacct);
    a = step(ev::SacctDone{timed_out()});
    ASSERT_EQ(a.step, TrackerStep::read_exit_files);
    a = step(ev::ExitFilesRead{{{"7", std::nullopt}}});
    EXPECT_EQ(a.step, TrackerStep::cycle_done);
    EXPECT_TRUE(a.reports.empty());
  }
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("")});
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
  auto a = step(ev::SqueueDone{squeue_out("8|RUNNING|None\n")});
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
  a = step(ev::SqueueDone{squeue_out("")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files) << "sacct is not asked again";
  a = step(ev::ExitFilesRead{{{"8", 3}}});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_EQ(a.reports[0].update.exit_code, 3);
}

TEST_F(TrackerTest, NeitherAccountingNorExitFileIsLostAfterSomeCyclesNeverSuccess) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("")});
  auto a = step(ev::SacctDone{failed(1, "sacct: error: Slurm accounting storage is disabled")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files);
  a = step(ev::ExitFilesRead{});
  EXPECT_TRUE(a.reports.empty());
  for (int cycle = 2; cycle <= 3; ++cycle) {
    start_expecting_squeue(ids({"7"}));
    a = step(ev::SqueueDone{squeue_out("")});
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
    step(ev::SqueueDone{squeue_out("")});
    a = step(ev::SacctDone{sacct_out("")});
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
  step(ev::SqueueDone{squeue_out("")});
  auto a = step(ev::SacctDone{sacct_out("7|RUNNING|0:0\n")});
  ASSERT_EQ(a.step, TrackerStep::read_exit_files);
  a = step(ev::ExitFilesRead{{{"7", 0}}});
  EXPECT_TRUE(a.reports.empty()) << "sacct will soon say TIMEOUT/CANCELLED/COMPLETED: wait for it";
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("")});
  a = step(ev::SacctDone{sacct_out("7|TIMEOUT|0:0\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_NE(a.reports[0].update.message.find("TIMEOUT"), std::string::npos);
}

TEST_F(TrackerTest, RequeueGoesBackToPendingWithoutAFinalState) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  EXPECT_EQ(step(ev::SqueueDone{squeue_out("7|RUNNING|None")}).reports.at(0).update.state, JobState::running);
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{squeue_out("7|REQUEUED|NodeFail")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::pending);
  EXPECT_NE(a.reports[0].update.message.find("NodeFail"), std::string::npos);
  start_expecting_squeue(ids({"7"}));
  a = step(ev::SqueueDone{squeue_out("7|PENDING|BeginTime")});
  EXPECT_EQ(a.reports.at(0).update.state, JobState::pending);
  start_expecting_squeue(ids({"7"}));
  EXPECT_EQ(step(ev::SqueueDone{squeue_out("7|RUNNING|None")}).reports.at(0).update.state, JobState::running);
  start_expecting_squeue(ids({"7"}));
  a = step(ev::SqueueDone{squeue_out("7|COMPLETING|None")});
  EXPECT_TRUE(a.reports.empty()) << "COMPLETING is still running";
  EXPECT_TRUE(tracker.tracking("7"));
}

TEST_F(TrackerTest, UserCancelIsScancelledAtTheNextCycleAndConfirmedLater) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("7|RUNNING|None")});
  tracker.request_cancel("7", CancelCause::user);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel);
  EXPECT_EQ(a.slurm_ids, ids({"7"}));
  a = step(ev::ScancelDone{out("")});
  ASSERT_EQ(a.step, TrackerStep::squeue);
  a = step(ev::SqueueDone{squeue_out("7|COMPLETING|None")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_TRUE(a.reports.empty());
  // Next cycle: no second scancel for a completing job; squeue no longer shows it; sacct confirms.
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("")});
  a = step(ev::SacctDone{sacct_out("7|CANCELLED by 1001|0:15\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::cancelled);
}

TEST_F(TrackerTest, ACancelledJobStillRunningIsScancelledAgain) {
  tracker.add({"7", t0});
  tracker.request_cancel("7", CancelCause::lease_lost);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel);
  step(ev::ScancelDone{out("")});
  step(ev::SqueueDone{squeue_out("7|RUNNING|None")});
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
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("7|RUNNING|None")});
  now = t0 + hours(25);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel);
  step(ev::ScancelDone{out("")});
  step(ev::SqueueDone{squeue_out("")});
  a = step(ev::SacctDone{sacct_out("7|CANCELLED by 1001|0:15\n")});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_NE(a.reports[0].update.message.find("running longer than max_poll_duration (1d)"), std::string::npos)
      << a.reports[0].update.message;
}

TEST_F(TrackerTest, MaxPollDurationGivesUpWhenSlurmNeverConfirms) {
  tracker.add({"7", t0});
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{squeue_out("7|RUNNING|None")});
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
  auto a = step(ev::SqueueDone{squeue_out("1|RUNNING|None")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done) << "no sacct for a job squeue was not asked about";
  start_expecting_squeue(ids({"1", "2"}));
}

TEST_F(TrackerTest, AJobRemovedDuringACycleGetsNoReport) {
  tracker.add({"1", t0});
  start_expecting_squeue(ids({"1"}));
  tracker.remove("1");
  auto a = step(ev::SqueueDone{squeue_out("")});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  EXPECT_TRUE(a.reports.empty());
  EXPECT_EQ(step(ev::CycleStart{}).step, TrackerStep::cycle_done) << "nothing tracked: no squeue at all";
}

TEST_F(TrackerTest, RowsOfOtherJobsAreIgnoredAndAFinalStateWithoutExitCodeGoesToSacct) {
  tracker.add({"1", t0});
  start_expecting_squeue(ids({"1"}));
  auto a = step(ev::SqueueDone{squeue_out("99|RUNNING|None\n1|FAILED|NonZeroExitCode\n")});
  EXPECT_TRUE(a.reports.empty());
  ASSERT_EQ(a.step, TrackerStep::sacct) << "a final state without squeue's exit code still needs sacct's";
  EXPECT_EQ(a.slurm_ids, ids({"1"}));
}

TEST_F(TrackerTest, AnEventThatDoesNotAnswerTheLastActionIsABug) {
  tracker.add({"1", t0});
  EXPECT_THROW(step(ev::SqueueDone{squeue_out("")}), std::logic_error);
  step(ev::CycleStart{});
  EXPECT_THROW(step(ev::CycleStart{}), std::logic_error);
}

}  // namespace

// ---- Issue 15: squeue's final states, identities (recycled ids), the queue and running bounds. ----
namespace {

using std::chrono::seconds;

std::int64_t epoch(WallClock::time_point t) {
  return std::chrono::duration_cast<seconds>(t.time_since_epoch()).count();
}

// One squeue line in kSqueueJobFormat.
std::string row(const std::string& id, const std::string& state, const std::string& reason, const std::string& wait,
                std::optional<WallClock::time_point> submit, std::optional<WallClock::time_point> start,
                const std::string& cluster, const std::string& name) {
  return id + "|" + state + "|" + reason + "|" + wait + "|" + (submit ? std::to_string(epoch(*submit)) : "N/A") + "|" +
         (start ? std::to_string(epoch(*start)) : "N/A") + "|" + cluster + "|" + name + "\n";
}

// One sacct line in kSacctJobFormat.
std::string acct(const std::string& id, const std::string& state, const std::string& code,
                 std::optional<WallClock::time_point> submit, const std::string& cluster, const std::string& name) {
  return id + "|" + state + "|" + code + "|" + (submit ? std::to_string(epoch(*submit)) : "Unknown") + "|" + cluster +
         "|" + name + "\n";
}

struct IdentityTest : TrackerTest {
  // Submitted just after t0 (the lower bound), on cluster "lab", as "nymph-a".
  TrackedJob job(std::string id = "7") { return {std::move(id), t0, "nymph-a", "lab"}; }
  WallClock::time_point submit = t0 + seconds(1);
};

TEST_F(IdentityTest, AFinalStateInSqueueSettlesTheJobWithSqueuesExitCode) {
  for (const char* id : {"1", "2", "3", "4", "5"}) tracker.add(job(id));
  start_expecting_squeue(ids({"1", "2", "3", "4", "5"}));
  auto a = step(ev::SqueueDone{out(row("1", "COMPLETED", "None", "0", submit, t0 + seconds(2), "lab", "nymph-a") +
                                   row("2", "FAILED", "NonZeroExitCode", "768", submit, t0, "lab", "nymph-a") +
                                   row("3", "CANCELLED", "None", "15", submit, t0, "lab", "nymph-a") +
                                   row("4", "OUT_OF_MEMORY", "OutOfMemory", "9", submit, t0, "lab", "nymph-a") +
                                   row("5", "COMPLETED", "None", "", submit, t0, "lab", "nymph-a"))});
  EXPECT_EQ(a.step, TrackerStep::cycle_done) << "no sacct, no exit-status file: squeue said it all";
  ASSERT_EQ(a.reports.size(), 5u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded);
  EXPECT_EQ(a.reports[0].update.exit_code, 0);
  EXPECT_EQ(a.reports[1].update.state, JobState::failed);
  EXPECT_EQ(a.reports[1].update.exit_code, 3) << "the raw wait status 768 is exit 3";
  EXPECT_EQ(a.reports[2].update.state, JobState::failed) << "cancelled by someone else: the job's failure";
  EXPECT_EQ(a.reports[2].update.signal, 15);
  EXPECT_EQ(a.reports[3].update.state, JobState::failed);
  EXPECT_NE(a.reports[3].update.message.find("OUT_OF_MEMORY"), std::string::npos);
  EXPECT_EQ(a.reports[4].update.state, JobState::succeeded) << "COMPLETED means exit 0 even without the code";
  EXPECT_TRUE(tracker.empty());
}

TEST_F(IdentityTest, WithoutAccountingACompletedJobSeenInSqueueSucceedsInsteadOfBeingLost) {
  // A first job tells the tracker that accounting is disabled; the second finishes while squeue still has it.
  tracker.add(job("1"));
  tracker.add(job("2"));
  start_expecting_squeue(ids({"1", "2"}));
  auto a = step(ev::SqueueDone{out(row("2", "RUNNING", "None", "0", submit, t0, "lab", "nymph-a"))});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  step(ev::SacctDone{failed(1, "sacct: error: Slurm accounting storage is disabled")});
  step(ev::ExitFilesRead{{{"1", 0}}});
  ASSERT_TRUE(tracker.accounting_disabled());
  start_expecting_squeue(ids({"2"}));
  a = step(ev::SqueueDone{out(row("2", "COMPLETED", "None", "0", submit, t0, "lab", "nymph-a"))});
  EXPECT_EQ(a.step, TrackerStep::cycle_done);
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded) << a.reports[0].update.message;
}

TEST_F(IdentityTest, UserCancelConfirmedBySqueuesCancelledState) {
  tracker.add(job());
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, t0, "lab", "nymph-a"))});
  tracker.request_cancel("7", CancelCause::user);
  ASSERT_EQ(step(ev::CycleStart{}).step, TrackerStep::scancel);
  step(ev::ScancelDone{out("")});
  auto a = step(ev::SqueueDone{out(row("7", "CANCELLED", "None", "15", submit, t0, "lab", "nymph-a"))});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::cancelled);
}

TEST_F(IdentityTest, ARecycledIdInSqueueIsNotOurs) {
  tracker.add(job());
  start_expecting_squeue(ids({"7"}));
  // Another job now holds id 7: by name, by cluster, or submitted before ours (beyond the margin).
  for (const auto& text : {row("7", "COMPLETED", "None", "0", submit, t0, "lab", "someone-elses"),
                    row("7", "COMPLETED", "None", "0", submit, t0, "other", "nymph-a"),
                    row("7", "COMPLETED", "None", "0", t0 - kSubmitTimeMargin - seconds(1), t0, "lab", "nymph-a")}) {
    auto a = step(ev::SqueueDone{out(text)});
    EXPECT_TRUE(a.reports.empty()) << text;
    ASSERT_EQ(a.step, TrackerStep::sacct) << "ours is missing from squeue: " << text;
    step(ev::SacctDone{out(acct("7", "RUNNING", "0:0", submit, "lab", "nymph-a"))});
    step(ev::ExitFilesRead{});
    start_expecting_squeue(ids({"7"}));
    step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, t0, "lab", "nymph-a"))});
    start_expecting_squeue(ids({"7"}));
  }
  EXPECT_TRUE(tracker.tracking("7"));
}

TEST_F(IdentityTest, SacctIsBoundedByTheSubmitTimeAndARecycledIdsRecordIsIgnored) {
  tracker.add(job("7"));
  tracker.add({"8", t0 + hours(1), "nymph-b", "lab"});
  now = t0 + hours(2);
  start_expecting_squeue(ids({"7", "8"}));
  auto a = step(ev::SqueueDone{out("")});
  ASSERT_EQ(a.step, TrackerStep::sacct);
  EXPECT_EQ(a.sacct_since, t0 - kSubmitTimeMargin) << "the earliest lower bound, less the margin";
  // Id 7's old record belongs to another job (other name); id 8's to an older job of the same name submitted
  // long before ours. Neither is taken for ours: no final state, so they wait (and end lost, never failed).
  a = step(ev::SacctDone{out(acct("7", "FAILED", "1:0", t0 - hours(30), "lab", "someone-elses") +
                             acct("8", "FAILED", "2:0", t0 - hours(3), "lab", "nymph-b"))});
  EXPECT_TRUE(a.reports.empty());
  ASSERT_EQ(a.step, TrackerStep::read_exit_files);
  for (int cycle = 2; cycle <= 3; ++cycle) {
    step(ev::ExitFilesRead{});
    start_expecting_squeue(ids({"7", "8"}));
    step(ev::SqueueDone{out("")});
    a = step(ev::SacctDone{out(acct("7", "FAILED", "1:0", t0 - hours(30), "lab", "someone-elses"))});
  }
  a = step(ev::ExitFilesRead{});
  ASSERT_EQ(a.reports.size(), 2u);
  for (const auto& r : a.reports) EXPECT_EQ(r.update.state, JobState::lost) << r.update.message;
}

TEST_F(IdentityTest, OfSeveralRecordsUnderOurIdTheMatchingOneCounts) {
  tracker.add(job());
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out("")});
  auto a = step(ev::SacctDone{out(acct("7", "FAILED", "1:0", t0 - hours(30), "lab", "someone-elses") +
                                  acct("7", "COMPLETED", "0:0", submit, "lab", "nymph-a") +
                                  acct("7", "NODE_FAIL", "0:0", submit, "lab", "not-ours"))});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded) << a.reports[0].update.message;
}

TEST_F(IdentityTest, UnknownNameClusterOrTimesAreNotChecked) {
  tracker.add({"7", t0, "", ""});  // a journal entry of an older layout may lack them
  start_expecting_squeue(ids({"7"}));
  auto a = step(ev::SqueueDone{out(row("7", "COMPLETED", "None", "0", std::nullopt, std::nullopt, "x", "y"))});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::succeeded);
}

TEST_F(IdentityTest, QueueTimeHasItsOwnBoundAndEndsFailed) {
  tracker = Tracker{TrackerConfig{hours(24), minutes(5), 3, hours(24 * 7)}};
  tracker.add(job());
  now = t0 + hours(24 * 7) - minutes(1);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "PENDING", "Priority", "0", submit, std::nullopt, "lab", "nymph-a"))});
  now = t0 + hours(24 * 7) + minutes(1);
  auto a = step(ev::CycleStart{});
  ASSERT_EQ(a.step, TrackerStep::scancel) << "pending longer than max_queue_duration";
  EXPECT_EQ(a.slurm_ids, ids({"7"}));
  step(ev::ScancelDone{out("")});
  a = step(ev::SqueueDone{out(row("7", "CANCELLED", "None", "0", submit, std::nullopt, "lab", "nymph-a"))});
  ASSERT_EQ(a.reports.size(), 1u);
  EXPECT_EQ(a.reports[0].update.state, JobState::failed);
  EXPECT_NE(a.reports[0].update.message.find("queued longer than max_queue_duration (7d)"), std::string::npos)
      << a.reports[0].update.message;
}

TEST_F(IdentityTest, RunningTimeCountsFromSlurmsStartNotFromSubmission) {
  tracker.add(job());
  // Queued 23 h, then started: at submission + 25 h it has run 2 h and is left alone.
  now = t0 + hours(23);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, t0 + hours(23), "lab", "nymph-a"))});
  now = t0 + hours(25);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, t0 + hours(23), "lab", "nymph-a"))});
  now = t0 + hours(23) + hours(24) - minutes(1);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, t0 + hours(23), "lab", "nymph-a"))});
  now = t0 + hours(23) + hours(24) + minutes(1);
  auto a = step(ev::CycleStart{});
  EXPECT_EQ(a.step, TrackerStep::scancel) << "24 h after Slurm started it";
}

TEST_F(IdentityTest, AResumedJobsRunningTimeCountsFromSqueuesStartTime) {
  tracker.add(job());
  now = t0 + hours(30);
  start_expecting_squeue(ids({"7"}));
  // First seen now, but squeue says it started 20 h ago (the manager was restarted meanwhile).
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, now - hours(20), "lab", "nymph-a"))});
  now += hours(3);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, now - hours(23), "lab", "nymph-a"))});
  now += hours(1) + minutes(1);
  EXPECT_EQ(step(ev::CycleStart{}).step, TrackerStep::scancel);
}

TEST_F(IdentityTest, WithoutAStartTimeTheFirstCycleSeeingItRunningCounts) {
  tracker.add(job());
  now = t0 + hours(30);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, std::nullopt, "lab", "nymph-a"))});
  now += hours(23);
  start_expecting_squeue(ids({"7"}));
  step(ev::SqueueDone{out(row("7", "RUNNING", "None", "0", submit, std::nullopt, "lab", "nymph-a"))});
  now += hours(1) + minutes(1);
  EXPECT_EQ(step(ev::CycleStart{}).step, TrackerStep::scancel);
}

}  // namespace
