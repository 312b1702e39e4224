// `nymph run` as a manager (agent/run_main.cpp, [manager]): one manager per identity (a second one exits 1 naming
// the holder), `--replace` hands over, the lease is released at a clean exit, and the identity is sent at
// registration. Real daemons against a real nymph-control.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "agent/manager_lease.hpp"
#include "tests/support/agent_process.hpp"
#include "tests/support/files.hpp"
#include "tests/support/json_output.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

// A [manager] section shared by the daemons of one test: one identity, one state directory.
std::string shared_manager(const fs::path& state) {
  return "state_dir = \"" + state.native() + "\"\ncluster = \"e2e-" + state.filename().native() +
         "\"\nheartbeat_interval = \"200ms\"\n";
}

std::string identity_of(const ControlServer& cp, int pid) {
  auto list = one_object(cp.admin({"workers", "--json"}));
  for (const auto& w : list["workers"].as_array())
    if (w.as_object().at("pid").to_number<int>() == pid && w.as_object().contains("identity") &&
        w.as_object().at("identity").is_string())
      return std::string(w.as_object().at("identity").as_string());
  return {};
}

}  // namespace

TEST(ManagerE2E, SecondManagerOfTheIdentityIsRefusedNamingTheHolder) {
  ControlServer cp({.poll_timeout = "500ms"});
  TempDir state("nymph-mgr");
  AgentProcess first(cp, {.manager_toml = shared_manager(state.path())});
  first.wait_for_state("serving");
  AgentProcess second(cp, {.manager_toml = shared_manager(state.path())});
  EXPECT_EQ(second.wait_exit(30s), 1) << second.log();
  std::string err = read_file(second.dir() + "/stderr.log");
  EXPECT_NE(err.find("is already running: host " + nymph::agent::short_host_name() + " pid " +
                     std::to_string(first.pid()) + " launch "),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one line: " << err;
  EXPECT_TRUE(fs::exists(state.path() / "manager.json"));  // the refused one did not touch the holder's lease

  first.signal(SIGTERM);
  EXPECT_EQ(first.wait_exit(), 143);
  EXPECT_FALSE(fs::exists(state.path() / "manager.json")) << "released at a clean exit";
  second.start();
  second.wait_for_state("serving");
}

TEST(ManagerE2E, ReplaceMakesTheHolderHandOver) {
  ControlServer cp({.poll_timeout = "500ms"});
  TempDir state("nymph-mgr");
  AgentProcess first(cp, {.drain_grace = "2s", .manager_toml = shared_manager(state.path())});
  first.wait_for_state("serving");
  AgentProcess second(cp, {.manager_toml = shared_manager(state.path()), .run_args = {"--replace"}});
  second.wait_for_state("serving");
  EXPECT_EQ(first.wait_exit(30s), 143) << first.log();
  auto lease = nymph::agent::parse_lease(read_file((state.path() / "manager.json").native()));
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_EQ(lease->pid, second.pid());
}

TEST(ManagerE2E, AKilledManagerIsProvablyGoneAndItsSuccessorStarts) {
  ControlServer cp({.poll_timeout = "500ms"});
  TempDir state("nymph-mgr");
  AgentProcess first(cp, {.manager_toml = shared_manager(state.path())});
  first.wait_for_state("serving");
  first.signal(SIGKILL);
  first.wait_exit();
  EXPECT_TRUE(fs::exists(state.path() / "manager.json"));  // left behind, but its pid is dead
  AgentProcess second(cp, {.manager_toml = shared_manager(state.path())});
  second.wait_for_state("serving");
}

TEST(ManagerE2E, TheIdentityIsSentAtRegistration) {
  ControlServer cp({.poll_timeout = "500ms"});
  TempDir state("nymph-mgr");
  AgentProcess agent(cp, {.manager_toml = shared_manager(state.path())});
  agent.wait_for_state("serving");
  EXPECT_EQ(identity_of(cp, agent.pid()),
            nymph::agent::current_user_name() + "@e2e-" + state.path().filename().native());
}
