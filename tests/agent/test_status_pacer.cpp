// status.json's pacing of count-only updates, stepped on a fake clock.
#include <gtest/gtest.h>

#include "agent/status_pacer.hpp"

namespace {

using nymph::agent::StatusPacer;
using namespace std::chrono_literals;

const StatusPacer::Clock::time_point t0{std::chrono::hours(1)};

TEST(StatusPacer, TheFirstChangeAndOneAfterAQuietGapAreWrittenAtOnce) {
  StatusPacer pacer(1s);
  EXPECT_TRUE(pacer.change(t0));
  pacer.wrote(t0);
  EXPECT_TRUE(pacer.change(t0 + 1s));
  EXPECT_FALSE(pacer.deferred());
}

TEST(StatusPacer, ChangesWithinTheGapBecomeOneWriteAtItsEnd) {
  StatusPacer pacer(1s);
  pacer.wrote(t0);
  EXPECT_FALSE(pacer.change(t0 + 10ms));
  EXPECT_FALSE(pacer.change(t0 + 500ms));
  EXPECT_FALSE(pacer.change(t0 + 999ms));
  ASSERT_TRUE(pacer.deferred());
  EXPECT_EQ(*pacer.deferred(), t0 + 1s);  // one write for the three, due a gap after the last one
  pacer.wrote(t0 + 1s);
  EXPECT_FALSE(pacer.deferred());
  EXPECT_FALSE(pacer.change(t0 + 1500ms));
  EXPECT_EQ(*pacer.deferred(), t0 + 2s);
}

TEST(StatusPacer, AnUnpacedWriteCarriesThePendingChange) {
  StatusPacer pacer(1s);
  pacer.wrote(t0);
  EXPECT_FALSE(pacer.change(t0 + 100ms));
  pacer.wrote(t0 + 200ms);  // a change of state, written at once with the current count
  EXPECT_FALSE(pacer.deferred());
  EXPECT_FALSE(pacer.change(t0 + 300ms));
  EXPECT_EQ(*pacer.deferred(), t0 + 1200ms);
}

}  // namespace
