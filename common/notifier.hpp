#pragma once
// Notifier: a single-threaded condition variable for coroutines on one io_context.
#include <chrono>
#include <memory>
#include <optional>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nymph {

// Waiters suspend in wait(); notify() wakes every current waiter. A waiter re-checks its condition after
// waking. Because everything runs on one thread, checking a condition and then calling wait() without an
// intermediate co_await cannot miss a notify(). A Notifier must outlive its waiters.
//
// A Notifier nobody waits on holds no timer, only an empty pointer: the first waiter makes the timer, and notify()
// or the last waiter to leave drops it. A manager keeps two per tracked job, ten thousand of them mostly idle.
class Notifier {
 public:
  Notifier() = default;

  // Wakes all coroutines currently in wait().
  void notify() {
    if (!timer_) return;
    timer_->cancel();
    timer_.reset();  // the waiters keep it until they wake; the next waiter makes a new one
  }

  // Whether it holds a timer: from a wait() until notify(), or until its last waiter left by its deadline.
  bool holds_timer() const { return timer_ != nullptr; }

  // Suspends until the next notify() (or, with a deadline, until then, whichever comes first).
  boost::asio::awaitable<void> wait(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
    if (!timer_)
      timer_ = std::make_shared<boost::asio::steady_timer>(co_await boost::asio::this_coro::executor,
                                                           std::chrono::steady_clock::time_point::max());
    const std::shared_ptr<boost::asio::steady_timer> timer = timer_;
    boost::system::error_code ec;
    if (!deadline) {
      co_await timer->async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    } else {
      using namespace boost::asio::experimental::awaitable_operators;
      boost::asio::steady_timer until(timer->get_executor(), *deadline);
      boost::system::error_code ec2;
      co_await (timer->async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec)) ||
                until.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec2)));
    }
    // Left by its deadline with nobody else waiting: the timer goes. (Not reached by a frame destroyed unresumed.)
    if (timer_ == timer && timer.use_count() == 2) timer_.reset();
  }

 private:
  std::shared_ptr<boost::asio::steady_timer> timer_;  // while someone waits (and notify() has not come since)
};

}  // namespace nymph
