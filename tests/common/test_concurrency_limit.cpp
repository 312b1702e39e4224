// ConcurrencyLimit: at most N holders, waiters served oldest first, and a waiter that goes away passes its turn on.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/concurrency_limit.hpp"

namespace {

namespace asio = boost::asio;
using nymph::ConcurrencyLimit;

// Takes a slot, records who got it, and keeps it until the test resets `permits[i]`.
asio::awaitable<void> take(ConcurrencyLimit* limit, int i, std::vector<int>* order,
                           std::vector<ConcurrencyLimit::Permit>* permits) {
  auto p = co_await limit->acquire();
  order->push_back(i);
  (*permits)[static_cast<std::size_t>(i)] = std::move(p);
}

TEST(ConcurrencyLimit, AtMostNHoldersAndTheOldestWaiterIsServedFirst) {
  asio::io_context ioc;
  ConcurrencyLimit limit(2);
  std::vector<int> order;
  std::vector<ConcurrencyLimit::Permit> permits(6);
  for (int i = 0; i < 5; ++i) asio::co_spawn(ioc, take(&limit, i, &order, &permits), asio::detached);
  ioc.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_EQ(limit.held(), 2u);
  EXPECT_EQ(limit.waiting(), 3u);

  permits[1].reset();
  // A newcomer arriving after the slot was freed waits behind the three.
  asio::co_spawn(ioc, take(&limit, 5, &order, &permits), asio::detached);
  ioc.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2})) << "the freed slot went to the oldest waiter, not the newcomer";
  EXPECT_EQ(limit.held(), 2u);
  EXPECT_EQ(limit.waiting(), 3u);

  permits[0].reset();
  permits[2].reset();
  ioc.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  permits[3].reset();
  ioc.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  permits[4].reset();
  permits[5].reset();
  EXPECT_EQ(limit.held(), 0u);
  EXPECT_EQ(limit.waiting(), 0u);
}

// On an io_context of its own: taker 0 holds the only slot of `limit`, taker 1 waits for it; then `meanwhile` runs,
// and the context is destroyed with whatever is still suspended on it.
void one_holds_one_waits(ConcurrencyLimit& limit, std::vector<int>& order,
                         std::vector<ConcurrencyLimit::Permit>& permits, const std::function<void()>& meanwhile) {
  asio::io_context ioc;
  asio::co_spawn(ioc, take(&limit, 0, &order, &permits), asio::detached);
  asio::co_spawn(ioc, take(&limit, 1, &order, &permits), asio::detached);
  ioc.poll();
  meanwhile();
}

TEST(ConcurrencyLimit, AWaiterDestroyedWhileWaitingLeavesTheQueue) {
  ConcurrencyLimit limit(1);
  std::vector<int> order;
  std::vector<ConcurrencyLimit::Permit> permits(2);
  // The waiting coroutine's frame is destroyed with its io_context.
  one_holds_one_waits(limit, order, permits, [&] { EXPECT_EQ(limit.waiting(), 1u); });
  EXPECT_EQ(limit.waiting(), 0u);
  EXPECT_EQ(order, (std::vector<int>{0}));
  permits[0].reset();
  EXPECT_EQ(limit.held(), 0u);
}

TEST(ConcurrencyLimit, AWaiterHandedASlotButDestroyedBeforeItResumedFreesIt) {
  ConcurrencyLimit limit(1);
  std::vector<int> order;
  std::vector<ConcurrencyLimit::Permit> permits(2);
  one_holds_one_waits(limit, order, permits, [&] {
    permits[0].reset();  // handed to waiter 1, which has not run since
    EXPECT_EQ(limit.held(), 1u);
  });
  EXPECT_EQ(order, (std::vector<int>{0}));
  EXPECT_EQ(limit.held(), 0u) << "the slot handed to the destroyed waiter was freed";
}

}  // namespace
