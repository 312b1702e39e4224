#pragma once
// run_coro: run one coroutine to completion on an io_context under a hang guard.
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

namespace nymph::test {

// Spawns `aw` on `ioc`, runs the context for at most `timeout`, and returns the coroutine's value (rethrowing
// its exception). Throws std::runtime_error when the coroutine has not finished by then (a hang) or when the
// io_context still had work after the coroutine finished (something outlived the test: a timer, a socket,
// a detached coroutine). `ioc` is restarted first, so it can be reused across calls.
template <class T>
T run_coro(boost::asio::io_context& ioc, boost::asio::awaitable<T> aw,
           std::chrono::steady_clock::duration timeout = std::chrono::seconds(30)) {
  using Stored = std::conditional_t<std::is_void_v<T>, bool, T>;
  std::optional<Stored> value;
  std::exception_ptr error;
  bool done = false;
  ioc.restart();
  if constexpr (std::is_void_v<T>) {
    boost::asio::co_spawn(ioc, std::move(aw), [&](std::exception_ptr e) {
      error = e;
      value.emplace(true);
      done = true;
    });
  } else {
    boost::asio::co_spawn(ioc, std::move(aw), [&](std::exception_ptr e, T v) {
      error = e;
      if (!e) value.emplace(std::move(v));
      done = true;
    });
  }
  ioc.run_for(timeout);
  if (!done) {
    ioc.stop();
    throw std::runtime_error("run_coro: coroutine did not finish within the hang guard");
  }
  if (!ioc.stopped()) {
    ioc.stop();
    throw std::runtime_error("run_coro: io_context did not run dry after the coroutine finished (leaked work)");
  }
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<T>) return std::move(*value);
}

}  // namespace nymph::test
