// Runner::launch and ResumableRunner::relaunch as every runner inherits them: the attempt's coroutine (run() or
// resume()) runs on the executor given, and its update reaches the callback once, after the call returned.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>

#include <boost/asio/io_context.hpp>

#include "runners/runner.hpp"

namespace nymph::runners {
namespace {

namespace asio = boost::asio;

// A runner whose run() and resume() end at once with `outcome`, or throw `error` when it is set.
class InstantRunner final : public Runner, public ResumableRunner {
 public:
  JobUpdate outcome{.state = JobState::succeeded, .message = "done"};
  std::optional<std::string> error;
  std::string resumed;  // job_id of the last resume()

  std::string_view name() const override { return "instant"; }
  Lifetime lifetime() const override { return Lifetime::stops_with_agent; }
  asio::awaitable<JobUpdate> run(JobSpec spec, JobReporter&) override {
    if (error) throw std::runtime_error(*error);
    JobUpdate u = outcome;
    u.message += " " + spec.job_id;
    co_return u;
  }
  void stop(const std::string&, StopReason) override {}
  void release(const std::string&) override {}
  std::vector<InFlightAttempt> in_flight() const override { return {}; }
  asio::awaitable<JobUpdate> resume(InFlightAttempt attempt, JobReporter&) override {
    resumed = attempt.job_id;
    co_return outcome;
  }
  asio::awaitable<Result<void>> abandon(InFlightAttempt) override { co_return Result<void>{}; }
};

struct SilentReporter : JobReporter {
  void update(JobUpdate) override {}
  asio::awaitable<void> output(Stream, std::uint64_t, std::string) override { co_return; }
};

struct LaunchTest : ::testing::Test {
  asio::io_context ioc;
  InstantRunner runner;
  SilentReporter reporter;
  std::vector<JobUpdate> done;  // what the callback got, in order
  AttemptDone callback() {
    return [this](JobUpdate u) { done.push_back(std::move(u)); };
  }
};

TEST_F(LaunchTest, RunsUpdateReachesTheCallbackOnceAfterTheCallReturned) {
  runner.launch(ioc.get_executor(), JobSpec{.job_id = "j1"}, reporter, callback());
  EXPECT_TRUE(done.empty()) << "never from inside launch()";
  ioc.run();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].state, JobState::succeeded);
  EXPECT_EQ(done[0].message, "done j1");
}

TEST_F(LaunchTest, AnExceptionFromRunIsAFailedUpdateNamingIt) {
  runner.error = "the backend fell over";
  runner.launch(ioc.get_executor(), JobSpec{.job_id = "j1"}, reporter, callback());
  ioc.run();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].state, JobState::failed);
  EXPECT_EQ(done[0].message, "runner error: the backend fell over");
}

TEST_F(LaunchTest, RelaunchHandsResumesUpdateToTheCallbackAfterTheCallReturned) {
  runner.relaunch(ioc.get_executor(), InFlightAttempt{.job_id = "left"}, reporter, callback());
  EXPECT_TRUE(done.empty()) << "never from inside relaunch()";
  ioc.run();
  EXPECT_EQ(runner.resumed, "left");
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].state, JobState::succeeded);
}

}  // namespace
}  // namespace nymph::runners
