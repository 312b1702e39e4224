// common/text: trimming, errno messages, printable excerpts.
#include <gtest/gtest.h>

#include <cerrno>

#include "common/text.hpp"

TEST(Text, TrimRemovesOnlySurroundingWhitespace) {
  EXPECT_EQ(nymph::trim("  a b\t\r\n"), "a b");
  EXPECT_EQ(nymph::trim(" \n "), "");
  EXPECT_EQ(nymph::trim("x"), "x");
}

TEST(Text, ErrnoMessageNamesTheError) { EXPECT_EQ(nymph::errno_message(ENOENT), "No such file or directory"); }

TEST(Text, PrintableExcerptEscapesControlCharactersSoNoLineCanBeForged) {
  using nymph::printable_excerpt;
  EXPECT_EQ(printable_excerpt("plain text", 100), "plain text");
  EXPECT_EQ(printable_excerpt("a\nFORGED line\r\tb", 100), "a\\nFORGED line\\r\\tb");
  EXPECT_EQ(printable_excerpt("\x1b[31mred", 100), "\\x1b[31mred");  // no terminal escape sequence
  EXPECT_EQ(printable_excerpt(std::string("nul\0del\x7f", 8), 100), "nul\\x00del\\x7f");
  EXPECT_EQ(printable_excerpt("back\\slash", 100), "back\\\\slash");  // an escape cannot be faked
  EXPECT_EQ(printable_excerpt("h\xc3\xa9llo \xe2\x9c\x93", 100), "h\xc3\xa9llo \xe2\x9c\x93");  // UTF-8 kept
  EXPECT_EQ(printable_excerpt("c1 \xc2\x9b csi", 100), "c1 \\xc2\\x9b csi");  // U+009B, a C1 control
  EXPECT_EQ(printable_excerpt("bad \xff\xc3 \xed\xa0\x80", 100), "bad \\xff\\xc3 \\xed\\xa0\\x80");  // not UTF-8
}

TEST(Text, PrintableExcerptTruncatesWithAMarker) {
  using nymph::printable_excerpt;
  EXPECT_EQ(printable_excerpt("0123456789", 4), "0123…(10 bytes)");
  EXPECT_EQ(printable_excerpt("0123", 4), "0123");
  EXPECT_EQ(printable_excerpt("", 4), "");
  std::string escaped;
  for (int i = 0; i < 100; ++i) escaped += "\\n";
  EXPECT_EQ(printable_excerpt(std::string(2 * 1024 * 1024, '\n'), 100), escaped + "…(2097152 bytes)");
}
