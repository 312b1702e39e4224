// Fault injection at the manager's lifecycle seams (issue 15, cases a-d), on the lab cluster with a real
// nymph-control, real `nymph install` / `nymph run` daemons and real signals. The binary runs as the lab user
// (ctest starts it through `runuser -u nymphci --`), so the managers, their sbatch jobs and the journals belong
// to that user, as on a login node.
//
// Each case puts 5 sbatch jobs in flight (2 CPUs in the lab: some running, some pending), then replaces the
// manager, and checks that every job ends `succeeded` with exactly one attempt and one final event, that Slurm
// ran each job exactly once (one sacct record per job name) and cancelled none:
//   (a) SIGTERM of the manager (`nymph kill`), then a new `nymph install`;
//   (b) SIGKILL of the manager, then a new `nymph install`;
//   (c) a `nymph run` whose config pins no launch id, SIGKILLed and started again (systemd's Restart=);
//   (d) a second `nymph install` of the identity is refused naming the holder; `--replace` hands over.
// Only this test's jobs are counted (by their names, nymph-<job id>): other suites may use the lab meanwhile.
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/agent_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/files.hpp"
#include "tests/support/json_output.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;

namespace {

constexpr int kJobs = 5;

// True while `pid` exists and is not a zombie.
bool running(int pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Polls `done` every 100 ms until it holds or `bound` passes (the lab and the control plane have no "wait until"
// call); false on timeout.
template <class F>
bool eventually(F done, std::chrono::milliseconds bound) {
  for (auto deadline = std::chrono::steady_clock::now() + bound; !done();) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

json::object job(const ControlServer& cp, const std::string& id) {
  auto r = cp.admin({"job", id, "--json"});
  boost::system::error_code ec;
  auto v = json::parse(r.out, ec);
  if (ec || !v.is_object()) return {};
  auto& o = v.as_object();
  if (auto* j = o.if_contains("job"); j && j->is_object()) {
    json::object out = j->as_object();
    for (const char* k : {"attempts", "events"})
      if (auto* x = o.if_contains(k)) out[k] = *x;
    return out;
  }
  return o;
}

std::string field(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

class ManagerHandover : public ::testing::Test {
 protected:
  void SetUp() override {
    ::umask(022);
    ::chmod(home_.path().c_str(), 0755);  // the lab's slurmd runs the jobs in directories under it
    if (const char* h = std::getenv("HOME")) old_home_ = h;
    ::setenv("HOME", home_.path().c_str(), 1);
    ::unsetenv("XDG_DATA_HOME");  // the identity's state directory follows HOME
    token_ = home_.path() / "tok";
    std::ofstream(token_) << cp_.agent_token() << "\n";
    ::chmod(token_.c_str(), 0600);
    started_ = std::chrono::system_clock::now() - 5s;
  }

  void TearDown() override {
    auto list = one_object(nymph({"launches", "--json"}));
    if (list.contains("launches"))
      for (const auto& l : list["launches"].as_array())
        if (l.at("state") == "running") nymph({"kill", std::string(l.at("launchId").as_string()), "--timeout", "30"});
    if (!jobs_.empty()) run_command({"scancel", "--name=" + slurm_names()});
    ::setenv("HOME", old_home_.c_str(), 1);
  }

  CommandOutput nymph(std::vector<std::string> args) {
    args.insert(args.begin(), NYMPH_BINARY);
    return run_command(args);
  }

  // `nymph install` of a manager against the control plane, as this user; the JSON it printed.
  CommandOutput install(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"install", "--server", cp_.url(), "--token-file", token_.native(), "--label",
                                  "fault", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return nymph(args);
  }

  json::object install_ok(std::vector<std::string> extra = {}) {
    auto r = install(std::move(extra));
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    return one_object(r);
  }

  // The worker row of launch `launch`, once `want(status)` holds.
  json::object worker(const std::string& launch, const std::function<bool(const std::string&)>& want,
                      std::chrono::seconds bound = 60s) {
    json::object found;
    eventually(
        [&] {
          auto list = one_object(cp_.admin({"workers", "--json"}));
          for (const auto& w : list["workers"].as_array())
            if (field(w.as_object(), "launchId") == launch) found = w.as_object();
          return !found.empty() && want(field(found, "status"));
        },
        bound);
    EXPECT_FALSE(found.empty()) << "no worker of launch " << launch;
    return found;
  }

  // Submits kJobs short Slurm jobs (10 s of sleep each: every one must still be running when the manager is
  // replaced, some seconds after the first started; with 3 s the first could end first once a submission to an
  // idle manager was leased at once).
  void submit_jobs() {
    for (int i = 0; i < kJobs; ++i)
      jobs_.push_back(submit(cp_, {"--runner", "slurm", "--slurm-option", "partition=debug", "--max-attempts", "2",
                                   "--", "/bin/sleep", "10"}));
  }

  // Waits until every job was submitted to Slurm (its attempt carries a Slurm job id: journaled) and returns
  // the Slurm ids.
  std::map<std::string, std::string> wait_in_flight() {
    std::map<std::string, std::string> slurm_ids;
    bool ok = eventually(
        [&] {
          for (const auto& id : jobs_) {
            if (slurm_ids.contains(id)) continue;
            auto j = job(cp_, id);
            if (auto* a = j.if_contains("attempts"); a && a->is_array() && !a->as_array().empty()) {
              auto s = field(a->as_array().back().as_object(), "slurmJobId");
              if (!s.empty()) slurm_ids[id] = s;
            }
          }
          return slurm_ids.size() == jobs_.size();
        },
        60s);
    EXPECT_TRUE(ok) << "only " << slurm_ids.size() << " of " << jobs_.size() << " jobs reached Slurm";
    return slurm_ids;
  }

  // Every job ends succeeded, with one attempt, one final event, and that attempt on worker `worker_id` (the
  // manager that took over).
  void expect_each_reported_once(const std::string& worker_id, std::chrono::seconds bound = 120s) {
    for (const auto& id : jobs_) {
      std::string state;
      eventually(
          [&] {
            state = field(job(cp_, id), "state");
            return state == "succeeded" || state == "failed" || state == "cancelled" || state == "lost";
          },
          bound);
      auto j = job(cp_, id);
      EXPECT_EQ(field(j, "state"), "succeeded") << json::serialize(j);
      ASSERT_TRUE(j.contains("attempts")) << json::serialize(j);
      EXPECT_EQ(j["attempts"].as_array().size(), 1u) << "the job ran again: " << json::serialize(j);
      EXPECT_EQ(j["attempt"].to_number<int>(), 1) << json::serialize(j);
      int finals = 0;
      for (const auto& e : j["events"].as_array()) {
        auto s = field(e.as_object(), "state");
        finals += s == "succeeded" || s == "failed" || s == "cancelled" || s == "lost";
      }
      EXPECT_EQ(finals, 1) << json::serialize(j);
      if (!worker_id.empty()) {
        EXPECT_EQ(field(j["attempts"].as_array()[0].as_object(), "workerId"), worker_id) << json::serialize(j);
      }
    }
  }

  // The Slurm job names this test's jobs can have: nymph-<id> when submitted alone, nymph-array-<id>-<attempt>
  // for a job array whose first task is one of them (a job submitted while another's sbatch was in flight).
  std::string slurm_names() const {
    std::string names;
    for (const auto& id : jobs_)
      for (const std::string& n : {"nymph-" + id, "nymph-array-" + id + "-1", "nymph-array-" + id + "-2"})
        names += (names.empty() ? "" : ",") + n;
    return names;
  }

  // Slurm's own account of this test's jobs: exactly one record for each job, the one of the Slurm id its attempt
  // carries (never a second copy, whether alone or as an array task), COMPLETED and never CANCELLED.
  void expect_slurm_ran_each_once() {
    std::set<std::string> expected;
    for (const auto& id : jobs_) {
      auto j = job(cp_, id);
      if (auto* a = j.if_contains("attempts"); a && a->is_array() && !a->as_array().empty())
        expected.insert(field(a->as_array().back().as_object(), "slurmJobId"));
    }
    EXPECT_EQ(expected.size(), jobs_.size()) << "each job's attempt carries a Slurm id of its own";
    std::map<std::string, std::vector<std::string>> states;  // Slurm id -> states of its records
    eventually(
        [&] {
          states.clear();
          auto r = run_command({"sacct", "-X", "-n", "-P", "-o", "JobID,State", "--name=" + slurm_names(), "-S",
                                "now-1hours"});
          std::istringstream in(r.out);
          for (std::string line; std::getline(in, line);) {
            auto bar = line.find('|');
            if (bar != std::string::npos) states[line.substr(0, bar)].push_back(line.substr(bar + 1));
          }
          for (const auto& id : expected) {
            auto it = states.find(id);
            if (it == states.end() || it->second.empty() || it->second.back() != "COMPLETED") return false;
          }
          return true;
        },
        30s);
    std::set<std::string> recorded;
    for (const auto& [id, s] : states) recorded.insert(id);
    EXPECT_EQ(recorded, expected) << "Slurm ran exactly the jobs the control plane heard of, no second copy";
    for (const auto& id : expected) {
      const auto& s = states[id];
      EXPECT_EQ(s.size(), 1u) << "Slurm job " << id << " has " << s.size() << " records";
      for (const auto& st : s) EXPECT_EQ(st.find("CANCELLED"), std::string::npos) << id << ": " << st;
      if (!s.empty()) {
        EXPECT_EQ(s.back(), "COMPLETED") << id;
      }
    }
  }

  // The log of launch `launch_id`, for failure messages.
  std::string log_of(const std::string& launch_id) {
    return read_file(home_.path() / ".local" / "share" / ("nymph-" + launch_id + ".log"));
  }

  ControlServer cp_{{.poll_timeout = "1s"}};
  TempDir home_{"nymph-faults"};
  std::string old_home_;
  fs::path token_;
  std::vector<std::string> jobs_;
  std::chrono::system_clock::time_point started_;
};

}  // namespace

// (a) SIGTERM: the manager detaches its Slurm jobs and exits; the next install adopts all of them.
TEST_F(ManagerHandover, SigtermedManagerHandsItsSlurmJobsToTheNextInstall) {
  auto first = install_ok();
  std::string first_launch = field(first, "launchId");
  worker(first_launch, [](const std::string& s) { return s == "active"; });
  submit_jobs();
  wait_in_flight();
  auto k = nymph({"kill", first_launch, "--timeout", "60", "--json"});
  ASSERT_EQ(k.exit_code, 0) << k.err << k.out;
  EXPECT_EQ(one_object(k)["exitReason"], "sigterm");

  auto second = install_ok();
  auto w = worker(field(second, "launchId"), [](const std::string& s) { return s == "active"; });
  expect_each_reported_once(field(w, "id"));
  expect_slurm_ran_each_once();
  if (HasFailure()) ADD_FAILURE() << "first:\n" << log_of(first_launch) << "second:\n" << log_of(field(second, "launchId"));
}

// (b) SIGKILL: nothing is reported at all by the first manager; its lease names a dead pid.
TEST_F(ManagerHandover, SigkilledManagerIsProvablyGoneAndTheNextInstallAdoptsItsJobs) {
  auto first = install_ok();
  std::string first_launch = field(first, "launchId");
  int pid = static_cast<int>(first["pid"].as_int64());
  worker(first_launch, [](const std::string& s) { return s == "active"; });
  submit_jobs();
  wait_in_flight();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return !running(pid); }, 10s));

  auto second = install_ok();
  auto w = worker(field(second, "launchId"), [](const std::string& s) { return s == "active"; });
  expect_each_reported_once(field(w, "id"));
  expect_slurm_ran_each_once();
  auto old = worker(first_launch, [](const std::string& s) { return s == "gone"; });
  EXPECT_EQ(field(old, "status"), "gone") << json::serialize(old);
  if (HasFailure()) ADD_FAILURE() << "first:\n" << log_of(first_launch) << "second:\n" << log_of(field(second, "launchId"));
}

// (c) systemd-style: the same `nymph run` config without a launch id, crashed (SIGKILL) and started again: a new
// launch id each start, the same identity, the jobs adopted.
TEST_F(ManagerHandover, RestartWithoutAPinnedLaunchIdAdoptsTheJobs) {
  AgentProcess agent(cp_, {.slurm_toml = "enabled = true\npoll_interval = \"1s\"\n", .label = "unit"});
  agent.wait_for_state("serving");
  auto first_launch = field(one_object(CommandOutput{0, agent.status_json(), ""}), "launchId");
  submit_jobs();
  wait_in_flight();
  agent.signal(SIGKILL);
  agent.wait_exit();
  fs::remove(fs::path(agent.dir()) / "status.json");  // the crashed run's "serving" must not count
  agent.start();
  agent.wait_for_state("serving");
  auto second_launch = field(one_object(CommandOutput{0, agent.status_json(), ""}), "launchId");
  EXPECT_NE(second_launch, first_launch);
  auto w = worker(second_launch, [](const std::string& s) { return s == "active"; });
  expect_each_reported_once(field(w, "id"));
  expect_slurm_ran_each_once();
  if (HasFailure()) ADD_FAILURE() << agent.log();
}

// (d) one manager per identity: a second install is refused naming the holder; --replace hands over.
TEST_F(ManagerHandover, SecondInstallIsRefusedAndReplaceHandsOverWithNothingLost) {
  auto first = install_ok();
  std::string first_launch = field(first, "launchId");
  int pid = static_cast<int>(first["pid"].as_int64());
  worker(first_launch, [](const std::string& s) { return s == "active"; });
  submit_jobs();
  wait_in_flight();

  auto refused = install();
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  auto e = one_object(refused);
  // The shared error object of every --json verb: {"error": {"code": ..., "message": ...}}.
  ASSERT_TRUE(e.contains("error") && e.at("error").is_object()) << refused.out;
  std::string message = field(e.at("error").as_object(), "message");
  EXPECT_NE(message.find("is already running: host "), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(pid) + " launch " + first_launch), std::string::npos) << message;
  EXPECT_TRUE(running(pid));

  auto second = install_ok({"--replace"});
  EXPECT_FALSE(running(pid));
  auto w = worker(field(second, "launchId"), [](const std::string& s) { return s == "active"; });
  expect_each_reported_once(field(w, "id"));
  expect_slurm_ran_each_once();
  auto old = worker(first_launch, [](const std::string& s) { return s == "gone"; });
  EXPECT_EQ(field(old, "exitReason"), "sigterm") << json::serialize(old);
  if (HasFailure()) ADD_FAILURE() << "first:\n" << log_of(first_launch) << "second:\n" << log_of(field(second, "launchId"));
}
