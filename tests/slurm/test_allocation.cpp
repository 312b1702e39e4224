// The allocation a process runs in: squeue's partition|time-left line, and the query through a CommandRunner.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "slurm/allocation.hpp"
#include "tests/support/run_coro.hpp"

namespace {

using namespace nymph::slurm;
using namespace std::chrono_literals;
using nymph::Result;
using nymph::test::run_coro;

TEST(Allocation, PartitionAndTimeLeft) {
  auto a = parse_allocation("42", "debug|10:00\n");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(*a, (Allocation{"42", "debug", std::chrono::minutes(10)}));
  auto unlimited = parse_allocation("42", "long|UNLIMITED");
  ASSERT_TRUE(unlimited);
  EXPECT_FALSE(unlimited->time_left);
  for (const char* bad : {"garbage", "debug|soon", "|10:00", ""}) EXPECT_FALSE(parse_allocation("42", bad)) << bad;
}

struct OneAnswer : CommandRunner {
  Result<CommandResult> answer;
  std::vector<std::string> argv;
  std::optional<Environment> env = Environment{{"set", "by the test"}};
  explicit OneAnswer(Result<CommandResult> a) : answer(std::move(a)) {}
  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> a, std::optional<Environment> e,
                                                   std::chrono::milliseconds) override {
    argv = std::move(a);
    env = std::move(e);
    co_return answer;
  }
};

TEST(Allocation, QueryAsksSqueueForThatJobWithTheInheritedEnvironment) {
  boost::asio::io_context ioc;
  OneAnswer squeue(CommandResult{0, "gpu|1-00:00:00\n", ""});
  auto a = run_coro(ioc, query_allocation(squeue, "/opt/slurm/bin/squeue", "77", 5s));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->partition, "gpu");
  EXPECT_EQ(a->time_left, std::chrono::hours(24));
  EXPECT_EQ(squeue.argv, (std::vector<std::string>{"/opt/slurm/bin/squeue", "-h", "-j", "77", "-o", "%P|%L"}));
  EXPECT_FALSE(squeue.env) << "inherits the agent's environment";
}

TEST(Allocation, QueryFailuresAreErrors) {
  boost::asio::io_context ioc;
  OneAnswer failing(CommandResult{1, "", "slurm_load_jobs error: Invalid job id specified\n"});
  auto r = run_coro(ioc, query_allocation(failing, "squeue", "77", 5s));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("Invalid job id specified"), std::string::npos) << r.error().message;
  OneAnswer silent(CommandResult{0, "", ""});
  EXPECT_FALSE(run_coro(ioc, query_allocation(silent, "squeue", "77", 5s)));
  OneAnswer hung(nymph::fail("squeue did not finish within 5s"));
  EXPECT_FALSE(run_coro(ioc, query_allocation(hung, "squeue", "77", 5s)));
}

}  // namespace
