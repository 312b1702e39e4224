// docs/lakeshore.md exercised as lakeshore drives nymph: each command is ONE string run by `sh -c` (what
// `ssh host '<string>'` does on the login node), stdin a pipe (no TTY), and each prints exactly one JSON object
// on stdout, on success and on failure. A real nymph-control; a temporary HOME. The Slurm mapping is checked
// with --dry-run and a fake squeue (no Slurm cluster is touched: the real --slurm path is the lab's).
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/json_output.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;

namespace {

// Single-quotes `s` for sh, as lakeshore must when it builds its command string.
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class Lakeshore : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nymph-lakeshore-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    if (const char* h = std::getenv("HOME")) old_home_ = h;
    ::setenv("HOME", home_.c_str(), 1);
    ::unsetenv("XDG_DATA_HOME");
    nymph_ = q(NYMPH_BINARY);
  }

  void TearDown() override {
    auto list = one_object(sh(nymph_ + " launches --json"));
    for (const auto& l : list["launches"].as_array())
      if (l.at("state") == "running") sh(nymph_ + " kill " + q(std::string(l.at("launchId").as_string())) + " --json");
    ::setenv("HOME", old_home_.c_str(), 1);
    fs::remove_all(home_);
  }

  // One command string through `sh -c`, with `input` on its standard input (a pipe, never a TTY).
  static CommandOutput sh(const std::string& command, const std::string& input = {},
                          const std::string& path_prefix = {}) {
    std::vector<std::string> argv{"/bin/sh", "-c", command};
    if (!path_prefix.empty()) {
      const char* path = std::getenv("PATH");
      argv.insert(argv.begin(), {"/usr/bin/env", "PATH=" + path_prefix + ":" + (path ? path : "/usr/bin:/bin")});
    }
    return run_command(argv, input);
  }

  // stdout is exactly one JSON object followed by a newline; nothing else.
  static json::object only_object(const CommandOutput& r) {
    EXPECT_TRUE(!r.out.empty() && r.out.back() == '\n' && r.out.find('\n') == r.out.size() - 1)
        << "not one line: " << r.out;
    return one_object(r);
  }

  static json::object error_of(const CommandOutput& r) {
    auto o = only_object(r);
    EXPECT_TRUE(o.contains("error") && o.at("error").is_object()) << r.out;
    if (!o.contains("error") || !o.at("error").is_object()) return {};
    auto e = o.at("error").as_object();
    EXPECT_TRUE(e.contains("code") && e.at("code").is_string()) << r.out;
    EXPECT_TRUE(e.contains("message") && e.at("message").is_string()) << r.out;
    return e;
  }

  // `daemon list` until the launch's daemon has registered (its workerId is in status.json), bounded.
  json::object registered(const std::string& launch_id) {
    for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
      auto list = only_object(sh(nymph_ + " launches --json"));
      for (const auto& l : list["launches"].as_array())
        if (str(l.as_object(), "launchId") == launch_id && str(l.as_object(), "workerId") != "null")
          return l.as_object();
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "launch " << launch_id << " never registered";
    return {};
  }

  fs::path home_;
  std::string old_home_, nymph_;
};

}  // namespace

TEST_F(Lakeshore, DaemonInstallListKillByWorkerId) {
  ControlServer cp({.poll_timeout = "500ms"});
  const std::string& token = cp.agent_token();

  // daemon install <host>: the token on ssh's stdin, never in the command string.
  auto installed = sh(nymph_ + " install --server " + q(cp.url()) + " --token-stdin --json", token + "\n");
  ASSERT_EQ(installed.exit_code, 0) << installed.err << installed.out;
  auto o = only_object(installed);
  std::string launch_id = str(o, "launchId"), label = str(o, "workerLabel");
  EXPECT_EQ(str(o, "mode"), "local");
  EXPECT_NE(str(o, "logPath"), "null");

  // daemon list: launchId, state, workerId, workerLabel, mode, exitReason.
  auto l = registered(launch_id);
  std::string worker_id = str(l, "workerId");
  EXPECT_TRUE(worker_id.starts_with("wrk_")) << worker_id;
  EXPECT_EQ(str(l, "state"), "running");
  EXPECT_EQ(str(l, "workerLabel"), label);
  EXPECT_EQ(str(l, "exitReason"), "null");

  // The worker id lakeshore holds is the control plane's.
  auto workers = cp.admin({"workers", "--json"});
  EXPECT_NE(workers.out.find(worker_id), std::string::npos) << workers.out;

  // daemon kill <worker-id>: an unknown one is a notFound error object (exit 3); the real one stops it.
  auto unknown = sh(nymph_ + " kill wrk_00000000000000000000000000 --json");
  EXPECT_EQ(unknown.exit_code, 3) << unknown.out << unknown.err;
  EXPECT_EQ(str(error_of(unknown), "code"), "notFound");

  auto killed = sh(nymph_ + " kill " + q(worker_id) + " --json");
  ASSERT_EQ(killed.exit_code, 0) << killed.err << killed.out;
  auto k = only_object(killed);
  EXPECT_EQ(str(k, "launchId"), launch_id);
  EXPECT_EQ(str(k, "workerId"), worker_id);
  EXPECT_EQ(k.at("stopped"), true);
  EXPECT_EQ(str(k, "exitReason"), "sigterm");

  auto after = only_object(sh(nymph_ + " launches --json"))["launches"].as_array();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].at("state"), "exited");

  // Killing it again is not an error: it had already stopped.
  auto again = sh(nymph_ + " kill " + q(worker_id) + " --json");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(only_object(again).at("wasRunning"), false);
}

TEST_F(Lakeshore, SlurmInstallMapsPartitionAndTime) {
  // daemon install <host> --slurm --slurm-partition P (mode slurm.partition / slurm.walltime), as a dry run.
  auto r = sh(nymph_ +
                  " install --server https://cp.example:8443 --token-stdin --slurm --slurm-partition debug "
                  "--slurm-time 02:00:00 --dry-run --json",
              "tok\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto o = only_object(r);
  EXPECT_EQ(o.at("dryRun"), true);
  EXPECT_EQ(str(o, "mode"), "slurm");
  std::string script = str(o, "sbatchScript");
  EXPECT_NE(script.find("#SBATCH --partition=debug"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --time=02:00:00"), std::string::npos) << script;
  EXPECT_NE(str(o, "squeue"), "null");
  EXPECT_TRUE(fs::is_empty(home_)) << "a dry run writes nothing";

  // A refused value is one error object too.
  auto bad = sh(nymph_ + " install --server https://cp.example:8443 --token-stdin --slurm --slurm-qos 'a b' --json",
                "tok\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(str(error_of(bad), "code"), "installFailed");
}

TEST_F(Lakeshore, ProvidersInstancesIsSlurmJobs) {
  fs::path bin = home_ / "fakebin";
  fs::create_directories(bin);
  std::ofstream(bin / "squeue") << "#!/bin/sh\nif [ \"$2\" = --json ]; then echo '{\"jobs\":[]}'; exit 0; fi\nexit 0\n";
  fs::permissions(bin / "squeue", fs::perms::owner_all);
  auto none = sh(nymph_ + " slurm jobs --json", {}, bin.string());
  ASSERT_EQ(none.exit_code, 0) << none.err << none.out;
  EXPECT_EQ(only_object(none).at("jobs").as_array().size(), 0u);

  // "Could not ask" is not "no jobs".
  std::ofstream(bin / "squeue", std::ios::trunc)
      << "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n";
  auto down = sh(nymph_ + " slurm jobs --json", {}, bin.string());
  EXPECT_EQ(down.exit_code, 1);
  auto e = error_of(down);
  EXPECT_EQ(str(e, "code"), "slurmUnavailable");
  EXPECT_NE(str(e, "message").find("Unable to contact"), std::string::npos) << down.out;
}

TEST_F(Lakeshore, EveryVerbsRefusedCommandLineIsOneErrorObject) {
  for (std::string verb : {"install --json", "launches --json --bogus", "launches --json prune --bogus",
                           "kill --json", "slurm jobs --json --timeout abc", "probe --json --bogus",
                           "doctor --json --bogus"}) {
    auto r = sh(nymph_ + " " + verb);
    EXPECT_EQ(r.exit_code, 2) << verb << ": " << r.out << r.err;
    EXPECT_EQ(str(error_of(r), "code"), "usage") << verb;
  }
  // Without --json a refused command line keeps CLI11's text (and no stdout JSON).
  auto text = sh(nymph_ + " kill");
  EXPECT_NE(text.exit_code, 0);
  EXPECT_EQ(text.out.find('{'), std::string::npos) << text.out;
}

TEST_F(Lakeshore, ProbeAndDoctorPrintOneObject) {
  auto probe = sh(nymph_ + " probe --json");
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_TRUE(only_object(probe).contains("runners"));
  // A doctor whose checks fail still prints its one report (ok false), exit 1.
  auto doctor = sh(nymph_ + " doctor --json --config /nonexistent/config.toml --timeout 5");
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out << doctor.err;
  auto report = only_object(doctor);
  EXPECT_EQ(report.at("ok"), false);
  EXPECT_TRUE(report.at("checks").is_array());
}
