// The process runner with real child processes and signals.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/logging.hpp"
#include "runners/process_runner.hpp"
#include "tests/runners/process_helpers.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::runners {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using asio::experimental::awaitable_operators::operator&&;
using asio::experimental::awaitable_operators::operator||;
using test::lines;
using test::run_coro;

const std::string child_bin = NYMPH_TEST_CHILD;

JobSpec argv_job(std::vector<std::string> args, std::string id = "job1") {
  JobSpec spec;
  spec.job_id = std::move(id);
  spec.attempt = 1;
  spec.argv = std::move(args);
  spec.argv.insert(spec.argv.begin(), child_bin);
  return spec;
}

// Runs `spec` while `during` runs alongside (it may call stop()); returns the final update.
asio::awaitable<JobUpdate> run_with(ProcessRunner* runner, JobSpec spec, JobReporter* reporter,
                                    asio::awaitable<void> during) {
  co_return co_await (std::move(during) && runner->run(std::move(spec), *reporter));
}

// Waits (bounded) until `file` has `n` lines, then stops `job`.
asio::awaitable<void> stop_when_lines(ProcessRunner* runner, fs::path file, std::size_t n, std::string job,
                                      StopReason why) {
  bool ready = co_await test::poll_until([&] { return test::read_pids(file).size() >= n; });
  if (!ready) throw std::runtime_error("the job never wrote " + file.string());
  runner->stop(job, why);
}

class ProcessRunnerTest : public ::testing::Test {
 protected:
  ProcessRunnerConfig config() {
    ProcessRunnerConfig c;
    c.work_dir = tmp / "work";
    c.kill_grace = 300ms;
    return c;
  }
  JobUpdate run(ProcessRunner& runner, JobSpec spec, std::chrono::seconds guard = 60s) {
    return run_coro(ioc, runner.run(std::move(spec), reporter), guard);
  }

  asio::io_context ioc;
  test::TempDir tmp;
  test::RecordingReporter reporter;
};

TEST_F(ProcessRunnerTest, NameIsProcessItsJobsStopWithTheAgentAndNothingIsResumable) {
  ProcessRunner runner(config(), null_logger());
  EXPECT_EQ(runner.name(), "process");
  EXPECT_EQ(runner.lifetime(), Lifetime::stops_with_agent);
  EXPECT_EQ(runner.resumable(), nullptr);
}

TEST_F(ProcessRunnerTest, SucceedsReportsRunningOnceAndPassesArgvVerbatim) {
  ProcessRunner runner(config(), null_logger());
  std::vector<std::string> odd = {"two words", "it's \"quoted\"", "$(id)", "; rm -rf /", ""};
  std::vector<std::string> args = {"--print-args", "--exit", "0"};
  args.insert(args.end(), odd.begin(), odd.end());
  auto final = run(runner, argv_job(args));
  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(final.exit_code, 0);
  ASSERT_EQ(reporter.updates.size(), 1u);
  EXPECT_EQ(reporter.updates[0].state, JobState::running);
  auto got = lines(reporter.out);
  ASSERT_EQ(got.size(), 1 + args.size());
  EXPECT_EQ(std::vector<std::string>(got.end() - odd.size(), got.end()), odd);
  EXPECT_TRUE(reporter.offsets_contiguous);
}

TEST_F(ProcessRunnerTest, CommandRunsThroughShellOnlyWhenAllowed) {
  auto c = config();
  c.allow_commands = true;
  ProcessRunner allowed(c, null_logger());
  JobSpec spec;
  spec.job_id = "cmd";
  spec.command = "echo $((6*7)) && echo oops >&2; exit 4";
  auto final = run(allowed, spec);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_EQ(final.exit_code, 4);
  EXPECT_EQ(reporter.out, "42\n");
  EXPECT_EQ(reporter.err, "oops\n");
  allowed.release("cmd");
  ASSERT_FALSE(fs::exists(tmp / "work" / "cmd-1"));

  ProcessRunner refused(config(), null_logger());
  test::RecordingReporter fresh;
  auto no = run_coro(ioc, refused.run(spec, fresh));
  EXPECT_EQ(no.state, JobState::failed);
  EXPECT_NE(no.message.find("allow_commands = false"), std::string::npos) << no.message;
  EXPECT_TRUE(fresh.updates.empty());
  EXPECT_FALSE(fs::exists(tmp / "work" / "cmd-1"));
}

TEST_F(ProcessRunnerTest, EnvironmentIsScrubbedAndAugmented) {
  ::setenv("SLURM_JOB_ID", "123", 1);
  ::setenv("SBATCH_PARTITION", "gpu", 1);
  ::setenv("NYMPH_TOKEN_FILE", "/secret/token", 1);
  ::setenv("MY_SECRET", "s3cr3t", 1);
  ::setenv("CLOUD_KEY_A", "a", 1);
  ::setenv("KEEP_ME", "kept", 1);
  auto c = config();
  c.scrub_env = {"MY_SECRET", "CLOUD_KEY_*"};
  ProcessRunner runner(c, null_logger());
  auto spec = argv_job({"--print-env"}, "envjob");
  spec.attempt = 2;
  spec.env = {{"FOO", "bar baz"}, {"KEEP_ME", "overridden"}};
  auto final = run(runner, spec);
  for (const char* n : {"SLURM_JOB_ID", "SBATCH_PARTITION", "NYMPH_TOKEN_FILE", "MY_SECRET", "CLOUD_KEY_A", "KEEP_ME"})
    ::unsetenv(n);
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  auto got = lines(reporter.out);
  std::set<std::string> env(got.begin(), got.end());
  auto dir = fs::absolute(tmp / "work" / "envjob-2").string();
  EXPECT_TRUE(env.contains("NYMPH_JOB_ID=envjob"));
  EXPECT_TRUE(env.contains("NYMPH_ATTEMPT=2"));
  EXPECT_TRUE(env.contains("NYMPH_WORK_DIR=" + dir));
  EXPECT_TRUE(env.contains("FOO=bar baz"));
  EXPECT_TRUE(env.contains("KEEP_ME=overridden"));
  EXPECT_TRUE(env.contains(std::string("PATH=") + std::getenv("PATH")));
  for (const auto& e : got) {
    EXPECT_NE(e.rfind("SLURM_", 0), 0u) << e;
    EXPECT_NE(e.rfind("SBATCH_", 0), 0u) << e;
    EXPECT_NE(e.rfind("MY_SECRET=", 0), 0u) << e;
    EXPECT_NE(e.rfind("CLOUD_KEY_", 0), 0u) << e;
    if (e.rfind("NYMPH_", 0) == 0) {
      EXPECT_TRUE(e.rfind("NYMPH_JOB_ID=", 0) == 0 || e.rfind("NYMPH_ATTEMPT=", 0) == 0 ||
                  e.rfind("NYMPH_WORK_DIR=", 0) == 0)
          << e;
    }
  }
}

TEST_F(ProcessRunnerTest, BadEnvironmentNamesFailWithoutStarting) {
  ProcessRunner runner(config(), null_logger());
  for (std::string bad : {"1ABC", "A-B", "A=B", "", "NYMPH_JOB_ID", "NYMPH_ANYTHING"}) {
    auto spec = argv_job({"--exit", "0"}, "badenv");
    spec.env = {{bad, "x"}};
    test::RecordingReporter r;
    auto final = run_coro(ioc, runner.run(spec, r));
    EXPECT_EQ(final.state, JobState::failed) << bad;
    EXPECT_NE(final.message.find("environment variable"), std::string::npos) << final.message;
    EXPECT_TRUE(r.updates.empty());
  }
  EXPECT_FALSE(fs::exists(tmp / "work" / "badenv-1"));
}

TEST_F(ProcessRunnerTest, JobSeesOnlyStandardFds) {
  int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  int file = ::open("/dev/null", O_RDONLY);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ProcessRunner runner(config(), null_logger());
  auto final = run(runner, argv_job({"--list-fds"}));
  for (int fd : {sock, file, p[0], p[1]}) ::close(fd);
  EXPECT_EQ(final.state, JobState::succeeded);
  EXPECT_EQ(lines(reporter.out), (std::vector<std::string>{"0", "1", "2"}));
}

TEST_F(ProcessRunnerTest, StopKillsTheWholeGroupIncludingGrandchildren) {
  ProcessRunner runner(config(), null_logger());
  auto pids = tmp / "pids";
  auto spec = argv_job({"--spawn", "3", pids.string(), "--pid-file", (tmp / "leader").string(), "--sleep", "60000"});
  auto final = run_coro(
      ioc, run_with(&runner, spec, &reporter, stop_when_lines(&runner, pids, 3, "job1", StopReason::user_cancel)));
  EXPECT_EQ(final.state, JobState::cancelled) << final.message;
  EXPECT_EQ(final.signal, SIGTERM);
  EXPECT_NE(final.message.find("user_cancel"), std::string::npos) << final.message;
  auto grandchildren = test::read_pids(pids);
  ASSERT_EQ(grandchildren.size(), 3u);
  for (pid_t g : grandchildren) EXPECT_TRUE(test::process_dead(g)) << g;
  for (pid_t l : test::read_pids(tmp / "leader")) EXPECT_TRUE(test::process_dead(l)) << l;
  EXPECT_EQ(runner.active(), 0u);
}

TEST_F(ProcessRunnerTest, StopReasonsMapToFinalStates) {
  ProcessRunner runner(config(), null_logger());
  for (auto [why, state] :
       {std::pair{StopReason::lease_lost, JobState::cancelled}, std::pair{StopReason::shutdown, JobState::cancelled},
        std::pair{StopReason::timeout, JobState::failed}}) {
    auto ready = tmp / ("ready-" + std::to_string(static_cast<int>(why)));
    test::RecordingReporter r;
    auto spec = argv_job({"--pid-file", ready.string(), "--sleep", "60000"});
    auto final = run_coro(ioc, run_with(&runner, spec, &r, stop_when_lines(&runner, ready, 1, "job1", why)));
    EXPECT_EQ(final.state, state) << final.message;
  }
}

TEST_F(ProcessRunnerTest, IgnoredTermGetsKillAfterGrace) {
  ProcessRunner runner(config(), null_logger());  // kill_grace 300 ms
  auto ready = tmp / "ready";
  // --pid-file comes after --ignore-term: once it exists, SIGTERM is ignored.
  auto spec = argv_job({"--ignore-term", "--pid-file", ready.string(), "--sleep", "60000"});
  auto started = std::chrono::steady_clock::now();
  auto final = run_coro(
      ioc, run_with(&runner, spec, &reporter, stop_when_lines(&runner, ready, 1, "job1", StopReason::user_cancel)));
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(final.state, JobState::cancelled);
  EXPECT_EQ(final.signal, SIGKILL);
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 10s);
}

// Runner::kill: the agent's exit budget (or an expired lease) cannot wait for kill_grace: SIGKILL at once, also
// while a stop() is waiting out its grace.
asio::awaitable<void> stop_then_kill_when_ready(ProcessRunner* runner, fs::path file) {
  co_await stop_when_lines(runner, file, 1, "job1", StopReason::shutdown);
  runner->kill("job1", StopReason::shutdown);
}

TEST_F(ProcessRunnerTest, KillEndsAJobIgnoringTermWithoutWaitingForTheGrace) {
  auto c = config();
  c.kill_grace = 30s;
  ProcessRunner runner(c, null_logger());
  auto ready = tmp / "ready";
  auto spec = argv_job({"--ignore-term", "--pid-file", ready.string(), "--sleep", "60000"});
  auto started = std::chrono::steady_clock::now();
  auto final = run_coro(ioc, run_with(&runner, spec, &reporter, stop_then_kill_when_ready(&runner, ready)));
  EXPECT_EQ(final.state, JobState::cancelled);
  EXPECT_EQ(final.signal, SIGKILL);
  EXPECT_NE(final.message.find("shutdown"), std::string::npos) << final.message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << "not the 30 s kill grace";
}

TEST_F(ProcessRunnerTest, TimeoutFailsWithMessage) {
  ProcessRunner runner(config(), null_logger());
  auto spec = argv_job({"--sleep", "60000"});
  spec.timeout = std::chrono::seconds(1);
  auto started = std::chrono::steady_clock::now();
  auto final = run(runner, spec);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_EQ(final.message, "timed out after 1s");
  EXPECT_EQ(final.signal, SIGTERM);
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 10s);
}

TEST_F(ProcessRunnerTest, ExitCodeAndSignalAreReported) {
  ProcessRunner runner(config(), null_logger());
  auto exited = run(runner, argv_job({"--exit", "7"}));
  EXPECT_EQ(exited.state, JobState::failed);
  EXPECT_EQ(exited.exit_code, 7);
  EXPECT_FALSE(exited.signal);
  EXPECT_EQ(exited.message, "the process exited with status 7");

  runner.release("job1");
  auto killed = run(runner, argv_job({"--raise", std::to_string(SIGSEGV)}));
  EXPECT_EQ(killed.state, JobState::failed);
  EXPECT_FALSE(killed.exit_code);
  EXPECT_EQ(killed.signal, SIGSEGV);
  EXPECT_EQ(killed.message, "the process killed by signal 11 (SEGV)");
}

TEST_F(ProcessRunnerTest, MissingExecutableFailsWithoutZombieOrAtexitHandlers) {
  test::install_foreign_atexit_marker(tmp / "atexit-ran");
  ProcessRunner runner(config(), null_logger());
  JobSpec spec;
  spec.job_id = "missing";
  spec.argv = {"/nonexistent/bin/tool", "--flag"};
  auto final = run(runner, spec);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_EQ(final.message, "cannot start /nonexistent/bin/tool: No such file or directory");
  EXPECT_TRUE(reporter.updates.empty());
  EXPECT_TRUE(test::zombie_children().empty());
  EXPECT_TRUE(test::child_processes().empty());
  EXPECT_FALSE(fs::exists(tmp / "atexit-ran"));

  spec.argv = {"no-such-tool-on-path"};
  auto on_path = run(runner, spec);
  EXPECT_EQ(on_path.state, JobState::failed);
  EXPECT_EQ(on_path.message, "cannot start no-such-tool-on-path: not found on PATH");
}

TEST_F(ProcessRunnerTest, NonUtf8OutputIsByteExact) {
  ProcessRunner runner(config(), null_logger());
  auto final = run(runner, argv_job({"--binary", "--write-err", "70000"}));
  ASSERT_EQ(final.state, JobState::succeeded);
  ASSERT_EQ(reporter.out.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(static_cast<unsigned char>(reporter.out[b]), b);
  ASSERT_EQ(reporter.err.size(), 70000u);
  for (std::size_t i = 0; i < reporter.err.size(); ++i) ASSERT_EQ(static_cast<unsigned char>(reporter.err[i]), i % 256);
  EXPECT_TRUE(reporter.offsets_contiguous);
}

TEST_F(ProcessRunnerTest, SmallOutputIsFlushedWhileTheJobRuns) {
  auto c = config();
  c.output_flush = 100ms;
  ProcessRunner runner(c, null_logger());
  auto started = std::chrono::steady_clock::now();
  auto final = run(runner, argv_job({"--text", "--write", "10", "--sleep", "1500", "--write", "10"}));
  ASSERT_EQ(final.state, JobState::succeeded);
  ASSERT_EQ(reporter.output_times.size(), 2u);
  // The first 10 bytes arrive long before the job writes (and ends) again.
  EXPECT_LT(reporter.output_times[0] - started, 1000ms);
  EXPECT_GE(reporter.output_times[1] - started, 1500ms);
  EXPECT_EQ(reporter.out, "abcdefghijabcdefghij");
}

TEST_F(ProcessRunnerTest, WorkDirIsPrivateCurrentAndRemovedOnRelease) {
  ProcessRunner runner(config(), null_logger());
  auto final = run(runner, argv_job({"--touch", "made-here", "--print-cwd"}, "wd"));
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  auto dir = fs::absolute(tmp / "work" / "wd-1");
  EXPECT_EQ(reporter.out, dir.string() + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_TRUE(fs::exists(dir / "made-here"));
  runner.release("unknown-job");  // ignored
  runner.release("wd");
  EXPECT_FALSE(fs::exists(dir));
  runner.release("wd");  // twice is harmless
}

// Issue 15: whatever the end — failed after running, cancelled, stopped because the lease was lost or the
// agent is going away, timed out, or a start that failed once the directory existed — release() leaves
// nothing behind.
TEST_F(ProcessRunnerTest, WorkDirIsRemovedAfterEveryKindOfEnd) {
  const fs::path work = tmp / "work";
  {
    ProcessRunner runner(config(), null_logger());
    auto failed = run(runner, argv_job({"--touch", "partial", "--exit", "3"}, "fail"));
    EXPECT_EQ(failed.state, JobState::failed);
    EXPECT_TRUE(fs::exists(work / "fail-1" / "partial")) << "kept until release()";
    runner.release("fail");
    EXPECT_FALSE(fs::exists(work / "fail-1"));

    int n = 0;
    for (auto why : {StopReason::user_cancel, StopReason::lease_lost, StopReason::shutdown, StopReason::timeout}) {
      const std::string id = "stop" + std::to_string(++n);
      auto ready = tmp / ("ready-" + id);
      test::RecordingReporter r;
      auto spec = argv_job({"--touch", "partial", "--pid-file", ready.string(), "--sleep", "60000"}, id);
      auto final = run_coro(ioc, run_with(&runner, spec, &r, stop_when_lines(&runner, ready, 1, id, why)));
      EXPECT_TRUE(is_final(final.state)) << final.message;
      EXPECT_TRUE(fs::exists(work / (id + "-1") / "partial")) << id;
      runner.release(id);
      EXPECT_FALSE(fs::exists(work / (id + "-1"))) << id;
    }

    JobSpec missing;  // the directory exists before the start fails
    missing.job_id = "nostart";
    missing.argv = {(tmp / "no-such-program").string()};
    auto not_started = run(runner, missing);
    EXPECT_EQ(not_started.state, JobState::failed);
    EXPECT_TRUE(fs::exists(work / "nostart-1"));
    runner.release("nostart");
    EXPECT_FALSE(fs::exists(work / "nostart-1"));
  }  // the destructor waits for the background removals
  EXPECT_TRUE(fs::is_empty(work)) << "nothing left, not even a renamed directory being removed";
}

TEST_F(ProcessRunnerTest, RemovalFinishesInTheBackground) {
  {
    ProcessRunner runner(config(), null_logger());
    auto final = run(runner, argv_job({"--touch", "f"}, "bg"));
    ASSERT_EQ(final.state, JobState::succeeded);
    runner.release("bg");
  }  // the destructor waits for the remover thread
  EXPECT_TRUE(fs::is_empty(tmp / "work"));
}

TEST_F(ProcessRunnerTest, KeepWorkDirs) {
  auto c = config();
  c.keep_work_dirs = true;
  ProcessRunner runner(c, null_logger());
  auto final = run(runner, argv_job({"--touch", "kept"}, "keep"));
  ASSERT_EQ(final.state, JobState::succeeded);
  runner.release("keep");
  EXPECT_TRUE(fs::exists(tmp / "work" / "keep-1" / "kept"));
}

TEST_F(ProcessRunnerTest, StaleWorkDirIsReplacedByAFreshOne) {
  fs::create_directories(tmp / "work" / "stale-1");
  std::ofstream(tmp / "work" / "stale-1" / "old") << "x";
  ProcessRunner runner(config(), null_logger());
  auto final = run(runner, argv_job({"--list-fds"}, "stale"));
  ASSERT_EQ(final.state, JobState::succeeded);
  EXPECT_FALSE(fs::exists(tmp / "work" / "stale-1" / "old"));
}

TEST_F(ProcessRunnerTest, UnwritableWorkDirFails) {
  std::ofstream(tmp / "a-file") << "x";
  auto c = config();
  c.work_dir = tmp / "a-file" / "work";
  ProcessRunner runner(c, null_logger());
  auto final = run(runner, argv_job({"--exit", "0"}));
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("cannot create work directory"), std::string::npos) << final.message;
  EXPECT_TRUE(reporter.updates.empty());
}

TEST_F(ProcessRunnerTest, InvalidSpecsFail) {
  ProcessRunner runner(config(), null_logger());
  auto expect_failed = [&](JobSpec spec, const std::string& needle) {
    test::RecordingReporter r;
    auto final = run_coro(ioc, runner.run(spec, r));
    EXPECT_EQ(final.state, JobState::failed);
    EXPECT_NE(final.message.find(needle), std::string::npos) << final.message;
  };
  expect_failed(argv_job({"--exit", "0"}, "../escape"), "invalid job id");
  expect_failed(argv_job({"--exit", "0"}, ""), "invalid job id");
  JobSpec none;
  none.job_id = "none";
  expect_failed(none, "no argv");
  auto both = argv_job({"--exit", "0"});
  both.command = "true";
  expect_failed(both, "not both");
  // exec would have cut the argument at the NUL: the job would have run without "--dry-run".
  expect_failed(argv_job({"--exit", std::string("3\0 --dry-run", 12)}), "argv[2] contains a NUL byte");
  auto training = argv_job({"--exit", "0"});
  training.kind = "training";
  expect_failed(training, "training job without a profile name");
  auto other = argv_job({"--exit", "0"});
  other.kind = "other";
  expect_failed(other, "runs kind=command and kind=training jobs, not 'other'");
  auto zero = argv_job({"--exit", "0"});
  zero.timeout = std::chrono::seconds(0);
  expect_failed(zero, "timeout");
  EXPECT_FALSE(fs::exists(tmp / "escape-1"));
}

// Returns once `file` has `n` lines (bounded wait).
asio::awaitable<void> lines_written(fs::path file, std::size_t n) {
  if (!co_await test::poll_until([&] { return test::read_pids(file).size() >= n; }))
    throw std::runtime_error("the job never wrote " + file.string());
}

// Runs `spec` until the job has written `n` pids to `file`, then cancels run() from outside (`||` sends the
// cancellation into it). Returns whether run() was the one cancelled.
asio::awaitable<bool> cancel_run_when(ProcessRunner* runner, JobSpec spec, JobReporter* reporter, fs::path file,
                                      std::size_t n) {
  auto first = co_await (runner->run(std::move(spec), *reporter) || lines_written(file, n));
  co_return first.index() == 1;
}

TEST_F(ProcessRunnerTest, CancellingRunTerminatesTheGroup) {
  ProcessRunner runner(config(), null_logger());
  auto pids = tmp / "pids";
  auto spec = argv_job({"--pid-file", (tmp / "leader").string(), "--spawn", "2", pids.string(), "--sleep", "60000"});
  EXPECT_TRUE(run_coro(ioc, cancel_run_when(&runner, spec, &reporter, pids, 2)));
  auto leader = test::read_pids(tmp / "leader");
  auto grandchildren = test::read_pids(pids);
  ASSERT_EQ(leader.size(), 1u);
  ASSERT_EQ(grandchildren.size(), 2u);
  EXPECT_TRUE(test::process_dead(leader[0]));
  for (pid_t g : grandchildren) EXPECT_TRUE(test::process_dead(g)) << g;
  EXPECT_TRUE(test::child_processes().empty());
  EXPECT_EQ(runner.active(), 0u);
}

// Releases job "again" while its attempt 2 runs, checks only attempt 1's directory went, then stops it.
asio::awaitable<void> release_during_second_attempt(ProcessRunner* runner, fs::path ready, fs::path work) {
  co_await lines_written(ready, 1);
  runner->release("again");
  if (fs::exists(work / "again-1") || !fs::exists(work / "again-2")) throw std::runtime_error("wrong dir released");
  runner->stop("again", StopReason::user_cancel);
}

TEST_F(ProcessRunnerTest, ReleaseLeavesARunningAttemptsDirectory) {
  ProcessRunner runner(config(), null_logger());
  auto first = run(runner, argv_job({"--exit", "1"}, "again"));
  ASSERT_EQ(first.state, JobState::failed);
  auto ready = tmp / "ready";
  auto second = argv_job({"--pid-file", ready.string(), "--sleep", "60000"}, "again");
  second.attempt = 2;
  auto final =
      run_coro(ioc, run_with(&runner, second, &reporter, release_during_second_attempt(&runner, ready, tmp / "work")));
  EXPECT_EQ(final.state, JobState::cancelled);
  runner.release("again");
  EXPECT_FALSE(fs::exists(tmp / "work" / "again-2"));
}

}  // namespace
}  // namespace nymph::runners
