// common/text: trimming, errno messages, and untrusted text shown on one line.
#include <gtest/gtest.h>

#include <cerrno>

#include "common/text.hpp"

TEST(Text, TrimRemovesOnlySurroundingWhitespace) {
  EXPECT_EQ(nymph::trim("  a b\t\r\n"), "a b");
  EXPECT_EQ(nymph::trim(" \n "), "");
  EXPECT_EQ(nymph::trim("x"), "x");
}

TEST(Text, ErrnoMessageNamesTheError) { EXPECT_EQ(nymph::errno_message(ENOENT), "No such file or directory"); }

TEST(Text, OneLineEscapesControlBytesAndCapsTheLength) {
  EXPECT_EQ(nymph::one_line("a\nb\x7f\xff"), "a\\x0ab\\x7f\\xff");
  EXPECT_EQ(nymph::one_line(std::string(10, 'x'), 4), "xxxx... (10 bytes)");
}
