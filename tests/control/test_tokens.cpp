// Tokens: roles by name, the token text format, and the hash the database keeps.
#include <gtest/gtest.h>

#include <set>

#include "control/tokens.hpp"

using namespace nymph::control;

TEST(Tokens, RolesHaveNames) {
  EXPECT_EQ(to_string(Role::agent), "agent");
  EXPECT_EQ(parse_role("admin"), Role::admin);
  EXPECT_EQ(parse_role(to_string(Role::agent)), Role::agent);
  EXPECT_FALSE(parse_role("root"));
}

TEST(Tokens, NewTokensAreRandomBase64UrlWithAPrefix) {
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    std::string t = new_token();
    ASSERT_EQ(t.size(), 4u + 43u) << t;
    EXPECT_EQ(t.substr(0, 4), "nym_");
    EXPECT_EQ(t.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 4),
              std::string::npos)
        << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 20u);
}

TEST(Tokens, TheHashIsHexSha256) {
  EXPECT_EQ(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(token_hash("nym_a"), token_hash("nym_b"));
}
