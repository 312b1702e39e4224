// The Slurm runner's pacing, stepped with made-up times: an adaptive cycle that backs off while nothing moves,
// a backoff with jitter while slurmctld fails, and an RPC budget that no 60 s window exceeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "runners/slurm/poll_pacer.hpp"

using namespace nymph::runners::slurm;
using namespace std::chrono_literals;

namespace {

PollPacerConfig no_jitter(int budget = 60) {
  return {.quick = 10s, .ceiling = 60s, .jitter = 0, .rpc_budget_per_minute = budget, .seed = 1};
}

const PacerClock::time_point t0 = PacerClock::time_point{} + 1000h;

}  // namespace

TEST(PollPacer, QuietCyclesDoubleTheWaitUpToTheCeilingAndAChangeMakesItQuickAgain) {
  PollPacer p(no_jitter());
  EXPECT_EQ(p.next_cycle(), PacerClock::time_point::max());  // nothing to look at before a submission
  auto now = t0;
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 5; ++i) {
    p.cycle_done(now, CycleOutcome::quiet);
    waits.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(p.next_cycle() - now));
    now = p.next_cycle();
  }
  EXPECT_EQ(waits, (std::vector<std::chrono::milliseconds>{20s, 40s, 60s, 60s, 60s}));
  p.cycle_done(now, CycleOutcome::changed);
  EXPECT_EQ(p.next_cycle() - now, 10s);
}

TEST(PollPacer, ASubmissionBringsTheNextCycleForwardButNeverPushesItBack) {
  PollPacer p(no_jitter());
  for (int i = 0; i < 4; ++i) p.cycle_done(t0, CycleOutcome::quiet);
  EXPECT_EQ(p.next_cycle() - t0, 60s);
  p.hurry(t0 + 5s);
  EXPECT_EQ(p.next_cycle() - t0, 15s);
  p.hurry(t0 + 8s);  // a later submission does not delay the cycle already due sooner
  EXPECT_EQ(p.next_cycle() - t0, 15s);
  p.cycle_done(t0 + 15s, CycleOutcome::quiet);  // the wait starts again from quick, not from the ceiling
  EXPECT_EQ(p.next_cycle() - (t0 + 15s), 20s);
}

TEST(PollPacer, AJobsExpectedEndIsLookedAtSoonAfter) {
  PollPacer p(no_jitter());
  for (int i = 0; i < 4; ++i) p.cycle_done(t0, CycleOutcome::quiet);
  p.cycle_done(t0, CycleOutcome::quiet, {}, 30s);
  EXPECT_EQ(p.next_cycle() - t0, 35s);  // the end plus half the quick interval, not the 60 s ceiling
  p.cycle_done(t0, CycleOutcome::quiet, {}, 2h);
  EXPECT_EQ(p.next_cycle() - t0, 60s);
}

TEST(PollPacer, ControllerTroubleBacksOffWithJitterAndSaysWhyUntilACycleSucceeds) {
  PollPacerConfig c = no_jitter();
  c.seed = 7;
  PollPacer p(c);
  auto now = t0;
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 8; ++i) {
    p.cycle_done(now, CycleOutcome::controller_trouble, "squeue: Rate limit exceeded");
    waits.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(p.next_cycle() - now));
    now = p.next_cycle();
  }
  EXPECT_EQ(p.failures(), 8);  // (a ninth below)
  EXPECT_EQ(p.trouble(), "squeue: Rate limit exceeded");
  for (std::size_t i = 0; i < waits.size(); ++i) {
    auto full = std::min<std::chrono::milliseconds>(10s * (1 << i), kMaxControllerBackoff);
    EXPECT_GE(waits[i], full / 2) << i;
    EXPECT_LE(waits[i], full) << i;
  }
  EXPECT_NE(waits[6], waits[7]);  // both capped at 5 min, jittered apart
  p.cycle_done(now, CycleOutcome::controller_trouble, "squeue: Rate limit exceeded");
  auto due = p.next_cycle();
  ASSERT_GT(due, now + 2min);
  p.hurry(now);  // a submission does not cut a backoff short
  EXPECT_EQ(p.next_cycle(), due);
  p.cycle_done(now, CycleOutcome::quiet);
  EXPECT_EQ(p.failures(), 0);
  EXPECT_EQ(p.trouble(), "");
  EXPECT_EQ(p.next_cycle() - now, 20s);  // the hurry above restarted the quiet waits from quick
}

TEST(PollPacer, TwoPacersWithDifferentSeedsComeBackAtDifferentTimes) {
  PollPacerConfig a = no_jitter(), b = no_jitter();
  a.seed = 1;
  b.seed = 2;
  PollPacer pa(a), pb(b);
  for (int i = 0; i < 3; ++i) {
    pa.cycle_done(t0, CycleOutcome::controller_trouble, "x");
    pb.cycle_done(t0, CycleOutcome::controller_trouble, "x");
  }
  EXPECT_NE(pa.next_cycle(), pb.next_cycle());
}

TEST(PollPacer, HalfTheBudgetGoesAtOnceAndTheRestFollowsAtAStep) {
  PollPacer p(no_jitter(6));  // a bucket of 3, refilled by one every 20 s
  auto now = t0;
  EXPECT_EQ(p.rpc_delay(now, 3), 0ms);
  p.spend(now, 3);
  EXPECT_EQ(p.rpc_delay(now, 1), 20s) << "the bucket is empty: the next call waits for one token, not the window";
  now += 20s;
  EXPECT_EQ(p.rpc_delay(now, 1), 0ms);
  p.spend(now, 1);
  EXPECT_EQ(p.rpc_delay(now, 2), 40s);
  // A call larger than the bucket waits for it to be full, and leaves it in debt.
  now += 60s;
  EXPECT_EQ(p.rpc_delay(now, 5), 0ms);
  p.spend(now, 5);
  EXPECT_EQ(p.rpc_delay(now, 1), 60s) << "two in debt and one wanted: three tokens";
  // A call of thousands (a scancel of many ids) leaves a debt of one bucket at most, not hours of silence.
  now += 60s;
  p.spend(now, 5000);
  EXPECT_EQ(p.rpc_delay(now, 1), 80s);
}

TEST(PollPacer, NoSixtySecondWindowHoldsMoreRpcsThanTheBudget) {
  // Calls of 1 to 9 RPCs (some larger than the bucket of 3, one larger than the budget), each made as soon as
  // rpc_delay lets it, then at random later times: every window of 60 s holds at most 6.
  PollPacer p(no_jitter(6));
  std::mt19937 random(7);
  std::vector<PacerClock::time_point> made;
  PacerClock::time_point larger_than_budget_at{};
  auto now = t0;
  for (int i = 0; i < 400; ++i) {
    const int rpcs = i == 200 ? 9 : std::uniform_int_distribution<int>(1, i % 3 == 0 ? 5 : 2)(random);
    now += p.rpc_delay(now, rpcs);
    p.spend(now, rpcs);
    if (rpcs > 6) larger_than_budget_at = now;
    for (int k = 0; k < rpcs; ++k) made.push_back(now);
    now += std::chrono::milliseconds(std::uniform_int_distribution<int>(0, i % 2 == 0 ? 0 : 30'000)(random));
  }
  for (std::size_t first = 0; first < made.size(); ++first) {
    const auto in_window = std::upper_bound(made.begin(), made.end(), made[first] + 60s - 1ns) - made.begin();
    // The one call of 9 (more than the budget) goes alone into an empty window, as documented.
    EXPECT_LE(in_window - static_cast<long>(first), made[first] == larger_than_budget_at ? 9 : 6) << "RPC " << first;
  }
  EXPECT_EQ(p.rpcs_in_window(now + 60s), 0);
}

TEST(PollPacer, ABurstOfSubmissionsNeverWaitsForTheWindowToEmpty) {
  // 1 000 jobs arrive 2.5 ms apart (a client submitting as fast as it can); one submitter takes everything that
  // waits into one sbatch of 25 ms when the budget lets it. With the window alone it spent the default budget of 60
  // on the first 600 jobs in 1.5 s and the rest waited a minute.
  PollPacer p(no_jitter(60));
  constexpr int kJobs = 1000;
  const auto arrival = [](int i) { return t0 + i * 2500us; };
  int arrived = 0, taken = 0, sbatches = 0;
  auto now = t0;
  const auto arrive_until = [&](PacerClock::time_point t) {
    while (arrived < kJobs && arrival(arrived) <= t) ++arrived;
  };
  while (taken < kJobs) {
    arrive_until(now);
    if (arrived == taken) {
      now = arrival(arrived);
      continue;
    }
    now += p.rpc_delay(now, 1);
    arrive_until(now);
    p.spend(now, 1);
    taken = arrived;
    ++sbatches;
    now += 25ms;
  }
  EXPECT_LE(now - t0, 5s) << "the last jobs waited for the window: " << sbatches << " sbatch calls";
  EXPECT_LE(sbatches, 35);
}

TEST(PollPacer, TheJitterStaysWithinItsBounds) {
  PollPacerConfig c = no_jitter();
  c.jitter = 0.2;
  PollPacer p(c);
  for (int i = 0; i < 200; ++i) {
    p.cycle_done(t0, CycleOutcome::changed);
    EXPECT_GE(p.next_cycle() - t0, 8s);
    EXPECT_LE(p.next_cycle() - t0, 12s);
  }
}

TEST(ControllerTrouble, TheMessagesOfASickOrRateLimitingSlurmctld) {
  for (const char* s : {"squeue: error: Rate limit exceeded, please try again later",
                        "slurm_load_jobs error: Socket timed out on send/recv operation",
                        "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
                        "squeue did not finish within 30s", "scancel: error: Kill job error on job id 12: Socket timed out"})
    EXPECT_TRUE(is_controller_trouble(s)) << s;
  for (const char* s : {"sbatch: error: invalid partition specified: nope", "slurm_load_jobs error: Invalid job id specified",
                        "scancel: error: Kill job error on job id 12: Job/step already completing or completed"})
    EXPECT_FALSE(is_controller_trouble(s)) << s;
}
