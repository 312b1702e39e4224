// A1/A2 with the real binaries (issue 15 points 3 and 4): a `nymph run` on a login node gets SIGTERM while its
// job ignores SIGTERM and the control plane hangs (SIGSTOPped: connections are accepted, nothing is answered).
// The daemon exits within [worker] stop_timeout (5 s here; 30 s by default, at most 35 s), kills the job on the
// way and names the event it could not deliver.
#include <signal.h>

#include <gtest/gtest.h>

#include <iostream>

#include "tests/faults/process_table.hpp"
#include "tests/support/agent_process.hpp"
#include "tests/support/control_server.hpp"

namespace {

using namespace nymph::test;
using namespace std::chrono_literals;

TEST(StopBudget, SigtermWithAHungControlPlaneAndAJobIgnoringSigtermExitsWithinStopTimeout) {
  ControlServer cp({.poll_timeout = "2s"});
  AgentOptions options;
  options.kill_grace = "10s";  // more than the budget leaves: the budget wins
  options.worker_toml = "stop_timeout = \"5s\"\n";
  AgentProcess agent(cp, options);
  agent.wait_for_state("serving");
  const std::string marker = "nymph-fault-budget-" + std::to_string(::getpid());
  auto id = submit(cp, {"--", NYMPH_TEST_CHILD, "--ignore-term", "--sleep", "300000", "--exit", "0", marker});
  ASSERT_TRUE(nymph::faults::wait_until([&] { return nymph::faults::processes_with(marker).size() == 1; }, 30s))
      << agent.log();
  wait_for_job(cp, id, [](const std::string& j) { return job_state(j) == "running"; });

  ASSERT_EQ(::kill(cp.pid(), SIGSTOP), 0);
  const auto signalled = std::chrono::steady_clock::now();
  agent.signal(SIGTERM);
  int status = agent.wait_exit(30s);
  const auto took = std::chrono::steady_clock::now() - signalled;
  ::kill(cp.pid(), SIGCONT);
  EXPECT_EQ(status, 143) << agent.log();
  EXPECT_LE(took, 5s + 1500ms) << agent.log();
  std::cout << "exited " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after SIGTERM (stop_timeout 5 s)\n";
  EXPECT_TRUE(nymph::faults::processes_with(marker).empty()) << "the job ignoring SIGTERM was killed";
  auto log = agent.log();
  EXPECT_NE(log.find("not delivered before the exit deadline"), std::string::npos) << log;
  EXPECT_NE(log.find("could not report the exit"), std::string::npos) << log;
}

}  // namespace
