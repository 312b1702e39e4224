// run_command's standard input and the blocking form the installer uses (platform/command.hpp).
#include <gtest/gtest.h>

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "platform/command.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::platform {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::run_coro;

Environment minimal_env() { return {{"PATH", "/usr/bin:/bin"}}; }

asio::awaitable<Result<CommandResult>> run_with_input(std::vector<std::string> argv, std::string input,
                                                      std::chrono::milliseconds timeout) {
  CommandOptions options;
  options.input = std::move(input);
  co_return co_await run_command(std::move(argv), minimal_env(), timeout, std::move(options));
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 % 251);
  return s;
}

TEST(CommandInput, IsWrittenToStdinAndClosed) {
  asio::io_context ioc;
  auto r = run_coro(ioc, run_with_input({"cat"}, "#!/bin/sh\necho hi\n", 10s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "#!/bin/sh\necho hi\n") << "cat saw EOF after the input";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(r->status.success());
}

TEST(CommandInput, LargerThanAPipeWhileTheOutputIsReadConcurrently) {
  asio::io_context ioc;
  const std::string big = pattern(600 * 1024);
  auto r = run_coro(ioc, run_with_input({"cat"}, big, 20s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->out == big) << r->out.size() << " bytes came back";
}

TEST(CommandInput, AChildThatDoesNotReadNeitherStopsTheCallNorRaisesSigpipe) {
  ASSERT_EQ(::signal(SIGPIPE, SIG_DFL), SIG_DFL) << "a SIGPIPE would end this test process";
  asio::io_context ioc;
  auto r = run_coro(ioc, run_with_input({"true"}, pattern(1024 * 1024), 10s));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(r->timed_out);
  std::vector<std::string> sleeper{NYMPH_TEST_CHILD, "--sleep", "30000"};
  auto hung = run_coro(ioc, run_with_input(sleeper, pattern(1024 * 1024), 300ms));
  ASSERT_TRUE(hung) << hung.error().message;
  EXPECT_TRUE(hung->timed_out);
  EXPECT_EQ(hung->exit_code, 128 + SIGTERM);
}

TEST(CommandBlocking, SameResultsOnAPrivateIoContext) {
  CommandOptions options;
  options.input = "abc";
  auto r = run_command_blocking({"cat"}, minimal_env(), 10s, options);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "abc");
  auto missing = run_command_blocking({"no-such-program-nymph"}, minimal_env(), 10s, {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("not found on PATH"), std::string::npos) << missing.error().message;
}

TEST(CommandBlocking, ATimeoutCanBeAnError) {
  std::vector<std::string> sleeper{NYMPH_TEST_CHILD, "--sleep", "30000"};
  auto r = run_command_blocking(sleeper, minimal_env(), 200ms, {});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  auto e = timeout_as_error(std::move(r), "sleeper", 200ms);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message, "sleeper did not finish within 200ms");
  auto ok = timeout_as_error(CommandResult{3, "", ""}, "x", 1s);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->exit_code, 3);
}

}  // namespace
}  // namespace nymph::platform
