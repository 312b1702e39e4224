#include <gtest/gtest.h>

#include "common/duration.hpp"

using namespace std::chrono_literals;
using nymph::parse_duration;

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parse_duration("250ms").value(), 250ms);
  EXPECT_EQ(parse_duration("30s").value(), 30s);
  EXPECT_EQ(parse_duration("30").value(), 30s);
  EXPECT_EQ(parse_duration("1.5s").value(), 1500ms);
  EXPECT_EQ(parse_duration("5m").value(), 5min);
  EXPECT_EQ(parse_duration("2h").value(), 2h);
  EXPECT_EQ(parse_duration("1d").value(), 24h);
}

TEST(Duration, RejectsGarbageWithTheText) {
  for (auto bad : {"", "s", "-1s", "10x", "1e3", "abc", "5 m", "nan"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos) << r.error().message;
  }
}

TEST(Duration, FormatsRoundTrip) {
  for (auto d : {250ms, 1500ms, std::chrono::milliseconds(30s), std::chrono::milliseconds(5min),
                 std::chrono::milliseconds(2h), std::chrono::milliseconds(24h * 30)}) {
    EXPECT_EQ(parse_duration(nymph::format_duration(d)).value(), d);
  }
  EXPECT_EQ(nymph::format_duration(std::chrono::hours(24 * 30)), "30d");
  EXPECT_EQ(nymph::format_duration(std::chrono::hours(36)), "36h");
}

// Found by fuzz/text_values: up to 1e15 ms was accepted, which overflows a clock's time point (nanoseconds) when
// added to now.
TEST(Duration, AtMostAHundredYears) {
  EXPECT_EQ(parse_duration("36500d").value(), nymph::kMaxDuration);
  for (auto bad : {"36501d", "999999999999", "1e15ms", "99999999999999999999d"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.has_value()) << bad;
  }
  EXPECT_LT(nymph::kMaxDuration.count(),
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds::max()).count() / 2);
}
