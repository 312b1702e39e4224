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
