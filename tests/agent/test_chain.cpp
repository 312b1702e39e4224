// A kept launch's chain: when a generation submits its successor (SuccessorPolicy, stepped without Slurm or
// timers) and the chain record (chain.json) on a real directory, with writers in several processes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>

#include "agent/chain_record.hpp"
#include "agent/successor_policy.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::agent;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const Clock::time_point t0 = Clock::time_point() + 1000h;

SuccessorConfig config() {
  return SuccessorConfig{.min_generations = 1,
                         .max_generations = 0,
                         .idle_end = 30min,
                         .floor = 5min,
                         .ceiling = 1h,
                         .backoff = {1min, 5min, 15min, 60min},
                         .pause_after = 4};
}

}  // namespace

TEST(SuccessorPolicy, TheSuccessorIsDueTwiceTheLongestRecentQueueWaitBeforeTheServingEnd) {
  // No measured wait: the floor.
  SuccessorPolicy first(config(), 1, t0, t0 + 2h, {});
  EXPECT_EQ(first.submit_at(), t0 + 2h - 5min);
  // The longest of the last three waits (the 40-minute one is older than that), doubled: 2 x 10 min.
  SuccessorPolicy later(config(), 5, t0, t0 + 2h, {40min, 10min, 1min, 3min});
  EXPECT_EQ(later.submission_lead(), 20min);
  // Never more than the ceiling.
  SuccessorPolicy slow(config(), 2, t0, t0 + 3h, {50min});
  EXPECT_EQ(slow.submission_lead(), 1h);
  // Never before half of the generation's serving time: at most two generations overlap.
  SuccessorPolicy short_allocation(config(), 2, t0, t0 + 4min, {});
  EXPECT_EQ(short_allocation.submission_lead(), 2min);
  EXPECT_EQ(short_allocation.submit_at(), t0 + 2min);
}

TEST(SuccessorPolicy, WaitsUntilItIsDueThenSubmitsOnce) {
  SuccessorPolicy p(config(), 1, t0, t0 + 1h, {});
  EXPECT_EQ(p.advance(t0, std::nullopt, false), ChainPhase::waiting);
  EXPECT_EQ(p.next_deadline(), t0 + 55min);
  EXPECT_EQ(p.advance(t0 + 54min, std::nullopt, false), ChainPhase::waiting);
  EXPECT_EQ(p.advance(t0 + 55min, std::nullopt, false), ChainPhase::due);
  EXPECT_EQ(p.next_deadline(), std::nullopt);
  p.submission_succeeded();
  EXPECT_EQ(p.phase(), ChainPhase::submitted);
  EXPECT_EQ(p.advance(t0 + 56min, t0, true), ChainPhase::submitted) << "a later stop does not undo a submission";
}

TEST(SuccessorPolicy, AWorkerThatDrainsForItsWalltimeBeforeTheDueTimeSubmitsAtOnce) {
  SuccessorPolicy p(config(), 1, t0, t0 + 1h, {});
  EXPECT_EQ(p.advance(t0 + 10min, std::nullopt, false, /*draining_for_walltime=*/true), ChainPhase::due);
}

TEST(SuccessorPolicy, FailedSubmissionsBackOffThenPauseTheChain) {
  SuccessorPolicy p(config(), 1, t0, t0 + 1h, {});
  auto now = t0 + 55min;
  ASSERT_EQ(p.advance(now, std::nullopt, false), ChainPhase::due);
  std::vector<std::chrono::minutes> waits;
  for (int i = 0; i < 3; ++i) {
    p.submission_failed(now, "sbatch: error: Batch job submission failed: Partition in drain state");
    ASSERT_EQ(p.phase(), ChainPhase::retrying);
    waits.push_back(std::chrono::duration_cast<std::chrono::minutes>(p.retry_at() - now));
    EXPECT_EQ(p.advance(p.retry_at() - 1s, std::nullopt, false), ChainPhase::retrying);
    now = p.retry_at();
    ASSERT_EQ(p.advance(now, std::nullopt, false), ChainPhase::due);
  }
  EXPECT_EQ(waits, (std::vector<std::chrono::minutes>{1min, 5min, 15min}));
  p.submission_failed(now, "Partition in drain state");
  EXPECT_EQ(p.phase(), ChainPhase::paused);
  EXPECT_EQ(p.failures(), 4);
  EXPECT_NE(p.reason().find("4 times in a row: Partition in drain state"), std::string::npos) << p.reason();
  EXPECT_EQ(p.advance(now + 2h, std::nullopt, false), ChainPhase::paused);
  EXPECT_EQ(p.next_deadline(), std::nullopt);
}

TEST(SuccessorPolicy, ASuccessAfterAFailureClearsTheCount) {
  SuccessorPolicy p(config(), 1, t0, t0 + 1h, {});
  ASSERT_EQ(p.advance(t0 + 55min, std::nullopt, false), ChainPhase::due);
  p.submission_failed(t0 + 55min, "Socket timed out");
  ASSERT_EQ(p.advance(t0 + 56min, std::nullopt, false), ChainPhase::due);
  p.submission_succeeded();
  EXPECT_EQ(p.phase(), ChainPhase::submitted);
  EXPECT_EQ(p.failures(), 0);
  EXPECT_EQ(p.reason(), "");
}

TEST(SuccessorPolicy, TheLastGenerationOfMaxGenerationsSubmitsNothing) {
  auto c = config();
  c.max_generations = 3;
  EXPECT_EQ(SuccessorPolicy(c, 2, t0, t0 + 1h, {}).phase(), ChainPhase::waiting);
  SuccessorPolicy last(c, 3, t0, t0 + 1h, {});
  EXPECT_EQ(last.phase(), ChainPhase::ended);
  EXPECT_EQ(last.advance(t0 + 59min, std::nullopt, false), ChainPhase::ended);
  EXPECT_NE(last.reason().find("max_generations = 3"), std::string::npos) << last.reason();
}

TEST(SuccessorPolicy, AnIdleWorkerPastMinGenerationsEndsTheChainAtTheDueTime) {
  auto c = config();
  c.min_generations = 2;
  // Generation 1 is within min_generations: idle or not, it renews.
  SuccessorPolicy young(c, 1, t0, t0 + 1h, {});
  EXPECT_EQ(young.advance(t0 + 55min, t0, false), ChainPhase::due);
  // Generation 2, idle for 55 minutes at the due time: the chain ends.
  SuccessorPolicy idle(c, 2, t0, t0 + 1h, {});
  EXPECT_EQ(idle.advance(t0 + 55min, t0, false), ChainPhase::ended);
  EXPECT_NE(idle.reason().find("idle_end"), std::string::npos);
  // Generation 2, idle only for 20 minutes (under idle_end), or busy: it renews.
  SuccessorPolicy recent(c, 2, t0, t0 + 1h, {});
  EXPECT_EQ(recent.advance(t0 + 55min, t0 + 35min, false), ChainPhase::due);
  SuccessorPolicy busy(c, 2, t0, t0 + 1h, {});
  EXPECT_EQ(busy.advance(t0 + 55min, std::nullopt, false), ChainPhase::due);
}

TEST(SuccessorPolicy, AStoppedLaunchSubmitsNothing) {
  SuccessorPolicy p(config(), 1, t0, t0 + 1h, {});
  EXPECT_EQ(p.advance(t0 + 10min, std::nullopt, true), ChainPhase::ended);
  EXPECT_EQ(p.reason(), "the launch was stopped");
  SuccessorPolicy due(config(), 1, t0, t0 + 1h, {});
  ASSERT_EQ(due.advance(t0 + 55min, std::nullopt, false), ChainPhase::due);
  EXPECT_EQ(due.advance(t0 + 55min, std::nullopt, true), ChainPhase::ended) << "stopped before the submission ran";
}

TEST(SuccessorPolicy, AGenerationWithoutSbatchHandsTheChainToTheManager) {
  SuccessorPolicy p(config(), 1, t0, t0 + 1h, {});
  p.hand_over("no sbatch on node7");
  EXPECT_EQ(p.phase(), ChainPhase::manager);
  EXPECT_EQ(p.advance(t0 + 59min, std::nullopt, false, true), ChainPhase::manager) << "it never becomes due here";
  EXPECT_EQ(p.next_deadline(), std::nullopt);
  EXPECT_EQ(p.reason(), "no sbatch on node7");
  auto c = config();
  c.max_generations = 1;
  SuccessorPolicy last(c, 1, t0, t0 + 1h, {});
  last.hand_over("x");
  EXPECT_EQ(last.phase(), ChainPhase::ended) << "the last generation has no successor to hand over";
}

TEST(ChainRecord, RoundTripsAndMeasuresQueueWaits) {
  ChainRecord r;
  r.at(2) = {.generation = 2, .slurm_job_id = "12", .submitted_at_ms = 10'000, .started_at_ms = 25'500};
  r.at(1) = {.generation = 1,
             .slurm_job_id = "11",
             .submitted_at_ms = 0,
             .started_at_ms = 3'000,
             .ended_at_ms = 90'000,
             .exit_reason = "walltime"};
  r.at(3).submitted_at_ms = 80'000;
  r.at(2).serving_end_ms = 95'000;
  r.at(2).submitted_by = "manager";
  r.submitter = "manager";
  r.state = "paused";
  r.reason = "why";
  r.failures = 4;
  auto back = chain_record_from_json(to_json(r));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->generations.size(), 3u);
  EXPECT_EQ(back->generations[0].generation, 1);
  EXPECT_EQ(back->generations[0].exit_reason, "walltime");
  EXPECT_EQ(back->generations[1].slurm_job_id, "12");
  EXPECT_EQ(back->generations[1].serving_end_ms, 95'000);
  EXPECT_EQ(back->generations[1].submitted_by, "manager");
  EXPECT_EQ(back->submitter, "manager");
  EXPECT_EQ(back->generations[2].started_at_ms, std::nullopt);
  EXPECT_EQ(back->state, "paused");
  EXPECT_EQ(back->failures, 4);
  EXPECT_EQ(back->queue_waits(), (std::vector<std::chrono::seconds>{3s, 15s}));
  EXPECT_FALSE(chain_record_from_json(boost::json::parse(R"({"generations":[],"state":"odd"})")));
  EXPECT_FALSE(chain_record_from_json(boost::json::parse(R"({"generations":[],"state":"ended","submitter":"x"})")));
  EXPECT_FALSE(chain_record_from_json(boost::json::parse(R"({"generations":[{"generation":0}],"state":"ended"})")));
}

// Writers in separate processes (generations and `nymph kill` are processes) each add their own entry under the
// lock: none is lost, and the file is private.
TEST(ChainRecord, ConcurrentWritersInOtherProcessesLoseNoUpdate) {
  nymph::test::TempDir dir("nymph-chain");
  EXPECT_FALSE(read_chain_record(dir.path()).value().has_value());
  constexpr int kWriters = 8, kEach = 25;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kEach; ++i)
        if (!update_chain_record(dir.path(), [&](ChainRecord& r) { r.at(w * kEach + i + 1).slurm_job_id = "j"; }))
          ::_exit(1);
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto r = read_chain_record(dir.path()).value();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->generations.size(), static_cast<std::size_t>(kWriters * kEach));
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / kChainFile).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}
