// The agent's side of the lease (D4), stepped with a synthetic clock: no sockets, no sleeps.
#include <gtest/gtest.h>

#include "agent/lease_clock.hpp"

using namespace nymph::agent;
using namespace std::chrono_literals;

namespace {
const Clock::time_point t0{};
}

TEST(LeaseClock, MarginIsFiveSecondsOrASixthOfTheTtl) {
  EXPECT_EQ(LeaseClock::margin_for(90s), 15s);
  EXPECT_EQ(LeaseClock::window_for(90s), 75s);
  EXPECT_EQ(LeaseClock::margin_for(12s), 5s);
  EXPECT_EQ(LeaseClock::window_for(12s), 7s);
  EXPECT_EQ(LeaseClock::window_for(30min), 25min);
  EXPECT_EQ(LeaseClock::window_for(3s), 0s);
}

TEST(LeaseClock, ALeaseNotRenewedForTtlMinusMarginExpires) {
  LeaseClock c;
  EXPECT_FALSE(c.running());
  EXPECT_FALSE(c.expired(t0 + 1000s)) << "a clock never started never expires";
  c.start(90s, t0);
  EXPECT_TRUE(c.running());
  EXPECT_EQ(c.expiry(), t0 + 75s);
  EXPECT_EQ(c.window(), 75s);
  EXPECT_FALSE(c.expired(t0 + 74s));
  EXPECT_TRUE(c.expired(t0 + 75s));
  c.stop();  // the daemon stops the clock of an expired lease: it expires once
  EXPECT_FALSE(c.expired(t0 + 76s));
  EXPECT_FALSE(c.expiry().has_value());
  EXPECT_EQ(c.window(), 75s) << "the window stays for the final event's message";
}

TEST(LeaseClock, RenewalsPushTheExpiryNeverBack) {
  LeaseClock c;
  c.start(90s, t0);
  c.renewed(t0 + 60s);
  EXPECT_FALSE(c.expired(t0 + 75s));
  EXPECT_EQ(c.expiry(), t0 + 135s);
  c.renewed(t0 + 10s);  // an older reply never moves the clock back
  EXPECT_EQ(c.expiry(), t0 + 135s);
  c.stop();
  c.renewed(t0 + 200s);  // a stopped clock stays stopped
  EXPECT_FALSE(c.running());
}

TEST(LeaseClock, StartingAgainReplacesTheLease) {
  LeaseClock c;
  c.start(30min, t0);
  c.start(12s, t0 + 100s);  // e.g. a resumed attempt under the process runner's TTL
  EXPECT_EQ(c.window(), 7s);
  EXPECT_EQ(c.expiry(), t0 + 107s);
}

// A manager holds ten thousand leases: each is two words inside its attempt, with no map node of its own.
TEST(LeaseClock, IsTwoWordsHeldByValue) {
  static_assert(sizeof(LeaseClock) == 2 * sizeof(void*));
  SUCCEED();
}
