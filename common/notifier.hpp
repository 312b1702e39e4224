#pragma once
// Notifier: a single-threaded condition variable for coroutines on one io_context.
#include <chrono>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nymph {

// Waiters suspend in wait(); notify() wakes every current waiter. A waiter re-checks its condition after
// waking. Because everything runs on one thread, checking a condition and then calling wait() without an
// intermediate co_await cannot miss a notify().
class Notifier {
 public:
  explicit Notifier(boost::asio::any_io_executor ex) : timer_(ex, std::chrono::steady_clock::time_point::max()) {}

  // Wakes all coroutines currently in wait().
  void notify() { timer_.cancel(); }

  // Suspends until the next notify() (or, with a deadline, until then, whichever comes first).
  boost::asio::awaitable<void> wait(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
    boost::system::error_code ec;
    if (!deadline) {
      co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      co_return;
    }
    using namespace boost::asio::experimental::awaitable_operators;
    boost::asio::steady_timer until(timer_.get_executor(), *deadline);
    boost::system::error_code ec2;
    co_await (timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec)) ||
              until.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec2)));
  }

 private:
  boost::asio::steady_timer timer_;
};

}  // namespace nymph
