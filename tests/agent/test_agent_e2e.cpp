// The agent end to end: a real `nymph run` against a real `nymph-control` over loopback, real child
// processes and signals.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "tests/support/agent_process.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/json_output.hpp"
#include "tests/support/files.hpp"

namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;

namespace {

json::object only_worker(const ControlServer& cp) {
  auto r = cp.admin({"workers", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto v = json::parse(r.out);
  auto& list = v.as_object().at("workers").as_array();
  EXPECT_EQ(list.size(), 1u) << r.out;
  return list.at(0).as_object();
}

std::string logs(const ControlServer& cp, const std::string& id, const std::string& stream = "stdout") {
  auto r = cp.admin({"logs", id, "--stream", stream});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

std::set<int> pids_in(const std::string& file) {
  std::set<int> pids;
  std::ifstream in(file);
  int p;
  while (in >> p) pids.insert(p);
  return pids;
}

bool alive(int pid) {
  // A zombie still "exists" for kill(); read its state instead.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] != 'Z';
}

bool final_state(const std::string& job_json) {
  auto s = job_state(job_json);
  return s == "succeeded" || s == "failed" || s == "cancelled" || s == "lost";
}

const std::string kChild = NYMPH_TEST_CHILD;

}  // namespace

TEST(AgentE2E, RunsAJobAndStopsOnSigtermAsGone) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto w = only_worker(cp);
  EXPECT_EQ(str(w, "label"), "e2e");
  EXPECT_EQ(str(w, "backend"), "local");

  auto id = submit(cp, {"--", kChild, "--text", "--write", "100", "--write-err", "7", "--exit", "0"});
  auto done = wait_for_job(cp, id, final_state);
  EXPECT_EQ(job_state(done), "succeeded") << done << agent.log();
  std::string expected;  // the helper's text mode: 'a'+pos%26, a newline every 64th byte
  for (int pos = 0; pos < 100; ++pos) expected.push_back(pos % 64 == 63 ? '\n' : static_cast<char>('a' + pos % 26));
  EXPECT_EQ(logs(cp, id), expected);
  EXPECT_EQ(logs(cp, id, "stderr"), "abcdefg");

  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait_exit(), 143) << agent.log();
  w = only_worker(cp);
  EXPECT_EQ(str(w, "status"), "gone");
  EXPECT_EQ(str(w, "exitReason"), "sigterm");
  EXPECT_NE(agent.status_json().find("\"exitReason\":\"sigterm\""), std::string::npos) << agent.status_json();
}

TEST(AgentE2E, FailuresAreReportedAndTheDaemonCarriesOn) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto exit3 = submit(cp, {"--", kChild, "--exit", "3"});
  auto missing = submit(cp, {"--", "/nonexistent/program"});
  auto bad_env = submit(cp, {"--env", "NYMPH_JOB_ID=spoof", "--", kChild});
  auto timeout = submit(cp, {"--timeout", "1s", "--", kChild, "--sleep", "600000"});
  auto j3 = wait_for_job(cp, exit3, final_state);
  EXPECT_EQ(job_state(j3), "failed");
  EXPECT_NE(j3.find("\"exitCode\":3"), std::string::npos) << j3;
  auto jm = wait_for_job(cp, missing, final_state);
  EXPECT_EQ(job_state(jm), "failed");
  EXPECT_NE(jm.find("/nonexistent/program"), std::string::npos) << jm;
  auto je = wait_for_job(cp, bad_env, final_state);
  EXPECT_EQ(job_state(je), "failed") << je;
  auto jt = wait_for_job(cp, timeout, final_state);
  EXPECT_EQ(job_state(jt), "failed");
  EXPECT_NE(jt.find("timed out"), std::string::npos) << jt;
  // Still serving: a good job runs.
  auto ok = submit(cp, {"--", kChild});
  EXPECT_EQ(job_state(wait_for_job(cp, ok, final_state)), "succeeded");
}

TEST(AgentE2E, CapacityLimitsConcurrentJobs) {
  ControlServer cp;
  AgentProcess agent(cp, {.max_process_jobs = 1, .start = false});
  auto marker = agent.dir() + "/started";
  auto a = submit(cp, {"--", kChild, "--touch", marker, "--sleep", "600000"});
  auto b = submit(cp, {"--", kChild, "--touch", marker, "--sleep", "600000"});
  agent.start();
  // Whichever job was dispatched first is running; the other must still be queued on the server.
  auto running = [&](const std::string& j) { return job_state(j) == "running"; };
  std::string first;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; first.empty();) {
    for (const auto& id : {a, b}) {
      auto r = cp.admin({"job", id, "--json"});
      if (running(r.out)) first = id;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << agent.log();
    if (first.empty()) std::this_thread::sleep_for(100ms);
  }
  const auto& second = first == a ? b : a;
  EXPECT_EQ(job_state(cp.admin({"job", second, "--json"}).out), "queued");
  // Cancelling the first frees the slot: the second starts.
  ASSERT_EQ(cp.admin({"cancel", first}).exit_code, 0);
  EXPECT_EQ(job_state(wait_for_job(cp, first, final_state)), "cancelled");
  wait_for_job(cp, second, running);
  cp.admin({"cancel", second});
  wait_for_job(cp, second, final_state);
}

// Issue 17: with jobs queued, each final event's reply carries the next job (takeNext), so a job costs the agent
// one request and no poll: twelve queued jobs through two slots take a handful of polls, not one or more each.
TEST(AgentE2E, QueuedJobsArriveInFinalEventRepliesNotOnePollEach) {
  ControlServer cp;
  AgentProcess agent(cp, {.max_process_jobs = 2, .start = false});
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(submit(cp, {"--", kChild}));
  const long polls_before = cp.metric("nymph_poll_requests_total");
  agent.start();
  for (const auto& id : ids) EXPECT_EQ(job_state(wait_for_job(cp, id, final_state)), "succeeded") << agent.log();
  const long polls = cp.metric("nymph_poll_requests_total") - polls_before;
  EXPECT_LE(polls, 4) << "polls for 12 queued jobs";
  EXPECT_GE(polls, 1);
}

TEST(AgentE2E, CancelKillsTheWholeProcessGroup) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto pidfile = agent.dir() + "/grandchildren";
  auto id = submit(cp, {"--", kChild, "--spawn", "3", pidfile, "--ignore-term", "--sleep", "600000"});
  wait_for_job(cp, id, [&](const std::string& j) { return job_state(j) == "running" && pids_in(pidfile).size() == 3; });
  auto pids = pids_in(pidfile);
  for (int p : pids) EXPECT_TRUE(alive(p));
  ASSERT_EQ(cp.admin({"cancel", id}).exit_code, 0);
  EXPECT_EQ(job_state(wait_for_job(cp, id, final_state)), "cancelled");
  for (int p : pids) EXPECT_FALSE(alive(p)) << "grandchild " << p << " survived";
}

TEST(AgentE2E, OutputIsByteExactAndMemoryStaysFlat) {
  ControlServer cp;
  // Under AddressSanitizer freed memory sits in a 256 MiB quarantine, which would hide what the agent itself
  // holds; a small quarantine keeps the measurement about the agent (no effect on uninstrumented builds).
  ::setenv("ASAN_OPTIONS", "quarantine_size_mb=4:thread_local_quarantine_size_kb=64", 1);
  AgentProcess agent(cp);
  ::unsetenv("ASAN_OPTIONS");
  agent.wait_for_state("serving");
  auto binary = submit(cp, {"--", kChild, "--binary", "--binary"});
  ASSERT_EQ(job_state(wait_for_job(cp, binary, final_state)), "succeeded");
  std::string expected;
  for (int round = 0; round < 2; ++round)
    for (int b = 0; b < 256; ++b) expected.push_back(static_cast<char>(b));
  EXPECT_EQ(logs(cp, binary), expected);

  long before = agent.peak_rss_kib();
  const long long size = 100LL * 1024 * 1024;
  auto big = submit(cp, {"--", kChild, "--write", std::to_string(size)});
  ASSERT_EQ(job_state(wait_for_job(cp, big, final_state, 300s)), "succeeded") << agent.log();
  long after = agent.peak_rss_kib();
  auto out = logs(cp, big);
  ASSERT_EQ(static_cast<long long>(out.size()), size);
  for (long long i = 0; i < size; i += 4093) ASSERT_EQ(static_cast<unsigned char>(out[i]), i % 256) << "byte " << i;
  EXPECT_LT(after - before, 48 * 1024) << "peak RSS grew from " << before << " KiB to " << after << " KiB";
}

TEST(AgentE2E, OutputPastTheLogCapIsDroppedWithOneWarningAndTheJobStillFinishes) {
  ControlServer cp({.extra_args = {"--max-log-bytes-per-job", "1MiB"}});
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto id = submit(cp, {"--", kChild, "--write", std::to_string(8 << 20), "--exit", "0"});
  auto done = wait_for_job(cp, id, final_state);
  EXPECT_EQ(job_state(done), "succeeded") << done << agent.log();
  auto out = logs(cp, id);
  EXPECT_GT(out.size(), 0u);
  EXPECT_LE(out.size(), std::size_t{1} << 20);
  for (std::size_t i = 0; i < out.size(); i += 4093) ASSERT_EQ(static_cast<unsigned char>(out[i]), i % 256) << i;
  std::string log = agent.log();
  auto first = log.find("takes no more stdout");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("takes no more stdout", first + 1), std::string::npos) << log;
  EXPECT_NE(log.find("HTTP 413: job '" + id + "' has "), std::string::npos) << log;
  EXPECT_NE(log.find("cap of 1048576 bytes per job"), std::string::npos) << log;
}

TEST(AgentE2E, TokenAppearsInNoCmdlineEnvironmentOrLogAndJobsSeeOnlyStdio) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto env_job = submit(cp, {"--", kChild, "--print-env", "--list-fds", "--sleep", "1000"});
  wait_for_job(cp, env_job, [](const std::string& j) { return job_state(j) == "running"; });
  // Every process on the machine while the job runs.
  DIR* proc = ::opendir("/proc");
  while (auto* e = ::readdir(proc)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    auto cmdline = read_file(std::string("/proc/") + e->d_name + "/cmdline");
    EXPECT_EQ(cmdline.find(cp.agent_token()), std::string::npos) << "token in the argv of pid " << e->d_name;
  }
  ::closedir(proc);
  ASSERT_EQ(job_state(wait_for_job(cp, env_job, final_state)), "succeeded");
  auto out = logs(cp, env_job);
  EXPECT_EQ(out.find(cp.agent_token()), std::string::npos);
  EXPECT_NE(out.find("NYMPH_JOB_ID=" + env_job), std::string::npos) << out;
  // --list-fds prints after the environment: exactly 0, 1, 2.
  std::stringstream lines(out.substr(out.rfind("NYMPH")));
  std::string line;
  std::set<std::string> fds;
  std::getline(lines, line);
  while (std::getline(lines, line))
    if (!line.empty() && std::all_of(line.begin(), line.end(), ::isdigit)) fds.insert(line);
  EXPECT_EQ(fds, (std::set<std::string>{"0", "1", "2"})) << out;
  agent.signal(SIGTERM);
  agent.wait_exit();
  EXPECT_EQ(agent.log().find(cp.agent_token()), std::string::npos);
}

TEST(AgentE2E, TokenFileReadableByOthersIsRefused) {
  ControlServer cp;
  AgentProcess agent(cp, {.start = false});
  ::chmod((agent.dir() + "/token").c_str(), 0644);
  agent.start();
  EXPECT_EQ(agent.wait_exit(), 2);
  auto log = agent.log();
  EXPECT_NE(log.find("mode 0644"), std::string::npos) << log;
  EXPECT_EQ(log.find(cp.agent_token()), std::string::npos);
}

TEST(AgentE2E, KillDirectiveStopsTheAgentAsKilled) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto id = str(only_worker(cp), "id");
  ASSERT_EQ(cp.admin({"kill", id}).exit_code, 0);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.log();
  auto w = only_worker(cp);
  EXPECT_EQ(str(w, "status"), "gone");
  EXPECT_EQ(str(w, "exitReason"), "killed");
}

TEST(AgentE2E, RevokedTokenEndsTheAgentWithAClearError) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  // The agent token is named "test" like the admin token: revoke it by its id.
  auto tokens = json::parse(cp.admin({"token", "list", "--json"}).out).as_object().at("tokens").as_array();
  std::string agent_token_id;
  for (const auto& t : tokens)
    if (t.as_object().at("role") == "agent") agent_token_id = std::string(t.as_object().at("id").as_string());
  ASSERT_FALSE(agent_token_id.empty());
  ASSERT_EQ(cp.admin({"token", "revoke", agent_token_id}).exit_code, 0);
  EXPECT_NE(agent.wait_exit(), 0) << agent.log();
  auto status = agent.status_json();
  EXPECT_NE(status.find("\"exitReason\":\"error\""), std::string::npos) << status;
  EXPECT_NE(status.find("revoked"), std::string::npos) << status;
  auto w = only_worker(cp);
  EXPECT_EQ(str(w, "status"), "gone");
  EXPECT_EQ(str(w, "exitReason"), "error");
  // The worker credential, like the token, appears in no log line.
  EXPECT_EQ(agent.log().find("nyw_"), std::string::npos);
  EXPECT_EQ(agent.log().find(cp.agent_token()), std::string::npos);
}

TEST(AgentE2E, SigkilledAgentTurnsStaleWithoutAnExitReason) {
  ControlServer cp({.poll_timeout = "500ms", .stale_after = "1s"});
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  agent.signal(SIGKILL);
  EXPECT_EQ(agent.wait_exit(), 128 + SIGKILL);
  // Staleness is a matter of time passing on the server: ask until it says so.
  json::object w;
  for (auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    w = only_worker(cp);
    if (str(w, "status") == "stale") break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(str(w, "status"), "stale");
  EXPECT_EQ(str(w, "exitReason"), "null");
}

TEST(AgentE2E, ControlPlaneCrashMidJobLosesNothingAndDuplicatesNothing) {
  ControlServer cp;
  AgentProcess agent(cp);
  agent.wait_for_state("serving");
  auto gate = agent.dir() + "/gate";
  // Prints, waits for the gate file to appear, prints again.
  auto id = submit(cp, {"--", kChild, "--text", "--write", "5000", "--pid-file", gate + ".pid", "--sleep", "3000",
                        "--write", "7000", "--write-err", "11"});
  wait_for_job(cp, id, [](const std::string& j) { return job_state(j) == "running"; });
  cp.kill9();
  cp.restart();
  auto done = wait_for_job(cp, id, final_state, 120s);
  EXPECT_EQ(job_state(done), "succeeded") << done << agent.log();
  auto out = logs(cp, id);
  EXPECT_EQ(out.size(), 12000u);
  auto v = json::parse(done).as_object();
  std::set<std::int64_t> seqs;
  int finals = 0;
  for (const auto& e : v.at("events").as_array()) {
    auto seq = e.as_object().at("seq").to_number<std::int64_t>();
    EXPECT_TRUE(seqs.insert(seq).second) << "duplicate seq " << seq << " in " << done;
    if (final_state(std::string("{\"state\":") + json::serialize(e.as_object().at("state")) + "}")) ++finals;
  }
  EXPECT_EQ(finals, 1) << done;
}
