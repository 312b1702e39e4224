// common/time: RFC 3339 UTC with milliseconds, both ways.
#include <gtest/gtest.h>

#include "common/time.hpp"

TEST(Time, Rfc3339RoundTrip) {
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'764'448'235'123));
  std::string s = nymph::format_time(t);
  EXPECT_EQ(s, "2025-11-29T20:30:35.123Z");
  auto back = nymph::parse_time(s);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, t);
  EXPECT_TRUE(nymph::parse_time("2025-11-29T20:30:35Z"));
  EXPECT_TRUE(nymph::parse_time("2025-11-29T20:30:35.5+00:00"));
  EXPECT_FALSE(nymph::parse_time("2025-11-29 20:30:35"));
  EXPECT_FALSE(nymph::parse_time("2025-13-29T20:30:35Z"));
}

// Found by fuzz/text_values: a year system_clock cannot hold (it counts nanoseconds) overflowed the conversion
// (undefined behaviour; UBSan aborts) instead of being refused.
TEST(Time, YearsSystemClockCannotHoldAreRefused) {
  for (const char* bad : {"1485-01-01T00:00:00Z", "1677-01-01T00:00:00Z", "2263-01-01T00:00:00Z",
                          "9999-12-31T23:59:59.999Z", "-999-01-01T00:00:00Z"})
    EXPECT_FALSE(nymph::parse_time(bad)) << bad;
  for (const char* good : {"1678-01-01T00:00:00Z", "2262-01-01T00:00:00.001Z"}) {
    auto t = nymph::parse_time(good);
    ASSERT_TRUE(t) << good;
    EXPECT_EQ(nymph::parse_time(nymph::format_time(*t)).value(), *t) << good;
  }
}
