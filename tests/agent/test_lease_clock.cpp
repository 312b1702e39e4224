// The agent's side of the lease (D4), stepped with a synthetic clock: no sockets, no sleeps.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "agent/lease_clock.hpp"
#include "allocation_counter.hpp"

using namespace nymph::agent;
using namespace std::chrono_literals;

namespace {
const Clock::time_point t0{};
}

TEST(LeaseClock, MarginIsFiveSecondsOrASixthOfTheTtl) {
  EXPECT_EQ(LeaseClock::margin(90s), 15s);
  EXPECT_EQ(LeaseClock::window(90s), 75s);
  EXPECT_EQ(LeaseClock::margin(12s), 5s);
  EXPECT_EQ(LeaseClock::window(12s), 7s);
  EXPECT_EQ(LeaseClock::window(30min), 25min);
  EXPECT_EQ(LeaseClock::window(3s), 0s);
}

TEST(LeaseClock, AnAttemptNotRenewedForTtlMinusMarginExpiresOnce) {
  LeaseClock c;
  c.track("j1", 90s, t0);
  EXPECT_EQ(c.next_expiry(), t0 + 75s);
  EXPECT_TRUE(c.expired(t0 + 74s).empty());
  EXPECT_EQ(c.expired(t0 + 75s), std::vector<std::string>{"j1"});
  EXPECT_TRUE(c.expired(t0 + 76s).empty());  // once
  EXPECT_FALSE(c.next_expiry().has_value());
}

TEST(LeaseClock, RenewalsPushTheExpiryAndOnlyTheRenewedOnes) {
  LeaseClock c;
  c.track("a", 90s, t0);
  c.track("b", 90s, t0);
  c.renewed("a", t0 + 60s);
  c.renewed("ghost", t0 + 60s);  // ignored
  EXPECT_EQ(c.expired(t0 + 75s), std::vector<std::string>{"b"});
  EXPECT_EQ(c.next_expiry(), t0 + 135s);
  c.renewed("a", t0 + 10s);  // an older reply never moves the clock back
  EXPECT_EQ(c.next_expiry(), t0 + 135s);
  c.forget("a");
  EXPECT_TRUE(c.expired(t0 + 1000s).empty());
}

TEST(LeaseClock, PerRunnerTtlsAndTheShortestWindow) {
  LeaseClock c;
  EXPECT_FALSE(c.shortest_window().has_value());
  c.track("slurm-job", 30min, t0);
  c.track("process-job", 12s, t0);
  EXPECT_EQ(c.shortest_window(), 7s);
  EXPECT_EQ(c.window_of("slurm-job"), 25min);
  EXPECT_EQ(c.expired(t0 + 7s), std::vector<std::string>{"process-job"});
  EXPECT_EQ(c.shortest_window(), 25min);
  EXPECT_EQ(c.expired(t0 + 25min), std::vector<std::string>{"slurm-job"});
}

// A manager tracks ten thousand leases: each costs a map node, not a copy of its job id as well. A lease tracked
// again under the same id (a new attempt) views the new characters.
TEST(LeaseClock, KeepsAViewOfEachJobIdNotACopy) {
  LeaseClock c;
  auto old_id = std::make_unique<std::string>("01JBZ6Q0Y0S3V9J4T8W2N5K7MX-attempt-one");
  c.track(*old_id, 90s, t0);
  const std::string id = *old_id;
  const std::size_t before = nymph::test::allocations_on_this_thread();
  c.track(id, 12s, t0);
  EXPECT_EQ(nymph::test::allocations_on_this_thread() - before, 1u) << "one map node; the id is not copied";
  old_id.reset();  // the first attempt's id goes: the clock no longer looks at it
  EXPECT_EQ(c.window_of(id), 7s);
  EXPECT_EQ(c.expired(t0 + 7s), std::vector<std::string>{id});
}
