// The real CommandRunner's bound on a command's output (slurm/child_command_runner.hpp): a tracking squeue at
// tens of thousands of jobs prints megabytes, and an answer cut at the bound must never be read as a whole one.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>

#include "slurm/child_command_runner.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::slurm {
namespace {

using namespace std::chrono_literals;
using test::run_coro;

Environment minimal_env() { return {{"PATH", "/usr/bin:/bin"}}; }

Result<CommandResult> zeros(ChildCommandRunner& runner, std::size_t bytes) {
  boost::asio::io_context ioc;
  return run_coro(ioc, runner.run({"head", "-c", std::to_string(bytes), "/dev/zero"}, minimal_env(), 20s));
}

TEST(ChildCommandRunner, AnOutputWithinTheBoundIsReadWhole) {
  ChildCommandRunner runner(4096);
  auto r = zeros(runner, 4096);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out.size(), 4096u);
  EXPECT_EQ(r->exit_code, 0);
}

TEST(ChildCommandRunner, AnOutputPastTheBoundIsAnErrorNotACutAnswer) {
  ChildCommandRunner runner(4096);
  auto r = zeros(runner, 4097);
  ASSERT_FALSE(r) << r->out.size() << " bytes were returned as a whole answer";
  EXPECT_EQ(r.error().message,
            "head printed more than 4096 bytes; its output is not read (cut, it could be read wrong)");
}

TEST(ChildCommandRunner, TheDefaultBoundHoldsATrackingSqueueAtFiftyThousandJobs) {
  // About 100 bytes a line in kSqueueJobFormat; the bound before this was 1 MiB (about 10 500 jobs).
  ChildCommandRunner runner;
  auto r = zeros(runner, 50'000 * 100);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out.size(), 50'000u * 100);
}

}  // namespace
}  // namespace nymph::slurm
