// Fault (e), issue 15 point 3: a `nymph run` inside a Slurm allocation (backend slurm) runs two process jobs,
// one of which ignores SIGTERM, with the lab at Slurm's default KillWait of 30 s (reconfigured by the test and
// restored afterwards). `scancel` of the allocation: the worker row reads gone/sigterm within KillWait (before
// Slurm's SIGKILL), both jobs are re-queued (attempt 1 lost, the worker stopping: not the jobs' failure) and a
// second, plain `nymph run` finishes them. Runs as root (to reconfigure the lab); the allocation's daemon and
// sbatch/scancel run as the lab user.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/faults/process_table.hpp"
#include "tests/support/agent_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/json_output.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kUser = "nymphci";
const fs::path kSlurmConf = "/var/lib/nymph-slurm-lab/etc/slurm.conf";

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<int> lab_kill_wait() {
  auto r = run_command({"scontrol", "show", "config"});
  std::smatch m;
  static const std::regex re(R"(KillWait\s*=\s*(\d+))");
  if (r.exit_code != 0 || !std::regex_search(r.out, m, re)) return std::nullopt;
  return std::stoi(m[1]);
}

// Sets the lab's KillWait for the test's lifetime and restores the file (and `scontrol reconfigure`s) at the
// end, whatever happens in between.
class LabKillWait {
 public:
  explicit LabKillWait(int seconds) : original_(read_text(kSlurmConf)) {
    std::string changed = std::regex_replace(original_, std::regex(R"(\nKillWait=\d+)"),
                                             "\nKillWait=" + std::to_string(seconds));
    write(changed);
  }
  ~LabKillWait() { write(original_); }
  bool ok() const { return ok_; }

 private:
  void write(const std::string& text) {
    {
      std::ofstream out(kSlurmConf.string() + ".fault-e", std::ios::trunc);
      out << text;
    }
    ::chmod((kSlurmConf.string() + ".fault-e").c_str(), 0644);
    fs::rename(kSlurmConf.string() + ".fault-e", kSlurmConf);
    ok_ = run_command({"scontrol", "reconfigure"}).exit_code == 0;
  }
  std::string original_;
  bool ok_ = false;
};

json::object job_object(const std::string& text) {
  auto o = json::parse(text).as_object();
  if (auto it = o.find("job"); it != o.end()) return it->value().as_object();
  return o;
}

class ScancelAllocation : public ::testing::Test {
 protected:
  void SetUp() override {
    const passwd* pw = ::getpwnam(kUser);
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    char tmpl[] = "/tmp/nymph-fault-e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    ASSERT_EQ(::chown(dir_.c_str(), uid_, gid_), 0);
    name_ = "nymph-fault-e-" + std::to_string(::getpid());
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "--- allocation agent.log ---\n" << read_text(dir_ / "agent.log") << read_text(dir_ / "slurm.out");
      std::cerr << run_command({"ps", "-u", kUser, "-o", "pid,ppid,pgid,stat,args"}).out;
    }
    run_as(kUser, {"scancel", "--name=" + name_});
    fs::remove_all(dir_);
  }

  void own(const fs::path& p, mode_t mode) {
    ASSERT_EQ(::chown(p.c_str(), uid_, gid_), 0);
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
  }

  // sbatch, as the lab user, of a `nymph run` in `dir_` against `cp`; returns the Slurm job id.
  std::string submit_allocation(const ControlServer& cp) {
    std::ofstream(dir_ / "token") << cp.agent_token() << "\n";
    own(dir_ / "token", 0600);
    std::ofstream(dir_ / "config.toml") << "[server]\nurl = \"" << cp.url() << "\"\ntoken_file = \"token\"\n"
                                        << "[worker]\nlabel = \"" << name_ << "\"\nwork_dir = \"work\"\n"
                                        << "max_process_jobs = 4\ndrain_grace = \"60s\"\n"
                                        << "[runners.process]\nkill_grace = \"10s\"\n"
                                        << "[runners.slurm]\nenabled = false\n"
                                        << "[log]\nlevel = \"debug\"\nfile = \"agent.log\"\n";
    own(dir_ / "config.toml", 0644);
    auto r = run_as(kUser, {"sbatch", "--parsable", "--job-name=" + name_, "--partition=debug", "--time=10",
                            "--chdir=" + dir_.string(), "--output=" + (dir_ / "slurm.out").string(),
                            "--wrap=exec " + std::string(NYMPH_BINARY) + " run --config config.toml"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
    return id;
  }

  // The worker row labelled `label` once `want(status)` holds (bounded: Slurm schedules when it does).
  template <class Want>
  json::object worker(const ControlServer& cp, const std::string& label, Want want, std::chrono::seconds bound) {
    json::object found;
    for (auto deadline = std::chrono::steady_clock::now() + bound; std::chrono::steady_clock::now() < deadline;) {
      auto list = one_object(cp.admin({"workers", "--json"}));
      for (const auto& w : list["workers"].as_array())
        if (str(w.as_object(), "label") == label) found = w.as_object();
      if (!found.empty() && want(str(found, "status"))) return found;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "worker " << label << ": " << json::serialize(found);
    return found;
  }

  fs::path dir_;
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

TEST_F(ScancelAllocation, ScancelAtKillWait30IsGoneSigtermAndBothJobsAreRequeuedAndFinishedElsewhere) {
  LabKillWait kill_wait(30);
  ASSERT_TRUE(kill_wait.ok());
  ASSERT_EQ(lab_kill_wait(), 30);

  ControlServer cp({.poll_timeout = "2s"});
  std::string slurm_job = submit_allocation(cp);
  auto w = worker(cp, name_, [](const std::string& s) { return s == "active"; }, 120s);
  ASSERT_EQ(str(w, "backend"), "slurm") << json::serialize(w);

  // Attempt 1 of each runs for minutes (B ignoring SIGTERM); attempt 2 ends at once. A timeout: inside an
  // allocation a process job must be known to fit before the walltime.
  const std::string child = NYMPH_TEST_CHILD;
  const std::string mark_a = name_ + "-polite", mark_b = name_ + "-stubborn";
  auto polite = submit(cp, {"--max-attempts", "2", "--timeout", "5m", "--command",
                            "if [ \"$NYMPH_ATTEMPT\" = 1 ]; then exec " + child + " --sleep 300000 --exit 0 " + mark_a +
                                "; fi; exit 0"});
  auto stubborn = submit(cp, {"--max-attempts", "2", "--timeout", "5m", "--command",
                              "if [ \"$NYMPH_ATTEMPT\" = 1 ]; then exec " + child + " --ignore-term --sleep 300000 --exit 0 " +
                                  mark_b + "; fi; exit 0"});
  ASSERT_TRUE(nymph::faults::wait_until(
      [&] { return nymph::faults::processes_with(mark_a).size() == 1 && nymph::faults::processes_with(mark_b).size() == 1; },
      60s));

  const auto cancelled_at = std::chrono::steady_clock::now();
  auto c = run_as(kUser, {"scancel", slurm_job});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  w = worker(cp, name_, [](const std::string& s) { return s == "gone"; }, 60s);
  const auto gone_after = std::chrono::steady_clock::now() - cancelled_at;
  EXPECT_EQ(str(w, "exitReason"), "sigterm") << json::serialize(w);
  EXPECT_LT(gone_after, 30s) << "gone within KillWait, before Slurm's SIGKILL";
  std::cout << "worker gone " << std::chrono::duration_cast<std::chrono::milliseconds>(gone_after).count()
            << " ms after scancel (KillWait 30 s)\n";
  // Both copies are gone, the stubborn one killed by the agent within its budget (min(30, KillWait - 3) = 27 s).
  EXPECT_TRUE(nymph::faults::wait_until(
      [&] { return nymph::faults::processes_with(mark_a).empty() && nymph::faults::processes_with(mark_b).empty(); },
      30s));

  for (const auto& id : {polite, stubborn}) {
    auto text = wait_for_job(cp, id, [](const std::string& j) { return job_state(j) == "queued"; }, 30s);
    auto job = job_object(text);
    const auto& attempts = job.at("attempts").as_array();
    ASSERT_EQ(attempts.size(), 1u) << text;
    const auto& first = attempts[0].as_object();
    EXPECT_EQ(first.at("state").as_string(), "lost") << text;
    EXPECT_NE(std::string(first.at("message").as_string()).find("the worker is going away"), std::string::npos) << text;
  }
  auto log = read_text(dir_ / "agent.log");
  EXPECT_EQ(log.find("not delivered before the exit deadline"), std::string::npos) << log;
  EXPECT_NE(log.find("exiting within 27000 ms"), std::string::npos) << log;

  // A second worker (a plain `nymph run`) takes both jobs and finishes them.
  AgentProcess second(cp, {.label = name_ + "-second"});
  second.wait_for_state("serving");
  for (const auto& id : {polite, stubborn}) {
    auto text = wait_for_job(cp, id, [](const std::string& j) { return job_state(j) == "succeeded"; }, 60s);
    auto job = job_object(text);
    const auto& attempts = job.at("attempts").as_array();
    ASSERT_EQ(attempts.size(), 2u) << text;
    EXPECT_EQ(attempts[1].as_object().at("state").as_string(), "succeeded") << text;
    EXPECT_NE(attempts[1].as_object().at("workerId"), attempts[0].as_object().at("workerId")) << text;
  }
}

}  // namespace
