// Fault (f) with a Slurm job (the lab; runs as the lab user): nymph-control is SIGKILLed while an sbatch job
// runs under a short lease TTL and stays down for 2 x leaseTtl. The agent gives the lease up after ttl - margin
// without renewal and scancels the Slurm job before the server could re-queue it; when the server is back it
// reports the attempt lost/leaseExpired, and the job completes on its second attempt (a second sbatch). At no
// sampled instant do two copies run (the job's marker in the process table: the lab's node is this machine), and
// Slurm's accounting agrees: the job's two sbatch records (by name) never overlap in time.
#include <gtest/gtest.h>

#include <unistd.h>

#include <iostream>
#include <sstream>
#include <vector>

#include <boost/json.hpp>

#include "tests/faults/process_table.hpp"
#include "tests/support/agent_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/control_server.hpp"

namespace {

using namespace nymph::test;
using namespace std::chrono_literals;
namespace json = boost::json;

// One sacct record of a job: its state and its start and end in epoch seconds.
struct SlurmRecord {
  std::string state;
  long long start = 0, end = 0;
};

// The records of the Slurm jobs named `name` (this test's job only: other suites may use the lab meanwhile),
// once `expected` of them are there and every one has ended (slurmdbd may hear of the second job after the control
// plane saw it succeed); what was there when the bound passed otherwise.
std::vector<SlurmRecord> ended_records(const std::string& name, std::size_t expected) {
  std::vector<SlurmRecord> out;
  nymph::faults::wait_until(
      [&] {
        out.clear();
        auto r = run_command({"env", "SLURM_TIME_FORMAT=%s", "sacct", "-X", "-n", "-P", "-o", "State,Start,End",
                              "--name=" + name, "-S", "now-1hours"});
        std::istringstream in(r.out);
        for (std::string line; std::getline(in, line);) {
          auto a = line.find('|'), b = line.rfind('|');
          if (a == std::string::npos || a == b) continue;
          SlurmRecord rec{line.substr(0, a), 0, 0};
          try {
            rec.start = std::stoll(line.substr(a + 1, b - a - 1));
            rec.end = std::stoll(line.substr(b + 1));
          } catch (const std::exception&) {
            return false;  // Unknown: not ended yet
          }
          out.push_back(rec);
        }
        return out.size() >= expected;  // slurmdbd records each job when it hears of it: wait for all of them
      },
      60s);
  return out;
}

TEST(LeaseOutageSlurm, ASlurmJobIsScancelledWithinTheLeaseWindowNeverTwoCopiesReportedOnceCompletedOnRetry) {
  constexpr auto ttl = 12s;  // window: 12 s - max(5 s, 2 s) = 7 s
  ControlServer cp({.poll_timeout = "2s", .lease_ttl = "12s"});
  AgentOptions options;
  options.max_process_jobs = 1;
  options.kill_grace = "1s";
  options.slurm_toml = "enabled = true\npoll_interval = \"1s\"\npartition = \"debug\"\n";
  AgentProcess agent(cp, options);
  agent.wait_for_state("serving");

  const std::string marker = "nymph-fault-f-" + std::to_string(::getpid());
  // Attempt 1 would run for 5 minutes; attempt 2 finishes in 2 s. The marker is in the job's own argv.
  const std::string child = NYMPH_TEST_CHILD;
  // The first copy leaves a flag file (the Slurm job's environment need not carry NYMPH_ATTEMPT through).
  const std::string flag = "/tmp/" + marker + ".first";
  ::unlink(flag.c_str());
  const std::string cmd = "if [ ! -e " + flag + " ]; then touch " + flag + "; exec " + child +
                          " --sleep 300000 --exit 0 " + marker + "; else exec " + child + " --sleep 2000 --exit 0 " +
                          marker + "; fi";
  nymph::faults::CopySampler copies(marker);
  auto id = submit(cp, {"--runner", "slurm", "--max-attempts", "3", "--timeout", "10m", "--command", cmd});
  ASSERT_TRUE(nymph::faults::wait_until([&] { return copies.now() == 1; }, 120s)) << agent.log();
  wait_for_job(cp, id, [](const std::string& j) { return j.find("\"state\":\"running\"") != std::string::npos; });

  const auto down_at = std::chrono::steady_clock::now();
  cp.kill9();
  // The agent's side of the lease runs out ~7 s after its last renewal: the first copy is killed while the
  // server is still down.
  ASSERT_TRUE(nymph::faults::wait_until([&] { return copies.now() == 0; }, 20s)) << agent.log();
  std::cout << "copy gone " << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - down_at).count()
            << " ms after the control plane went down (lease window 7 s)\n";
  const auto killed_after = std::chrono::steady_clock::now() - down_at;
  EXPECT_LT(killed_after, ttl) << "killed before the server's own lease clock could have re-queued the job";
  // The outage lasts 2 x leaseTtl (the fault itself, not a synchronisation).
  std::this_thread::sleep_until(down_at + 2 * ttl);
  EXPECT_EQ(copies.now(), 0);
  cp.restart();

  auto done = wait_for_job(cp, id, [](const std::string& j) { return job_state(j) == "succeeded"; }, 180s);
  EXPECT_LE(copies.max_at_once(), 1) << "two copies of the job ran at once:\n" << copies.worst();
  auto job = json::parse(done).as_object();
  if (auto it = job.find("job"); it != job.end()) job = it->value().as_object();
  const auto& attempts = job.at("attempts").as_array();
  ASSERT_GE(attempts.size(), 2u) << done;
  const auto& first = attempts[0].as_object();
  EXPECT_EQ(first.at("state").as_string(), "lost") << done;
  EXPECT_NE(std::string(first.at("message").as_string()).find("could not renew the lease"), std::string::npos) << done;
  EXPECT_EQ(attempts.back().as_object().at("state").as_string(), "succeeded") << done;
  int finals_of_attempt_1 = 0;
  for (const auto& e : job.at("events").as_array()) {
    const auto& o = e.as_object();
    std::string state(o.at("state").as_string());
    if (o.at("attempt").as_int64() == 1 && state != "running" && state != "pending") ++finals_of_attempt_1;
  }
  EXPECT_EQ(finals_of_attempt_1, 1) << done;
  EXPECT_NE(agent.log().find("not renewed for 7 s"), std::string::npos) << agent.log();

  // Slurm's own account: two sbatch jobs for the two attempts, the first cancelled, and the second started only
  // after the first ended.
  auto records = ended_records("nymph-" + id, 2);
  ASSERT_EQ(records.size(), 2u) << "sacct records of nymph-" << id;
  EXPECT_EQ(records[0].state.rfind("CANCELLED", 0), 0u) << records[0].state;
  EXPECT_EQ(records[1].state, "COMPLETED");
  EXPECT_GE(records[1].start, records[0].end) << "the two Slurm jobs of nymph-" << id << " overlapped";
  ::unlink(flag.c_str());
}

}  // namespace
