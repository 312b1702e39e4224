// The config.toml `nymph install` writes is one the daemon's own parser (agent/config.hpp) accepts, with the
// launch's identity, tags and idle exit intact.
#include <gtest/gtest.h>

#include "agent/config.hpp"
#include "installer/plan.hpp"

using namespace nymph::installer;

TEST(ConfigCompat, DaemonParsesTheInstalledConfig) {
  InstallOptions o;
  o.server = "https://cp.example.org:8443";
  o.label = "gpu1";
  o.tags = {"site=lab", "note=quote \" and \\ backslash"};
  o.idle_exit = "45m";
  auto id = nymph::parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAV").value();
  auto plan = make_install_plan(o, {.home = "/h", .hostname = "h", .nymph_exe = "/bin/nymph"}, id).value();
  auto config = nymph::agent::parse_config(plan.config_toml, "config.toml");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->server.url, "https://cp.example.org:8443");
  EXPECT_EQ(config->server.token_file, "token");
  EXPECT_EQ(config->worker.label, "gpu1-01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(config->worker.launch_id, "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(config->worker.tags.at("site"), "lab");
  EXPECT_EQ(config->worker.tags.at("note"), "quote \" and \\ backslash");
  EXPECT_EQ(config->worker.idle_exit, std::chrono::minutes(45));
  EXPECT_TRUE(nymph::agent::check_server_url(config->server));
}

TEST(ConfigCompat, MinimalConfigParses) {
  InstallOptions o;
  o.server = "http://127.0.0.1:8080";
  auto id = nymph::parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAV").value();
  auto plan = make_install_plan(o, {.home = "/h", .hostname = "h", .nymph_exe = "/bin/nymph"}, id).value();
  auto config = nymph::agent::parse_config(plan.config_toml, "config.toml");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_FALSE(config->worker.idle_exit);
  EXPECT_TRUE(config->worker.tags.empty());
  EXPECT_TRUE(nymph::agent::check_server_url(config->server));
}
