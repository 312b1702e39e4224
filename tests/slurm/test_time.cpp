// Slurm's time formats: time limits and the time left squeue prints.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include <cstdlib>
#include <ctime>

#include "slurm/time.hpp"

namespace {

using namespace nymph::slurm;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(SlurmDuration, EveryNotation) {
  EXPECT_EQ(parse_duration("90"), minutes(90)) << "M";
  EXPECT_EQ(parse_duration("10:30"), minutes(10) + seconds(30)) << "M:S";
  EXPECT_EQ(parse_duration("2:00:05"), hours(2) + seconds(5)) << "H:M:S";
  EXPECT_EQ(parse_duration("1-12"), hours(36)) << "D-H";
  EXPECT_EQ(parse_duration("2-12:30"), hours(60) + minutes(30)) << "D-H:M";
  EXPECT_EQ(parse_duration("0-0:0:30"), seconds(30)) << "D-H:M:S";
  EXPECT_EQ(parse_duration("0"), seconds(0));
}

TEST(SlurmDuration, RejectsOutOfRangeAndForeignText) {
  for (const char* bad : {"", "1:2:3:4", "1-24", "10:60", "1-2:60", "-1", "UNLIMITED", "1h", "1 ", "a:b",
                          "1234567-0", "123456789", "1234567:00:00"})
    EXPECT_FALSE(parse_duration(bad)) << bad;
}

TEST(SlurmDuration, TimeLimitsArePositive) {
  EXPECT_TRUE(is_time_limit("1"));
  EXPECT_TRUE(is_time_limit("1-0"));
  EXPECT_FALSE(is_time_limit("0"));
  EXPECT_FALSE(is_time_limit("0:0"));
  EXPECT_FALSE(is_time_limit("UNLIMITED"));
}

TEST(SlurmTimeLeft, WhatSqueuePrints) {
  EXPECT_EQ(parse_time_left("59:40"), seconds(59 * 60 + 40));
  EXPECT_EQ(parse_time_left("1:00:00"), seconds(3600));
  EXPECT_EQ(parse_time_left("2-03:04:05"), seconds(((2 * 24 + 3) * 60 + 4) * 60 + 5));
  EXPECT_EQ(parse_time_left("1-12"), seconds(36 * 3600));
  EXPECT_FALSE(parse_time_left("UNLIMITED"));
  EXPECT_FALSE(parse_time_left("NOT_SET"));
  EXPECT_FALSE(parse_time_left("12")) << "squeue always prints a ':' or a '-'";
  EXPECT_FALSE(parse_time_left("1:99"));
  EXPECT_FALSE(parse_time_left("a:b"));
}

TEST(SlurmTimeLimit, MinutesRoundUp) {
  EXPECT_EQ(minutes_for(seconds(0)), "1");
  EXPECT_EQ(minutes_for(seconds(60)), "1");
  EXPECT_EQ(minutes_for(seconds(61)), "2");
  EXPECT_EQ(minutes_for(hours(2)), "120");
}

TEST(SlurmTime, SinceIsLocalTimeForSacct) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(format_slurm_time(std::chrono::system_clock::time_point(std::chrono::seconds(1796102661))),
            "2026-12-01T05:24:21");
  ::setenv("TZ", "Europe/Berlin", 1);
  ::tzset();
  EXPECT_EQ(format_slurm_time(std::chrono::system_clock::time_point(std::chrono::seconds(1796102661))),
            "2026-12-01T06:24:21");
  ::unsetenv("TZ");
  ::tzset();
}

}  // namespace

// Found by fuzz/text_values: "99999999" (minutes) and "999999-23:59:59" passed as time limits, but Slurm computes a
// --time value in seconds in a 32-bit int: they overflow there into another limit or an error.
TEST(SlurmTimeLimit, OnlyWhatSlurmsIntArithmeticHolds) {
  EXPECT_TRUE(is_time_limit("35791393"));
  EXPECT_FALSE(is_time_limit("35791394"));
  EXPECT_FALSE(is_time_limit("99999999"));
  EXPECT_FALSE(is_time_limit("999999-23:59:59"));
  EXPECT_TRUE(is_time_limit("24855-00:00:00"));
  EXPECT_EQ(minutes_for(seconds(std::numeric_limits<std::int64_t>::max())), "35791393");
  EXPECT_TRUE(is_time_limit(minutes_for(hours(24 * 365 * 1000))));
}
