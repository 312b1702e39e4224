// Real child processes through nymph::platform::ChildProcess and run_command.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "platform/child_process.hpp"
#include "platform/command.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/run_coro.hpp"
#include "tests/support/temp_dir.hpp"

namespace nymph::platform {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::lines;
using test::run_coro;

const std::string child_bin = NYMPH_TEST_CHILD;

Environment minimal_env() {
  return {{"PATH", "/usr/bin:/bin"}, {"ONLY_ME", "1"}};
}

std::vector<std::string> child_args(std::vector<std::string> args) {
  args.insert(args.begin(), child_bin);
  return args;
}

asio::awaitable<CommandResult> run_ok(std::vector<std::string> argv, Environment env = minimal_env(),
                                      std::chrono::milliseconds timeout = 10s, CommandOptions opts = {}) {
  auto r = co_await run_command(std::move(argv), std::move(env), timeout, std::move(opts));
  if (!r) throw std::runtime_error("run_command failed: " + r.error().message);
  co_return std::move(*r);
}

// Everything `child` writes to its standard output, read to the end on `ioc`; the child is waited for after.
std::string output_then_wait(asio::io_context& ioc, ChildProcess& child) {
  std::string out;
  auto read_all = [&]() -> asio::awaitable<void> {
    char buf[4096];
    for (;;) {
      auto [ec, n] = co_await child.out()->async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      out.append(buf, n);
      if (ec) break;
    }
    co_await child.wait();
  };
  run_coro(ioc, read_all());
  return out;
}

class ChildProcessTest : public ::testing::Test {
 protected:
  asio::io_context ioc;
};

TEST_F(ChildProcessTest, ArgvIsPassedVerbatim) {
  // --exit stops the helper before it would parse the odd arguments as actions.
  std::vector<std::string> args = {"--print-args", "--exit", "0", "two words", "it's \"quoted\"",
                                   "$(id)",        "`id`",   "*", ""};
  auto r = run_coro(ioc, run_ok(child_args(args)));
  ASSERT_TRUE(r.status.success()) << r.status.describe() << r.err;
  std::vector<std::string> expected = child_args(args);
  EXPECT_EQ(lines(r.out), expected);
}

TEST_F(ChildProcessTest, EnvironmentIsReplacedNotMerged) {
  ::setenv("NYMPH_TEST_PARENT_ONLY", "x", 1);
  auto r = run_coro(ioc, run_ok(child_args({"--print-env"})));
  ::unsetenv("NYMPH_TEST_PARENT_ONLY");
  auto got = lines(r.out);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), (std::set<std::string>{"PATH=/usr/bin:/bin", "ONLY_ME=1"}));
}

TEST_F(ChildProcessTest, ExitCodeAndSignalAreDecodedSeparately) {
  auto exited = run_coro(ioc, run_ok(child_args({"--exit", "3"})));
  EXPECT_EQ(exited.status.exit_code, 3);
  EXPECT_FALSE(exited.status.signal);
  EXPECT_EQ(exited.status.describe(), "exited with status 3");

  auto killed = run_coro(ioc, run_ok(child_args({"--raise", std::to_string(SIGUSR1)})));
  EXPECT_FALSE(killed.status.exit_code);
  EXPECT_EQ(killed.status.signal, SIGUSR1);
  EXPECT_EQ(killed.status.describe(), "killed by signal 10 (USR1)");
}

TEST_F(ChildProcessTest, SeesOnlyStandardFdsWhileParentHoldsOthers) {
  // Deliberately inheritable: no CLOEXEC anywhere.
  int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  int file = ::open("/dev/null", O_RDONLY);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  int high = ::fcntl(file, F_DUPFD, 200);
  ASSERT_GE(sock, 0);
  ASSERT_GE(high, 200);
  auto r = run_coro(ioc, run_ok(child_args({"--list-fds"})));
  for (int fd : {sock, file, p[0], p[1], high}) ::close(fd);
  EXPECT_EQ(lines(r.out), (std::vector<std::string>{"0", "1", "2"}));
}

TEST_F(ChildProcessTest, ChildGetsDefaultSignalDispositions) {
  auto old = ::signal(SIGPIPE, SIG_IGN);
  auto r = run_coro(ioc, run_ok(child_args({"--print-sigign"})));
  ::signal(SIGPIPE, old);
  ASSERT_EQ(lines(r.out).size(), 1u);
  // Signals 32 and 33 are glibc's own (SIGRTMIN is 34): its posix_spawn leaves them ignored, and every
  // glibc program installs its handlers for them at start-up. No signal a program can use is ignored.
  std::uint64_t ignored = std::stoull(lines(r.out)[0], nullptr, 16);
  constexpr std::uint64_t glibc_reserved = (1ull << 31) | (1ull << 32);
  EXPECT_EQ(ignored & ~glibc_reserved, 0u) << lines(r.out)[0];
  EXPECT_EQ(ignored & (1ull << (SIGPIPE - 1)), 0u);
}

TEST_F(ChildProcessTest, MissingExecutableFailsWithoutZombieOrAtexitHandlers) {
  test::TempDir tmp;
  test::install_foreign_atexit_marker(tmp / "atexit-ran");
  auto r = run_coro(ioc, run_command({"/nonexistent/program", "x"}, minimal_env(), 5s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot start /nonexistent/program: No such file or directory");
  EXPECT_TRUE(test::zombie_children().empty());
  EXPECT_TRUE(test::child_processes().empty());
  EXPECT_FALSE(std::filesystem::exists(tmp / "atexit-ran"));

  auto plain_file = (tmp / "plain").string();
  std::ofstream(plain_file) << "not a program\n";
  auto not_executable = run_coro(ioc, run_command({plain_file}, minimal_env(), 5s));
  ASSERT_FALSE(not_executable);
  EXPECT_EQ(not_executable.error().message, "cannot start " + plain_file + ": Permission denied");
  EXPECT_TRUE(test::child_processes().empty());
  EXPECT_FALSE(std::filesystem::exists(tmp / "atexit-ran"));
}

TEST_F(ChildProcessTest, ANulByteInAnArgumentOrVariableIsRefusedNotCutShort) {
  auto arg = run_coro(ioc, run_command({child_bin, std::string("--exit\0 1", 9), "0"}, minimal_env(), 5s));
  ASSERT_FALSE(arg);
  EXPECT_EQ(arg.error().message, "cannot start " + child_bin + ": argv[1] contains a NUL byte");
  auto env = minimal_env();
  env["SECRET"] = std::string("s3cr3t\0tail", 11);
  auto var = run_coro(ioc, run_command({child_bin, "--exit", "0"}, env, 5s));
  ASSERT_FALSE(var);
  EXPECT_EQ(var.error().message, "cannot start " + child_bin + ": an environment variable contains a NUL byte");
  EXPECT_TRUE(test::child_processes().empty());
}

TEST_F(ChildProcessTest, NameIsLookedUpOnTheChildsPath) {
  auto r = run_coro(ioc, run_ok({"sh", "-c", "echo found"}));
  EXPECT_EQ(r.out, "found\n");
  auto missing = run_coro(ioc, run_command({"no-such-program-nymph"}, minimal_env(), 5s));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "cannot start no-such-program-nymph: not found on PATH");
}

TEST_F(ChildProcessTest, WorkingDirectory) {
  test::TempDir tmp;
  CommandOptions opts;
  opts.working_dir = tmp.path().string();
  auto r = run_coro(ioc, run_ok(child_args({"--print-cwd"}), minimal_env(), 10s, opts));
  EXPECT_EQ(r.out, tmp.path().string() + "\n");
  opts.working_dir = (tmp / "missing").string();
  auto bad = run_coro(ioc, run_command(child_args({"--print-cwd"}), minimal_env(), 5s, opts));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("working directory"), std::string::npos) << bad.error().message;
}

TEST_F(ChildProcessTest, CapturedOutputIsBoundedButFullyDrained) {
  CommandOptions opts;
  opts.max_output = 1000;
  auto r = run_coro(
      ioc, run_ok(child_args({"--write", "300000", "--write-err", "10", "--exit", "0"}), minimal_env(), 10s, opts));
  EXPECT_TRUE(r.status.success());
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_TRUE(r.out_truncated);
  EXPECT_EQ(r.err.size(), 10u);
  EXPECT_FALSE(r.err_truncated);
  for (std::size_t i = 0; i < r.out.size(); ++i) ASSERT_EQ(static_cast<unsigned char>(r.out[i]), i % 256);
}

TEST_F(ChildProcessTest, TimeoutTerminatesTheGroupIncludingGrandchildren) {
  test::TempDir tmp;
  auto pids = tmp / "pids";
  CommandOptions opts;
  opts.kill_grace = 2s;
  auto started = std::chrono::steady_clock::now();
  auto r = run_coro(
      ioc, run_ok(child_args({"--spawn", "3", pids.string(), "--sleep", "60000"}), minimal_env(), 500ms, opts));
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.status.signal, SIGTERM);
  EXPECT_LT(took, 2s);  // everything died of SIGTERM: no need to wait for the grace
  auto grandchildren = test::read_pids(pids);
  ASSERT_EQ(grandchildren.size(), 3u);
  for (pid_t g : grandchildren) EXPECT_TRUE(test::process_dead(g)) << g;
}

TEST_F(ChildProcessTest, IgnoredTermGetsKillAfterGrace) {
  CommandOptions opts;
  opts.kill_grace = 300ms;
  auto started = std::chrono::steady_clock::now();
  auto r = run_coro(ioc, run_ok(child_args({"--ignore-term", "--sleep", "60000"}), minimal_env(), 200ms, opts));
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.status.signal, SIGKILL);
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 5s);
}

TEST_F(ChildProcessTest, BackgroundGrandchildrenAreCleanedUpAfterTheLeaderExits) {
  test::TempDir tmp;
  auto pids = tmp / "pids";
  CommandOptions opts;
  opts.kill_grace = 1s;
  // The grandchildren keep stdout open: without the group cleanup this would never reach EOF.
  auto r = run_coro(ioc, run_ok(child_args({"--spawn", "2", pids.string(), "--exit", "0"}), minimal_env(), 30s, opts));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.exit_code, 0);
  for (pid_t g : test::read_pids(pids)) EXPECT_TRUE(test::process_dead(g)) << g;
}

asio::awaitable<std::string> group_and_session(Grouping grouping) {
  LaunchOptions opts{child_args({"--sleep", "60000"}), minimal_env()};
  opts.grouping = grouping;
  opts.out = OutputTarget::to_null();
  opts.err = OutputTarget::to_null();
  auto child = ChildProcess::launch(co_await asio::this_coro::executor, std::move(opts));
  if (!child) throw std::runtime_error(child.error().message);
  std::ifstream f("/proc/" + std::to_string(child->pid()) + "/stat");
  std::string stat;
  std::getline(f, stat);
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  char state;
  pid_t ppid, pgrp, sid;
  rest >> state >> ppid >> pgrp >> sid;
  std::string result = std::string(pgrp == child->pid() ? "own-group" : "shared-group") + " " +
                       (sid == child->pid() ? "own-session" : (sid == ::getsid(0) ? "our-session" : "other"));
  auto status = co_await child->terminate(1s);
  if (status.signal != SIGTERM) throw std::runtime_error("unexpected " + status.describe());
  co_return result;
}

TEST_F(ChildProcessTest, ProcessGroupOrSession) {
  EXPECT_EQ(run_coro(ioc, group_and_session(Grouping::process_group)), "own-group our-session");
  EXPECT_EQ(run_coro(ioc, group_and_session(Grouping::session)), "own-group own-session");
}

asio::awaitable<std::string> output_to_file(std::string path) {
  LaunchOptions opts{child_args({"--text", "--write", "10", "--write-err", "5"}), minimal_env()};
  opts.out = OutputTarget::to_file(path);
  opts.err = OutputTarget::to_file(path);
  auto child = ChildProcess::launch(co_await asio::this_coro::executor, std::move(opts));
  if (!child) throw std::runtime_error(child.error().message);
  if (child->out() || child->err()) throw std::runtime_error("pipes for file targets");
  auto status = co_await child->wait();
  co_return status.describe();
}

TEST_F(ChildProcessTest, OutputToAFileAppends) {
  test::TempDir tmp;
  auto log = (tmp / "log").string();
  EXPECT_EQ(run_coro(ioc, output_to_file(log)), "exited with status 0");
  EXPECT_EQ(run_coro(ioc, output_to_file(log)), "exited with status 0");
  EXPECT_EQ(std::filesystem::file_size(log), 30u);
  EXPECT_EQ(std::filesystem::status(log).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// GCC 12 destroys a defaulted class-type argument twice when the call is inside a coroutine (ASan reports a
// bad free): the three-argument run_command must be safe to co_await.
asio::awaitable<std::string> three_argument_call_inside_a_coroutine() {
  std::vector<std::string> argv{child_bin, "--text", "--write", "3"};
  auto r = co_await run_command(argv, minimal_env(), std::chrono::milliseconds(10000));
  if (!r) throw std::runtime_error(r.error().message);
  co_return r->out;
}

TEST_F(ChildProcessTest, ThreeArgumentRunCommandInsideACoroutine) {
  EXPECT_EQ(run_coro(ioc, three_argument_call_inside_a_coroutine()), "abc");
}

// A5 (issue 15): a process that launched a child with die_with_parent is SIGKILLed (as an agent killed by a
// login node's policy would be): the child dies with it instead of running on as an orphan. Without the flag
// the same child outlives its parent (checked too, so the test shows the difference).
pid_t child_of_a_killed_parent(bool die_with_parent, const std::filesystem::path& pid_file) {
  ::unlink(pid_file.c_str());
  pid_t parent = ::fork();
  if (parent == 0) {
    asio::io_context io;
    LaunchOptions o{child_args({"--pid-file", pid_file.string(), "--sleep", "60000"}), minimal_env()};
    o.out = OutputTarget::to_null();
    o.err = OutputTarget::to_null();
    o.die_with_parent = die_with_parent;
    auto child = ChildProcess::launch(io.get_executor(), std::move(o));
    if (!child) ::_exit(3);
    for (;;) ::pause();  // until SIGKILLed by the test
  }
  std::vector<pid_t> pids;
  asio::io_context io;
  EXPECT_TRUE(run_coro(io, test::poll_until([&] {
    pids = test::read_pids(pid_file);
    return !pids.empty();
  })));
  ::kill(parent, SIGKILL);
  int status = 0;
  ::waitpid(parent, &status, 0);
  return pids.empty() ? -1 : pids.front();
}

TEST_F(ChildProcessTest, AChildThatDiesWithItsParentIsKilledWhenTheParentIsSigkilled) {
  test::TempDir dir("nymph-pdeathsig");
  pid_t orphan = child_of_a_killed_parent(false, dir.path() / "orphan.pid");
  ASSERT_GT(orphan, 0);
  EXPECT_FALSE(test::process_dead(orphan)) << "without die_with_parent the child outlives its parent";
  ::kill(orphan, SIGKILL);

  pid_t child = child_of_a_killed_parent(true, dir.path() / "child.pid");
  ASSERT_GT(child, 0);
  EXPECT_TRUE(run_coro(ioc, test::poll_until([&] { return test::process_dead(child); }, 10s)))
      << "pid " << child << " still runs after its parent was SIGKILLed";
}

TEST_F(ChildProcessTest, DieWithParentStillReportsAFailedExecAndPassesTheStreams) {
  LaunchOptions bad{{"/nonexistent/program"}, minimal_env()};
  bad.die_with_parent = true;
  auto failed = ChildProcess::launch(ioc.get_executor(), std::move(bad));
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("No such file"), std::string::npos) << failed.error().message;
  EXPECT_TRUE(test::zombie_children().empty());

  LaunchOptions ok{child_args({"--print-args", "--list-fds", "--print-sigign", "--print-cwd"}), minimal_env(), "/"};
  ok.die_with_parent = true;
  auto child = ChildProcess::launch(ioc.get_executor(), std::move(ok));
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(::getpgid(child->pid()), child->pid()) << "its own process group";
  std::string out = output_then_wait(ioc, *child);
  auto l = lines(out);
  EXPECT_NE(std::find(l.begin(), l.end(), "0"), l.end()) << out;
  for (const auto& line : l) EXPECT_NE(line, "3") << "a descriptor beyond 0-2 leaked:\n" << out;
  EXPECT_EQ(l.back(), "/") << out;
}

// Each thread's spawns run on a child stack of that thread's own (platform/spawn.cpp keeps one per thread): two
// threads spawning at once never start a child on a stack the other is using.
TEST_F(ChildProcessTest, TwoThreadsSpawningAtOnceEachStartTheirOwnChildren) {
  constexpr int kEach = 40;
  auto spawn_many = [](std::string tag, std::vector<std::string>& failures) {
    asio::io_context own;
    for (int i = 0; i < kEach; ++i) {
      std::string arg = tag + "-" + std::to_string(i);
      LaunchOptions opts{child_args({"--print-args", arg}), minimal_env()};
      opts.die_with_parent = true;
      auto child = ChildProcess::launch(own.get_executor(), std::move(opts));
      if (!child) {
        failures.push_back(arg + ": " + child.error().message);
        continue;
      }
      std::string out = output_then_wait(own, *child);
      auto l = lines(out);
      if (std::find(l.begin(), l.end(), arg) == l.end()) failures.push_back(arg + ": printed '" + out + "'");
    }
  };
  std::vector<std::string> first_failures, second_failures;
  std::thread second([&] { spawn_many("second", second_failures); });
  spawn_many("first", first_failures);
  second.join();
  EXPECT_TRUE(first_failures.empty()) << first_failures.front();
  EXPECT_TRUE(second_failures.empty()) << second_failures.front();
  EXPECT_TRUE(test::zombie_children().empty());
}
}  // namespace
}  // namespace nymph::platform
