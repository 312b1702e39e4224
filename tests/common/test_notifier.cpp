// Notifier: notify() wakes every current waiter, a deadline ends one wait, and a Notifier nobody waits on holds no
// timer (a manager keeps two per tracked job).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "common/notifier.hpp"

namespace {

namespace asio = boost::asio;
using nymph::Notifier;
using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Waits on `n` (until `deadline`, if any) and counts the wake-up.
asio::awaitable<void> wait_once(Notifier* n, int* woken, Deadline deadline = std::nullopt) {
  co_await n->wait(deadline);
  ++*woken;
}

TEST(Notifier, NotifyWakesEveryCurrentWaiterAndDropsTheTimer) {
  asio::io_context ioc;
  Notifier n;
  EXPECT_FALSE(n.holds_timer()) << "nobody waits: no timer";
  int woken = 0;
  for (int i = 0; i < 3; ++i) asio::co_spawn(ioc, wait_once(&n, &woken), asio::detached);
  ioc.poll();
  EXPECT_EQ(woken, 0);
  EXPECT_TRUE(n.holds_timer());

  n.notify();
  EXPECT_FALSE(n.holds_timer()) << "notify() drops the timer; its waiters keep it until they wake";
  // A waiter arriving after the notify() waits for the next one.
  asio::co_spawn(ioc, wait_once(&n, &woken), asio::detached);
  ioc.poll();
  EXPECT_EQ(woken, 3);
  EXPECT_TRUE(n.holds_timer());

  n.notify();
  ioc.poll();
  EXPECT_EQ(woken, 4);
  EXPECT_FALSE(n.holds_timer());
}

TEST(Notifier, TheLastWaiterToLeaveByItsDeadlineDropsTheTimer) {
  asio::io_context ioc;
  Notifier n;
  int woken = 0;
  const auto now = std::chrono::steady_clock::now();
  asio::co_spawn(ioc, wait_once(&n, &woken, now), asio::detached);                        // due at once
  asio::co_spawn(ioc, wait_once(&n, &woken, now + std::chrono::hours(1)), asio::detached);  // still waiting
  while (woken == 0) ioc.run_one();
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(n.holds_timer()) << "another waiter still waits on it";

  n.notify();
  ioc.run();  // the remaining waiter wakes; its deadline timer is cancelled with it
  EXPECT_EQ(woken, 2);
  EXPECT_FALSE(n.holds_timer());

  asio::co_spawn(ioc, wait_once(&n, &woken, std::chrono::steady_clock::now()), asio::detached);
  ioc.restart();
  ioc.run();
  EXPECT_EQ(woken, 3);
  EXPECT_FALSE(n.holds_timer()) << "its only waiter left by its deadline";
}

}  // namespace
