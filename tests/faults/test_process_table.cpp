// The fault suites' process-table sampler: what counts as one copy of a job.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "tests/faults/process_table.hpp"

namespace {

using namespace std::chrono_literals;
using nymph::faults::copies_among;
using nymph::faults::parse_proc_stat;
using nymph::faults::processes_with;

TEST(ProcessTable, AMarkedChildOfAMarkedProcessIsPartOfItsParentsCopy) {
  // 4294 is a LeakSanitizer clone of 4264 (the shape CI saw); 5000 is a second copy under another parent.
  EXPECT_EQ(copies_among({{4264, 4262}, {4294, 4264}}), (std::set<int>{4264}));
  EXPECT_EQ(copies_among({{4264, 4262}, {4294, 4264}, {5000, 1}}), (std::set<int>{4264, 5000}));
}

TEST(ProcessTable, StatLinesGiveTheParentAndZombieStateEvenWhenTheCommandNameHasParentheses) {
  auto live = parse_proc_stat("4264 (nymph-test-chil) R 4262 4262 4257 0 -1");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->ppid, 4262);
  EXPECT_FALSE(live->zombie);
  auto odd = parse_proc_stat("77 (a) b (c)) Z 12 77 77");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->ppid, 12);
  EXPECT_TRUE(odd->zombie);
  EXPECT_FALSE(parse_proc_stat(""));  // the process was gone when its stat was read
  EXPECT_FALSE(parse_proc_stat("12 (x"));
}

// Real processes: a marked bash with a marked subshell (a fork that does not exec keeps the argv) is one copy; a
// second marked bash is a second copy.
TEST(ProcessTable, RealProcessesAMarkedShellAndItsSubshellAreOneCopyATwinIsTwo) {
  const std::string marker = "nymph-process-table-" + std::to_string(::getpid());
  auto spawn_marked = [&](const char* script) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      // bash -c SCRIPT NAME ARG: the marker is bash's last argument, and its subshells'.
      ::execlp("bash", "bash", "-c", script, "name", marker.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  pid_t first = spawn_marked("(while :; do sleep 30; done) & wait");
  // Once the subshell is there (a second marked process: a child of `first` with the same argv), the two are
  // one copy.
  auto subshell_is_up = [&] {
    auto marked = nymph::faults::marked_processes(marker);
    return marked.size() == 2 && std::any_of(marked.begin(), marked.end(), [&](auto p) { return p.second == first; });
  };
  ASSERT_TRUE(nymph::faults::wait_until(subshell_is_up, 10s));
  EXPECT_EQ(processes_with(marker), std::set<int>{first});
  pid_t twin = spawn_marked("while :; do sleep 30; done");
  EXPECT_TRUE(nymph::faults::wait_until([&] { return processes_with(marker) == std::set<int>{first, twin}; }, 10s));
  for (pid_t pid : {first, twin}) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

}  // namespace
