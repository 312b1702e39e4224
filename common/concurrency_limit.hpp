#pragma once
// ConcurrencyLimit: at most N coroutines of one io_context hold a slot at once; the others wait for one in the
// order they asked (a counting semaphore for one thread). A freed slot goes straight to the oldest waiter, so a
// newcomer never overtakes it.
#include <algorithm>
#include <cstddef>
#include <deque>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/coroutine_warning.hpp"

namespace nymph {

class ConcurrencyLimit {
 public:
  // A held slot; destroying (or resetting) it frees the slot. Move-only. Must not outlive its limit.
  class Permit {
   public:
    Permit() = default;
    explicit Permit(ConcurrencyLimit* owner) : owner_(owner) {}
    Permit(Permit&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Permit& operator=(Permit&& other) noexcept {
      if (this != &other) {
        reset();
        owner_ = std::exchange(other.owner_, nullptr);
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { reset(); }
    // Frees the slot now (nothing if already freed).
    void reset() {
      if (auto* o = std::exchange(owner_, nullptr)) o->release();
    }

   private:
    ConcurrencyLimit* owner_ = nullptr;
  };

  // At most `limit` slots at once (at least 1).
  explicit ConcurrencyLimit(std::size_t limit) : limit_(std::max<std::size_t>(limit, 1)) {}
  ConcurrencyLimit(const ConcurrencyLimit&) = delete;
  ConcurrencyLimit& operator=(const ConcurrencyLimit&) = delete;

  // A slot: at once when one is free and nobody waits, otherwise once the waiters before this one got theirs
  // and a slot was freed. A waiter whose coroutine is destroyed meanwhile leaves the queue (and passes on a slot
  // handed to it).
  boost::asio::awaitable<Permit> acquire();

  // Slots held now (granted to a waiter not yet resumed included).
  std::size_t held() const { return held_; }
  // Coroutines waiting for a slot.
  std::size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    Waiter(boost::asio::any_io_executor ex, ConcurrencyLimit* o)
        : timer(ex, boost::asio::steady_timer::time_point::max()), owner(o) {}
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;
    ~Waiter() {
      if (!granted)
        std::erase(owner->waiters_, this);
      else if (!taken)
        owner->release();  // handed a slot, destroyed before it resumed: pass it on
    }
    boost::asio::steady_timer timer;
    ConcurrencyLimit* owner;
    bool granted = false;  // release() handed it a slot
    bool taken = false;    // its acquire() returned the slot as a Permit
  };

  // A permit's slot goes to the oldest waiter, or back to the free ones.
  void release() {
    if (waiters_.empty()) {
      --held_;
      return;
    }
    Waiter* next = waiters_.front();
    waiters_.pop_front();
    next->granted = true;
    next->timer.cancel();
  }

  std::size_t limit_;
  std::size_t held_ = 0;
  std::deque<Waiter*> waiters_;
};

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
inline boost::asio::awaitable<ConcurrencyLimit::Permit> ConcurrencyLimit::acquire() {
  if (held_ < limit_ && waiters_.empty()) {
    ++held_;
    co_return Permit(this);
  }
  Waiter w(co_await boost::asio::this_coro::executor, this);
  waiters_.push_back(&w);
  while (!w.granted) {
    boost::system::error_code ec;
    co_await w.timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  w.taken = true;
  co_return Permit(this);
}
NYMPH_GCC_PR109224_END

}  // namespace nymph
