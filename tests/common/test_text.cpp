// common/text: trimming and errno messages.
#include <gtest/gtest.h>

#include <cerrno>

#include "common/text.hpp"

TEST(Text, TrimRemovesOnlySurroundingWhitespace) {
  EXPECT_EQ(nymph::trim("  a b\t\r\n"), "a b");
  EXPECT_EQ(nymph::trim(" \n "), "");
  EXPECT_EQ(nymph::trim("x"), "x");
}

TEST(Text, ErrnoMessageNamesTheError) { EXPECT_EQ(nymph::errno_message(ENOENT), "No such file or directory"); }
