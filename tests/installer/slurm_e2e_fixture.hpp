#pragma once
// The fixture of the `nymph install --slurm` lab tests: a private HOME for the unprivileged lab user, `nymph` run as
// that user, an install against a real nymph-control, and the worker rows of the launch.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/agent_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/files.hpp"
#include "tests/support/json_output.hpp"

namespace nymph::test {

inline constexpr const char* kLabUser = "nymphci";

class InstallSlurmE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    const passwd* pw = ::getpwnam(kLabUser);
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    char tmpl[] = "/tmp/nymph-slurm-e2e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    ASSERT_EQ(::chmod(home_.c_str(), 0755), 0);
    ASSERT_EQ(::chown(home_.c_str(), uid_, gid_), 0);
  }

  void TearDown() override {
    if (!local_launch_.empty()) nymph({"kill", local_launch_, "--timeout", "60"});  // a failed test's manager
    if (!id_.empty()) run_as(kLabUser, {"scancel", "--name=lakeshore-nymph-" + id_});
    std::filesystem::remove_all(home_);
  }

  CommandOutput nymph(std::vector<std::string> args) {
    args.insert(args.begin(), {"env", "HOME=" + home_.native(), NYMPH_BINARY});
    return run_as(kLabUser, args);
  }

  // Installs a --slurm launch against `cp` as the lab user; returns install's JSON object.
  boost::json::object install(const ControlServer& cp, std::vector<std::string> extra) {
    auto tok = home_ / "tok";
    std::ofstream(tok) << cp.agent_token() << "\n";
    EXPECT_EQ(::chown(tok.c_str(), uid_, gid_), 0);
    EXPECT_EQ(::chmod(tok.c_str(), 0600), 0);
    std::vector<std::string> args{"install",           "--server", cp.url(), "--token-file",
                                  tok.native(),        "--label",  "alloc",  "--slurm",
                                  "--slurm-partition", partition_, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = nymph(args);
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    auto o = one_object(r);
    id_ = str(o, "launchId");
    return o;
  }

  // The worker row of launch `id_` once its status satisfies `want` (bounded; Slurm schedules when it does).
  template <class Want>
  boost::json::object worker(const ControlServer& cp, Want want,
                             std::chrono::seconds bound = std::chrono::seconds(120)) {
    boost::json::object found;
    for (auto deadline = std::chrono::steady_clock::now() + bound; std::chrono::steady_clock::now() < deadline;) {
      auto list = one_object(cp.admin({"workers", "--json"}));
      for (const auto& w : list["workers"].as_array())
        if (str(w.as_object(), "launchId") == id_) found = w.as_object();
      if (!found.empty() && want(str(found, "status"))) return found;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    auto log = home_ / ".local" / "share" / ("nymph-" + id_ + ".log");
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    ADD_FAILURE() << "worker of launch " << id_ << ": " << boost::json::serialize(found) << "\nlog:\n" << text.str();
    return found;
  }

  // A site fragment (one key the options do not set), readable by the lab user.
  std::filesystem::path write_fragment() {
    auto p = home_ / "site.toml";
    std::ofstream(p) << "[runners.slurm]\npoll_interval = \"1s\"\n";
    EXPECT_EQ(::chown(p.c_str(), uid_, gid_), 0);
    return p;
  }

  std::filesystem::path home_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string id_;
  std::string partition_ = "debug";  // of the launch's allocations
  std::string local_launch_;         // a login-node manager to stop in TearDown
};

}  // namespace nymph::test
