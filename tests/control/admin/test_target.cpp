// Where the admin commands go: flags before the environment before the config file, tokens from files only,
// and never in clear text to a host that is not loopback.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

#include "control/admin/target.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::control::admin;
using nymph::test::TempDir;

namespace {

// Clears the NYMPH_CONTROL_* variables and points XDG_CONFIG_HOME at an empty directory for one test.
class TargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
      ::unsetenv(v);
    }
    ::setenv("XDG_CONFIG_HOME", (dir_.path() / "xdg").c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

  std::string write(const std::string& name, const std::string& text) {
    auto path = (dir_.path() / name).string();
    std::ofstream(path) << text;
    return path;
  }

  static constexpr const char* kVars[] = {"NYMPH_CONTROL_URL", "NYMPH_CONTROL_TOKEN_FILE", "NYMPH_CONTROL_CA_FILE",
                                          "XDG_CONFIG_HOME"};
  TempDir dir_{"nymph-admin"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

}  // namespace

TEST_F(TargetTest, FlagsBeatTheEnvironmentWhichBeatsTheConfigFile) {
  auto flag_token = write("flag.token", "nym_flag\n");
  auto env_token = write("env.token", "  nym_env  ");
  auto config = write("c.toml", "url = 'https://config:1'\ntoken_file = '" + write("cfg.token", "nym_cfg") +
                                    "'\nca_file = '/config/ca.pem'\n");
  ::setenv("NYMPH_CONTROL_URL", "https://env:2", 1);
  ::setenv("NYMPH_CONTROL_TOKEN_FILE", env_token.c_str(), 1);
  auto t = resolve_target({.server = "https://flag:3", .token_file = flag_token, .config = config}).value();
  EXPECT_EQ(t.url, "https://flag:3");
  EXPECT_EQ(t.token, "nym_flag");
  EXPECT_EQ(t.ca_file, "/config/ca.pem");
  t = resolve_target({.config = config}).value();
  EXPECT_EQ(t.url, "https://env:2");
  EXPECT_EQ(t.token, "nym_env");
  ::unsetenv("NYMPH_CONTROL_URL");
  ::unsetenv("NYMPH_CONTROL_TOKEN_FILE");
  t = resolve_target({.config = config}).value();
  EXPECT_EQ(t.url, "https://config:1");
  EXPECT_EQ(t.token, "nym_cfg");
}

TEST_F(TargetTest, TheDefaultConfigFileAndUrl) {
  std::filesystem::create_directories(dir_.path() / "xdg" / "nymph");
  write("xdg/nymph/control.toml", "token_file = '" + write("t", "nym_x") + "'\n");
  auto t = resolve_target({}).value();
  EXPECT_EQ(t.url, "http://127.0.0.1:8470");
  EXPECT_EQ(t.token, "nym_x");
  EXPECT_FALSE(t.ca_file);
}

TEST_F(TargetTest, ErrorsNameWhatIsMissingOrWrong) {
  auto none = resolve_target({});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no admin token"), std::string::npos) << none.error().message;
  auto unreadable = resolve_target({.token_file = (dir_.path() / "absent").string()});
  ASSERT_FALSE(unreadable);
  EXPECT_NE(unreadable.error().message.find("token file " + (dir_.path() / "absent").string() + ": No such file"),
            std::string::npos)
      << unreadable.error().message;
  auto empty = resolve_target({.token_file = write("empty", " \n")});
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("is empty"), std::string::npos);
  auto bad = resolve_target({.config = write("bad.toml", "url = \n")});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("(line 1)"), std::string::npos) << bad.error().message;
  auto named_but_absent = resolve_target({.config = (dir_.path() / "nope.toml").string()});
  EXPECT_FALSE(named_but_absent);
}

TEST_F(TargetTest, PlainHttpToAHostThatIsNotLoopbackIsRefusedBeforeTheTokenIsRead) {
  auto token = write("t", "nym_secret");
  for (std::string url : {"http://10.0.0.5:8470", "http://127.attacker.example:8470", "http://127.0.0.1.example.com:8470",
                          "http://host:99999"}) {
    auto t = resolve_target({.server = url, .token_file = token});
    ASSERT_FALSE(t) << url;
    EXPECT_NE(t.error().message.find(url), std::string::npos) << t.error().message;
    EXPECT_EQ(t.error().message.find("nym_secret"), std::string::npos);
  }
  ::setenv("NYMPH_CONTROL_URL", "http://10.0.0.5:8470", 1);
  EXPECT_FALSE(resolve_target({.token_file = token}));
  for (std::string url : {"http://127.0.0.1:8470", "http://[::1]:8470", "http://localhost:8470", "https://cp.example.org"})
    EXPECT_TRUE(resolve_target({.server = url, .token_file = token})) << url;
}

TEST_F(TargetTest, ConfigAndTokenFilesMustBeSmallRegularFiles) {
  auto token = write("t", "nym_x");
  auto dev = resolve_target({.token_file = token, .config = "/dev/zero"});  // toml::parse_file read it without bound
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("config file /dev/zero: is not a regular file"), std::string::npos)
      << dev.error().message;
  auto fifo = (dir_.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = resolve_target({.token_file = fifo});  // would block in open() without O_NONBLOCK
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("not a regular file"), std::string::npos) << f.error().message;
  auto c = resolve_target({.token_file = token, .config = fifo});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("not a regular file"), std::string::npos) << c.error().message;
  auto big = resolve_target({.token_file = write("big", std::string(100 * 1024, 'x'))});
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("is larger than 64 KiB"), std::string::npos) << big.error().message;
}

// Deep nesting costs toml++ stack and memory per level; the admin CLI's config is refused before toml++ sees it,
// as the agent's is.
TEST_F(TargetTest, ADeeplyNestedConfigIsRefusedBeforeTomlParsesIt) {
  auto token = write("t", "nym_x");
  auto deep = write("deep.toml", "url = 'https://cp:1'\nx = " + std::string(100000, '[') + "\n");
  auto t = resolve_target({.token_file = token, .config = deep});
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find(deep + ":2: invalid TOML: arrays and tables nested deeper than 32 levels"),
            std::string::npos)
      << t.error().message;
}
