// cancellable(): the operation's result, or nullopt once the signal is emitted; either way the signal holds no
// handler afterwards (an attempt's upload signal lives as long as the attempt, and asio keeps a slot's handler and
// its memory until the slot is cleared).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/deadline.hpp"

namespace {

namespace asio = boost::asio;
using nymph::agent::cancellable;

asio::awaitable<int> answer() { co_return 42; }

// Waits on a timer that never expires by itself (a request held until cancelled).
asio::awaitable<int> held() {
  asio::steady_timer timer(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await timer.async_wait(asio::use_awaitable);
  co_return 0;
}

// Spawns cancellable(op, cancel) on `ioc`; its result lands in `got` once it returns.
void spawn_cancellable(asio::io_context& ioc, asio::awaitable<int> op, asio::cancellation_signal& cancel,
                       std::optional<std::optional<int>>& got) {
  asio::co_spawn(
      ioc,
      [&ioc, &cancel, &got, op = std::move(op)]() mutable -> asio::awaitable<void> {
        got = co_await cancellable(ioc.get_executor(), std::move(op), cancel);
      },
      asio::detached);
}

TEST(Cancellable, ReturnsTheResultAndLeavesNoHandlerInTheSignal) {
  asio::io_context ioc;
  asio::cancellation_signal cancel;
  std::optional<std::optional<int>> got;
  spawn_cancellable(ioc, answer(), cancel, got);
  ioc.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 42);
  EXPECT_FALSE(cancel.slot().has_handler()) << "the finished operation's handler (and its memory) is still held";
}

TEST(Cancellable, ReturnsNulloptOnceEmittedAndLeavesNoHandlerInTheSignal) {
  asio::io_context ioc;
  asio::cancellation_signal cancel;
  std::optional<std::optional<int>> got;
  spawn_cancellable(ioc, held(), cancel, got);
  ioc.poll();
  ASSERT_FALSE(got) << "the held operation ended by itself";
  EXPECT_TRUE(cancel.slot().has_handler());
  cancel.emit(asio::cancellation_type::terminal);
  ioc.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::nullopt);
  EXPECT_FALSE(cancel.slot().has_handler());
}

}  // namespace
