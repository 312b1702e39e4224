// The PATH rule every part of nymph uses to find a program (platform/environment.hpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "platform/environment.hpp"
#include "tests/support/processes.hpp"

namespace nymph::platform {
namespace {

namespace fs = std::filesystem;

void make_file(const fs::path& p, fs::perms perms) {
  std::ofstream(p) << "#!/bin/sh\nexit 0\n";
  fs::permissions(p, perms);
}

struct PathRule : ::testing::Test {
  test::TempDir tmp;
  fs::path a = tmp / "a", b = tmp / "b";
  void SetUp() override {
    fs::create_directories(a);
    fs::create_directories(b);
  }
};

TEST_F(PathRule, FirstExecutableRegularFileInPathOrderWins) {
  make_file(a / "tool", fs::perms::owner_read | fs::perms::owner_write);  // not executable: skipped
  fs::create_directories(b / "tool" / "x");
  fs::permissions(b / "tool", fs::perms::owner_all);  // a directory: skipped
  fs::create_directories(tmp / "c");
  make_file(tmp / "c" / "tool", fs::perms::owner_all);
  make_file(tmp / "d", fs::perms::owner_all);
  const std::string path = a.string() + ":" + b.string() + ":/nonexistent:" + (tmp / "c").string();
  EXPECT_EQ(find_on_path("tool", path), (tmp / "c" / "tool").string());
  EXPECT_EQ(find_on_path("tool", (tmp / "c").string() + ":" + a.string()), (tmp / "c" / "tool").string());
  EXPECT_EQ(find_on_path("missing", path), std::nullopt);
  EXPECT_EQ(find_on_path("", path), std::nullopt);
}

TEST_F(PathRule, ANameWithASlashIsAPathAndIsNotSearched) {
  make_file(a / "tool", fs::perms::owner_all);
  make_file(b / "plain", fs::perms::owner_read);
  EXPECT_EQ(find_on_path((a / "tool").string(), "/nonexistent"), (a / "tool").string());
  EXPECT_EQ(find_on_path((b / "plain").string(), b.string()), std::nullopt) << "not executable";
  EXPECT_EQ(find_on_path(a.string() + "/", a.string()), std::nullopt) << "a directory";
  EXPECT_EQ(find_on_path("a/tool", b.string()), std::nullopt) << "relative to the working directory, not PATH";
}

TEST_F(PathRule, AnEmptyEntryIsTheWorkingDirectory) {
  make_file(a / "tool", fs::perms::owner_all);
  const fs::path before = fs::current_path();
  fs::current_path(a);
  auto leading = find_on_path("tool", ":/nonexistent");
  auto trailing = find_on_path("tool", "/nonexistent:");
  auto middle = find_on_path("tool", "/nonexistent::/also-not");
  auto relative = find_on_path("./tool", "/nonexistent");
  fs::current_path(before);
  EXPECT_EQ(leading, "./tool");
  EXPECT_EQ(trailing, "./tool");
  EXPECT_EQ(middle, "./tool");
  EXPECT_EQ(relative, "./tool");
}

TEST(SearchPath, TheChildsPathThenOursThenADefault) {
  EXPECT_EQ(search_path({{"PATH", "/only/this"}}), "/only/this");
  const char* own = std::getenv("PATH");
  EXPECT_EQ(search_path({{"HOME", "/x"}}), own ? std::string(own) : std::string("/usr/bin:/bin"));
}

TEST(CurrentEnvironment, IsThisProcesssEnvironment) {
  ::setenv("NYMPH_PLATFORM_TEST", "a=b", 1);
  auto env = current_environment();
  ::unsetenv("NYMPH_PLATFORM_TEST");
  EXPECT_EQ(env.at("NYMPH_PLATFORM_TEST"), "a=b");
}

}  // namespace
}  // namespace nymph::platform
