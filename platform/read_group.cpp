#include "platform/read_group.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nymph::platform {

namespace asio = boost::asio;
using asio::experimental::awaitable_operators::operator||;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

ReadGroup::ReadGroup(const asio::any_io_executor& exec, int readers)
    : readers_(readers), all_read_(exec, Clock::time_point::max()) {}

void ReadGroup::reader_done() {
  if (--readers_ == 0) all_read_.cancel();
}

asio::awaitable<void> ReadGroup::finish(ChildProcess& child, std::chrono::milliseconds grace) {
  if (readers_ > 0) {
    asio::steady_timer timer(all_read_.get_executor(), grace);
    co_await (all_read_.async_wait(use_tuple) || timer.async_wait(use_tuple));
  }
  if (readers_ > 0) {
    final_drain_ = true;
    if (child.out()) child.out()->cancel();
    if (child.err()) child.err()->cancel();
  }
  while (readers_ > 0) {
    all_read_.expires_at(Clock::time_point::max());
    co_await all_read_.async_wait(use_tuple);
  }
}

}  // namespace nymph::platform
