// `nymph install` end to end: a real launch of the real `nymph run` against a real `nymph-control`
// (tests/support/control_server.hpp), with a temporary HOME.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/json_output.hpp"
#include "tests/support/control_server.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;

namespace {

std::string short_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  ::gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

class InstallE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nymph-e2e-install-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    if (const char* h = std::getenv("HOME")) old_home_ = h;
    ::setenv("HOME", home_.c_str(), 1);
    ::unsetenv("XDG_DATA_HOME");  // the manager state directory follows HOME
  }

  void TearDown() override {
    auto list = one_object(nymph({"launches", "--json"}));
    for (const auto& l : list["launches"].as_array())
      if (l.at("state") == "running") nymph({"kill", std::string(l.at("launchId").as_string())});
    ::setenv("HOME", old_home_.c_str(), 1);
    fs::remove_all(home_);
  }

  CommandOutput nymph(std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), NYMPH_BINARY);
    return run_command(args, input);
  }

  // Installs against `cp` and returns install's JSON object.
  json::object install(const ControlServer& cp, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"install", "--server", cp.url(), "--token-file", cp.agent_token_file(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = nymph(args);
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    return one_object(r);
  }

  // The control plane's row for worker `label`, once it has one whose status satisfies `want` (bounded).
  // The control plane is another process: its state can only be observed by asking it.
  template <class Want>
  json::object worker(const ControlServer& cp, const std::string& label, Want want) {
    json::object found;
    for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
      auto r = cp.admin({"workers", "--json"});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      auto list = one_object(r);
      for (const auto& w : list["workers"].as_array())
        if (str(w.as_object(), "label") == label) found = w.as_object();
      if (!found.empty() && want(str(found, "status"))) return found;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "worker " << label << " never reached the wanted status: " << json::serialize(found) << "\n"
                  << cp.log();
    return found;
  }

  fs::path home_;
  std::string old_home_;
};

}  // namespace

TEST_F(InstallE2E, DefaultInstallRegistersAndKillReportsSigterm) {
  ControlServer cp({.poll_timeout = "500ms"});
  auto o = install(cp, {"--tag", "site=lab"});
  std::string id = str(o, "launchId"), label = str(o, "workerLabel");
  EXPECT_EQ(label, short_hostname() + "-" + id);
  auto w = worker(cp, label, [](const std::string& s) { return s != "gone"; });
  EXPECT_EQ(str(w, "launchId"), id);
  EXPECT_EQ(str(w, "backend"), "local");
  EXPECT_EQ(w.at("tags").as_object().at("site"), "lab");
  const auto& runners = w.at("runners").as_array();
  EXPECT_NE(std::find(runners.begin(), runners.end(), json::value("process")), runners.end());
  if (::access("/usr/bin/sbatch", X_OK) == 0) {
    EXPECT_NE(std::find(runners.begin(), runners.end(), json::value("slurm")), runners.end());
    EXPECT_EQ(w.at("tags").as_object().at("host"), "slurm");
  }

  auto k = nymph({"kill", label});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_NE(k.out.find("exitReason: sigterm"), std::string::npos) << k.out;
  w = worker(cp, label, [](const std::string& s) { return s == "gone"; });
  EXPECT_EQ(str(w, "exitReason"), "sigterm");
}

TEST_F(InstallE2E, ControlPlaneKillIsRecordedAsKilled) {
  ControlServer cp({.poll_timeout = "500ms"});
  auto o = install(cp, {"--label", "e2e"});
  std::string id = str(o, "launchId"), label = str(o, "workerLabel");
  auto w = worker(cp, label, [](const std::string& s) { return s != "gone"; });
  ASSERT_EQ(cp.admin({"kill", str(w, "id")}).exit_code, 0);
  w = worker(cp, label, [](const std::string& s) { return s == "gone"; });
  EXPECT_EQ(str(w, "exitReason"), "killed");

  // The daemon has reported its exit; `nymph kill` now finds it stopped and prints the recorded reason.
  CommandOutput k;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
    k = nymph({"kill", id, "--json"});
    if (one_object(k)["wasRunning"] == false) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(k.exit_code, 0) << k.err;
  EXPECT_EQ(one_object(k)["exitReason"], "killed") << k.out;
}

TEST_F(InstallE2E, TwoInstallsRegisterAsTwoWorkers) {
  ControlServer cp({.poll_timeout = "500ms"});
  // Two managers at once are two identities: one cluster each.
  auto a = install(cp, {"--label", "twin", "--cluster", "one"});
  auto second = cp.create_token("agent");
  auto r = nymph({"install", "--server", cp.url(), "--token-stdin", "--label", "twin", "--json", "--cluster", "two"},
                 second + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto b = one_object(r);
  auto wa = worker(cp, str(a, "workerLabel"), [](const std::string& s) { return s != "gone"; });
  auto wb = worker(cp, str(b, "workerLabel"), [](const std::string& s) { return s != "gone"; });
  EXPECT_NE(str(wa, "id"), str(wb, "id"));
  EXPECT_EQ(str(wa, "launchId"), str(a, "launchId"));
  EXPECT_EQ(str(wb, "launchId"), str(b, "launchId"));
  for (const auto& o : {a, b}) {
    auto k = nymph({"kill", str(o, "launchId")});
    EXPECT_EQ(k.exit_code, 0) << k.err;
    EXPECT_EQ(str(worker(cp, str(o, "workerLabel"), [](const std::string& s) { return s == "gone"; }), "exitReason"),
              "sigterm");
  }
}
