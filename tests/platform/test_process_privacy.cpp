// make_undumpable: what keeps the agent's secrets out of reach of same-user processes through /proc.
#include <gtest/gtest.h>

#include "platform/process_privacy.hpp"

TEST(ProcessPrivacy, MakeUndumpableClearsTheDumpableFlag) {
  ASSERT_TRUE(nymph::platform::is_dumpable());  // a test binary starts dumpable
  ASSERT_TRUE(nymph::platform::make_undumpable());
  EXPECT_FALSE(nymph::platform::is_dumpable());
}
