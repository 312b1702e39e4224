// The exit status of `nymph-control submit --wait` for each final job state.
#include <gtest/gtest.h>

#include "control/admin/commands.hpp"

using nymph::control::admin::exit_status_of_job;

TEST(AdminCommands, ExitStatusFollowsTheJob) {
  EXPECT_EQ(exit_status_of_job("succeeded", 0, std::nullopt), 0);
  EXPECT_EQ(exit_status_of_job("failed", 3, std::nullopt), 3);
  EXPECT_EQ(exit_status_of_job("failed", std::nullopt, 9), 128 + 9);
  EXPECT_EQ(exit_status_of_job("failed", 300, std::nullopt), 1);
  EXPECT_EQ(exit_status_of_job("failed", std::nullopt, std::nullopt), 1);
  EXPECT_EQ(exit_status_of_job("cancelled", std::nullopt, 15), 130);
  EXPECT_EQ(exit_status_of_job("lost", std::nullopt, std::nullopt), 1);
}
