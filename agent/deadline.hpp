#pragma once
// Bounding one control-plane call by a deadline or an external cancellation, for the agent's exit budget (A1/A2
// of issue 15): an HTTP request that hangs must not keep a stopping agent past its budget.
#include <chrono>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace nymph::agent {

// Runs `op` on `ex` and returns its result, or nullopt when `cancel` was emitted (terminal) first. The operation
// must honour terminal cancellation (the HTTP control plane does). Other exceptions propagate. `cancel` holds no
// handler afterwards: asio keeps a slot's handler (and its memory) until the slot is cleared or used again, and an
// attempt's signal lives as long as the attempt (a tracked Slurm job's: days, ten thousand of them).
template <class T>
boost::asio::awaitable<std::optional<T>> cancellable(boost::asio::any_io_executor ex, boost::asio::awaitable<T> op,
                                                     boost::asio::cancellation_signal& cancel) {
  std::optional<T> result;
  try {
    result = co_await boost::asio::co_spawn(ex, std::move(op),
                                            boost::asio::bind_cancellation_slot(cancel.slot(), boost::asio::use_awaitable));
  } catch (const boost::system::system_error& e) {
    cancel.slot().clear();
    if (e.code() == boost::asio::error::operation_aborted) co_return std::nullopt;
    throw;
  }
  cancel.slot().clear();
  co_return result;
}

// Runs `op` on `ex` and returns its result, or nullopt when `deadline` came first (the operation is then
// cancelled, terminal). Returns nullopt at once when the deadline has passed.
template <class T>
boost::asio::awaitable<std::optional<T>> until_deadline(boost::asio::any_io_executor ex, boost::asio::awaitable<T> op,
                                                        std::chrono::steady_clock::time_point deadline) {
  if (std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
  boost::asio::cancellation_signal cancel;
  boost::asio::steady_timer timer(ex, deadline);
  // The handler touches `cancel` only when the timer expired, i.e. while this frame still waits below.
  timer.async_wait([&cancel](boost::system::error_code ec) {
    if (!ec) cancel.emit(boost::asio::cancellation_type::terminal);
  });
  auto r = co_await cancellable(ex, std::move(op), cancel);
  timer.cancel();
  co_return r;
}

}  // namespace nymph::agent
