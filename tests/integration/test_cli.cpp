// Both binaries start, print their version and list the product's subcommands.
#include <gtest/gtest.h>

#include "nymph/version.hpp"
#include "tests/support/commands.hpp"

using nymph::test::run_command;

TEST(Cli, NymphVersion) {
  auto r = run_command({NYMPH_BINARY, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, std::string("nymph ") + nymph::kVersion + "\n");
}

TEST(Cli, NymphHelpListsSubcommands) {
  auto r = run_command({NYMPH_BINARY, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (auto sub : {"run", "install", "launches", "kill", "probe", "slurm"})
    EXPECT_NE(r.out.find(std::string("\n  ") + sub + " "), std::string::npos) << sub << " missing in\n" << r.out;
}

TEST(Cli, NymphControlHelpListsSubcommands) {
  auto r = run_command({NYMPH_CONTROL_BINARY, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (auto sub : {"serve", "token", "submit", "jobs", "job", "logs", "cancel", "workers", "kill"})
    EXPECT_NE(r.out.find(std::string("\n  ") + sub + " "), std::string::npos) << sub << " missing in\n" << r.out;
}

TEST(Cli, UnknownSubcommandFails) {
  auto r = run_command({NYMPH_BINARY, "frobnicate"});
  EXPECT_NE(r.exit_code, 0);
}

TEST(Cli, ProbeJsonIsOneObject) {
  auto r = run_command({NYMPH_BINARY, "probe", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_NE(r.out.find("\"runners\":[\"process\""), std::string::npos) << r.out;
}

TEST(TestChild, ModesWork) {
  auto r = run_command({NYMPH_TEST_CHILD, "--text", "--write", "10", "--write-err", "3", "--exit", "7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.out, "abcdefghij");
  EXPECT_EQ(r.err, "abc");
  auto b = run_command({NYMPH_TEST_CHILD, "--binary"});
  ASSERT_EQ(b.out.size(), 256u);
  EXPECT_EQ(static_cast<unsigned char>(b.out[255]), 255);
}
