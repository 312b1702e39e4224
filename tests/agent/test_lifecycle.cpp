// The lifecycle and backoff state machines, stepped with a synthetic clock: no sockets, no signals, no sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "agent/backoff.hpp"
#include "agent/daemon.hpp"
#include "agent/lifecycle.hpp"

using namespace nymph::agent;
using namespace std::chrono_literals;

namespace {
const Clock::time_point t0{};

Lifecycle serving(LifecycleConfig c = {}) {
  Lifecycle l(c, t0);
  l.registered(t0);
  return l;
}
}  // namespace

TEST(Lifecycle, RegistersThenServes) {
  Lifecycle l({}, t0);
  EXPECT_EQ(l.phase(), Phase::registering);
  EXPECT_FALSE(l.accepting_jobs());
  l.registered(t0);
  EXPECT_EQ(l.phase(), Phase::serving);
  EXPECT_TRUE(l.accepting_jobs());
}

TEST(Lifecycle, SigtermDrainsThenExitsWhenProcessJobsAreDone) {
  auto l = serving({.drain_grace = 10s});
  auto a = l.on_signal(Signal::term, t0);
  EXPECT_FALSE(a.exit_now);
  EXPECT_FALSE(a.stop_agent_bound_jobs);
  EXPECT_EQ(l.phase(), Phase::draining);
  EXPECT_FALSE(l.accepting_jobs());
  EXPECT_EQ(l.exit_reason(), ExitReason::sigterm);
  EXPECT_FALSE(l.on_tick(1, 3, t0 + 5s).exit_now);
  // Slurm jobs (all_jobs > process_jobs) never hold a manager stop.
  EXPECT_TRUE(l.on_tick(0, 2, t0 + 6s).exit_now);
  EXPECT_EQ(l.phase(), Phase::exited);
  EXPECT_EQ(exit_status(*l.exit_reason()), 143);
}

TEST(Lifecycle, DrainGraceExpiryKillsProcessJobsOnce) {
  auto l = serving({.drain_grace = 10s});
  l.on_signal(Signal::interrupt, t0);
  EXPECT_EQ(l.exit_reason(), ExitReason::sigint);
  EXPECT_EQ(l.next_deadline(), t0 + 10s);
  EXPECT_FALSE(l.on_tick(2, 2, t0 + 9s).stop_agent_bound_jobs);
  EXPECT_TRUE(l.on_tick(2, 2, t0 + 10s).stop_agent_bound_jobs);
  EXPECT_FALSE(l.on_tick(1, 1, t0 + 11s).stop_agent_bound_jobs);
  EXPECT_EQ(l.next_deadline(), t0 + 25s);  // the hard kill of the default 30 s budget
  EXPECT_TRUE(l.on_tick(0, 0, t0 + 12s).exit_now);
}

TEST(Lifecycle, SecondSignalStopsAtOnce) {
  auto l = serving({.drain_grace = 60s});
  l.on_signal(Signal::term, t0);
  auto a = l.on_signal(Signal::term, t0 + 1s);
  EXPECT_TRUE(a.stop_agent_bound_jobs);
  EXPECT_EQ(l.exit_reason(), ExitReason::sigterm);
}

TEST(Lifecycle, SignalWhileRegisteringExitsImmediately) {
  Lifecycle l({}, t0);
  EXPECT_TRUE(l.on_signal(Signal::term, t0).exit_now);
  EXPECT_EQ(l.exit_reason(), ExitReason::sigterm);
}

TEST(Lifecycle, KillDirectiveIsKilled) {
  auto l = serving();
  l.on_directive(Directive::kill, t0);
  EXPECT_EQ(l.exit_reason(), ExitReason::killed);
  EXPECT_TRUE(l.on_tick(0, 0, t0).exit_now);
}

TEST(Lifecycle, DrainDirectiveWaitsForEveryJobWithoutKilling) {
  auto l = serving({.drain_grace = 1s});
  l.on_directive(Directive::drain, t0);
  EXPECT_FALSE(l.accepting_jobs());
  auto a = l.on_tick(0, 1, t0 + 1h);  // a Slurm job still running: keep tracking it, kill nothing
  EXPECT_FALSE(a.stop_agent_bound_jobs);
  EXPECT_FALSE(a.exit_now);
  EXPECT_TRUE(l.on_tick(0, 0, t0 + 2h).exit_now);
}

TEST(Lifecycle, FatalErrorExitsNow) {
  auto l = serving();
  auto a = l.on_fatal("control plane rejected the token (401)");
  EXPECT_TRUE(a.exit_now);
  EXPECT_EQ(l.exit_reason(), ExitReason::error);
  EXPECT_EQ(exit_status(ExitReason::error), 1);
  EXPECT_EQ(l.message(), "control plane rejected the token (401)");
}

TEST(Lifecycle, IdleExitCountsFromTheLastJob) {
  auto l = serving({.idle_exit = 30s});
  EXPECT_EQ(l.next_deadline(), t0 + 30s);
  EXPECT_FALSE(l.on_tick(0, 1, t0 + 20s).exit_now);  // busy
  EXPECT_FALSE(l.on_tick(0, 0, t0 + 40s).exit_now);  // idle from 40 s on
  EXPECT_EQ(l.next_deadline(), t0 + 70s);
  EXPECT_FALSE(l.on_tick(0, 0, t0 + 69s).exit_now);
  EXPECT_TRUE(l.on_tick(0, 0, t0 + 70s).exit_now);
  EXPECT_EQ(l.exit_reason(), ExitReason::idle);
  EXPECT_EQ(exit_status(ExitReason::idle), 0);
}

TEST(Lifecycle, NoIdleExitByDefault) {
  auto l = serving();
  EXPECT_FALSE(l.on_tick(0, 0, t0 + 1000h).exit_now);
  EXPECT_FALSE(l.next_deadline().has_value());
}

TEST(Lifecycle, WalltimeLeadDrainsAndSigusr1IsWalltime) {
  LifecycleConfig c{.drain_grace = 5s, .walltime_end = t0 + 1h, .walltime_lead = 2min};
  auto l = serving(c);
  EXPECT_EQ(l.next_deadline(), t0 + 58min);
  EXPECT_FALSE(l.on_tick(0, 0, t0 + 57min).exit_now);
  l.on_tick(1, 1, t0 + 58min);
  EXPECT_EQ(l.phase(), Phase::draining);
  EXPECT_EQ(l.exit_reason(), ExitReason::walltime);

  auto m = serving(c);
  m.on_signal(Signal::usr1, t0 + 10min);
  EXPECT_EQ(m.exit_reason(), ExitReason::walltime);
}

TEST(Lifecycle, SigtermAtWalltimeIsWalltimeOtherwiseSigterm) {
  LifecycleConfig c{.walltime_end = t0 + 1h, .walltime_lead = 2min};
  auto early = serving(c);
  early.on_signal(Signal::term, t0 + 10min);  // a scancel
  EXPECT_EQ(early.exit_reason(), ExitReason::sigterm);
  auto late = serving(c);
  late.on_signal(Signal::term, t0 + 59min);
  EXPECT_EQ(late.exit_reason(), ExitReason::walltime);
}

TEST(Lifecycle, JobsThatCannotFinishBeforeWalltimeAreRefused) {
  LifecycleConfig c{.walltime_end = t0 + 1h, .walltime_lead = 2min};
  auto l = serving(c);
  EXPECT_TRUE(l.fits_before_walltime(30min, t0));
  EXPECT_TRUE(l.fits_before_walltime(58min, t0)) << "exactly up to the lead";
  EXPECT_FALSE(l.fits_before_walltime(59min, t0));
  // A job without a timeout was placed here by the control plane (no worker serves longer): it may start until
  // the lead begins.
  EXPECT_TRUE(l.fits_before_walltime(std::nullopt, t0));
  EXPECT_TRUE(l.fits_before_walltime(std::nullopt, t0 + 57min));
  EXPECT_FALSE(l.fits_before_walltime(std::nullopt, t0 + 58min));
  EXPECT_TRUE(serving().fits_before_walltime(std::nullopt, t0));
}

TEST(Backoff, FullJitterWithinAGrowingCapUpToTheMaximum) {
  Backoff b({.initial = 500ms, .max = 60s}, 42);
  std::chrono::milliseconds expected_cap = 500ms;
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(b.current_cap(), std::min<std::chrono::milliseconds>(expected_cap, 60s)) << i;
    auto d = b.next_delay();
    EXPECT_GE(d, 0ms);
    EXPECT_LE(d, std::min<std::chrono::milliseconds>(expected_cap, 60s));
    expected_cap *= 2;
  }
  EXPECT_EQ(b.current_cap(), 60s);
  EXPECT_EQ(b.failures(), 12);
  b.reset();
  EXPECT_EQ(b.current_cap(), 500ms);
}

TEST(Backoff, DelaysAreJitteredNotFixed) {
  Backoff b({.initial = 60s, .max = 60s}, 7);
  std::set<long long> seen;
  for (int i = 0; i < 20; ++i) seen.insert(b.next_delay().count());
  EXPECT_GT(seen.size(), 15u);
}

TEST(Backoff, ManyFailuresDoNotOverflow) {
  Backoff b({.initial = 500ms, .max = 60s}, 1);
  for (int i = 0; i < 1000; ++i) EXPECT_LE(b.next_delay(), 60s);
}

TEST(Backoff, IsAFewBytesForItLivesInEveryAttemptsDelivery) {
  // Each attempt's delivery keeps a Backoff for the attempt's life: at ten thousand tracked Slurm jobs a
  // Mersenne twister's 2.5 KiB each would be 25 MB of the agent's memory.
  EXPECT_LE(sizeof(Backoff), 64u);
}

TEST(Backoff, UnseededBackoffsDrawDifferentJitter) {
  std::set<long long> seen;
  for (int agent = 0; agent < 20; ++agent) {
    Backoff b({.initial = 60s, .max = 60s});
    seen.insert(b.next_delay().count());
  }
  EXPECT_GT(seen.size(), 15u);
}

TEST(Backoff, DefaultsCapAtFiveSecondsWithFullJitterSoAnOutageEndsWithinSecondsSpreadAcrossAgents) {
  // A4: whatever the length of the outage, the wait after it is at most 5 s, drawn over all of [0, 5 s].
  Backoff::Config defaults;
  EXPECT_EQ(defaults.initial, 500ms);
  EXPECT_EQ(defaults.max, 5s);
  EXPECT_EQ(DaemonSettings{}.backoff_max, 5s);
  std::vector<long long> after_outage;
  for (std::uint64_t agent = 0; agent < 1000; ++agent) {
    Backoff b(defaults, agent);
    for (int failure = 0; failure < 40; ++failure) b.next_delay();  // a long outage
    EXPECT_EQ(b.current_cap(), 5s);
    after_outage.push_back(b.next_delay().count());
  }
  std::sort(after_outage.begin(), after_outage.end());
  EXPECT_LE(after_outage.back(), 5000);
  EXPECT_LT(after_outage[100], 1000);   // 10th percentile: early
  EXPECT_GT(after_outage[900], 4000);   // 90th percentile: late, i.e. spread, not a herd
  EXPECT_NEAR(after_outage[500], 2500, 500);
}

// A1: the stop budget, stepped. Budget 30 s, kill grace 10 s, drain_grace 60 s: /exit at once, SIGTERM at 15 s
// (kill grace before the hard kill), SIGKILL at 25 s (5 s kept for delivery), exit at 30 s whatever remains.
TEST(Lifecycle, StopBudgetCapsTheDrainGraceThenKillsThenExitsAtTheDeadline) {
  auto l = serving({.drain_grace = 60s, .stop_budget = 30s, .kill_grace = 10s});
  EXPECT_FALSE(l.worker_going_away());
  auto a = l.on_signal(Signal::term, t0);
  EXPECT_TRUE(a.report_exit);
  EXPECT_FALSE(a.stop_agent_bound_jobs);
  EXPECT_TRUE(l.worker_going_away());
  EXPECT_EQ(l.exit_deadline(), t0 + 30s);
  EXPECT_EQ(l.next_deadline(), t0 + 15s);
  EXPECT_FALSE(l.on_tick(2, 2, t0 + 14s).stop_agent_bound_jobs);
  a = l.on_tick(2, 2, t0 + 15s);
  EXPECT_TRUE(a.stop_agent_bound_jobs);
  EXPECT_FALSE(a.kill_agent_bound_jobs);
  EXPECT_EQ(l.next_deadline(), t0 + 25s);
  a = l.on_tick(1, 1, t0 + 25s);
  EXPECT_TRUE(a.kill_agent_bound_jobs);
  EXPECT_FALSE(a.exit_now);
  EXPECT_FALSE(l.on_tick(1, 1, t0 + 26s).kill_agent_bound_jobs);  // once
  EXPECT_EQ(l.next_deadline(), t0 + 30s);
  EXPECT_TRUE(l.on_tick(1, 1, t0 + 30s).exit_now);  // a job that would not die does not hold the exit
  EXPECT_EQ(l.phase(), Phase::exited);
}

TEST(Lifecycle, ABudgetShorterThanTheKillGraceStopsAtOnce) {
  auto l = serving({.drain_grace = 60s, .stop_budget = 3s, .kill_grace = 10s});
  auto a = l.on_signal(Signal::term, t0);
  EXPECT_TRUE(a.report_exit);
  EXPECT_TRUE(a.stop_agent_bound_jobs);
  EXPECT_EQ(delivery_reserve(3s), 1s);
  EXPECT_EQ(l.next_deadline(), t0 + 2s);
  EXPECT_TRUE(l.on_tick(1, 1, t0 + 2s).kill_agent_bound_jobs);
  EXPECT_TRUE(l.on_tick(0, 0, t0 + 2100ms).exit_now);
}

TEST(Lifecycle, AShortDrainGraceStillComesFirst) {
  auto l = serving({.drain_grace = 5s, .stop_budget = 30s, .kill_grace = 10s});
  l.on_signal(Signal::term, t0);
  EXPECT_EQ(l.next_deadline(), t0 + 5s);
  EXPECT_TRUE(l.on_tick(1, 1, t0 + 5s).stop_agent_bound_jobs);
}

TEST(Lifecycle, KillDirectiveAndWalltimeHaveTheBudgetADrainDirectiveDoesNot) {
  auto k = serving({.stop_budget = 20s});
  EXPECT_TRUE(k.on_directive(Directive::kill, t0).report_exit);
  EXPECT_EQ(k.exit_deadline(), t0 + 20s);

  auto w = serving({.walltime_end = t0 + 1h, .walltime_lead = 2min, .stop_budget = 20s});
  EXPECT_TRUE(w.on_tick(0, 0, t0 + 58min).report_exit);
  EXPECT_EQ(w.exit_deadline(), t0 + 58min + 20s);

  auto d = serving({.stop_budget = 20s});
  EXPECT_FALSE(d.on_directive(Directive::drain, t0).report_exit);
  EXPECT_FALSE(d.worker_going_away());
  EXPECT_FALSE(d.exit_deadline().has_value());
  // A signal during the drain starts the budget.
  auto a = d.on_signal(Signal::term, t0 + 1h);
  EXPECT_TRUE(a.report_exit);
  EXPECT_TRUE(a.stop_agent_bound_jobs);
  EXPECT_EQ(d.exit_deadline(), t0 + 1h + 20s);
}
