// The harness itself: run_coro returns values, rethrows, and catches hangs and leaked work.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;
using nymph::test::run_coro;

namespace {
asio::awaitable<int> answer_after(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
  co_return 42;
}
asio::awaitable<void> throws() {
  co_await answer_after(1ms);
  throw std::logic_error("boom");
}
asio::awaitable<void> leaves_a_timer_behind() {
  auto ex = co_await asio::this_coro::executor;
  asio::co_spawn(ex, answer_after(10s), asio::detached);  // intentionally leaked work
  co_return;
}
}  // namespace

TEST(RunCoro, ReturnsTheValue) {
  asio::io_context ioc;
  EXPECT_EQ(run_coro(ioc, answer_after(1ms)), 42);
  EXPECT_EQ(run_coro(ioc, answer_after(1ms)), 42);  // reusable
}

TEST(RunCoro, RethrowsTheException) {
  asio::io_context ioc;
  EXPECT_THROW(run_coro(ioc, throws()), std::logic_error);
}

TEST(RunCoro, HangGuardFires) {
  asio::io_context ioc;
  EXPECT_THROW(run_coro(ioc, answer_after(10s), 50ms), std::runtime_error);
}

TEST(RunCoro, DetectsWorkLeftOnTheContext) {
  asio::io_context ioc;
  try {
    run_coro(ioc, leaves_a_timer_behind(), 100ms);
    FAIL() << "leaked work not detected";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("run dry"), std::string::npos) << e.what();
  }
}
