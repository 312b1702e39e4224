#pragma once
// The admin CLI's connection to a control plane: the /v1 API with an admin token, over nymph::http.
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "common/error.hpp"
#include "control/admin/target.hpp"
#include "http/client.hpp"
#include "protocol/protocol.hpp"

namespace nymph::control::admin {

class Api {
 public:
  // Resolves the target (resolve_target) and makes a client for it on `ex`. Returns an Error saying what is
  // missing or wrong (no token, bad URL, unreadable CA file).
  static Result<Api> connect(boost::asio::any_io_executor ex, const AdminOptions& o);

  // Sends a request with the token. Returns the response when its status is 2xx; otherwise an Error
  // "HTTP <status> <code>: <message>" from the server's error body, or the transport's error.
  boost::asio::awaitable<Result<http::Response>> call(http::Method m, std::string target, std::string body = {});

  // call(), then the body decoded as T (an Error naming the bad field when it does not decode).
  template <class T>
  boost::asio::awaitable<Result<T>> get(http::Method m, std::string target, std::string body = {}) {
    auto r = co_await call(m, std::move(target), std::move(body));
    if (!r) co_return r.error();
    co_return protocol::parse_as<T>(r->body);
  }

 private:
  Api(http::Client c, std::string token) : client_(std::move(c)), token_(std::move(token)) {}
  http::Client client_;
  std::string token_;
};

// Runs one command coroutine to completion on a private io_context and returns its result.
template <class T>
T run_sync(boost::asio::awaitable<T> aw) {
  boost::asio::io_context ioc(1);
  auto fut = boost::asio::co_spawn(ioc, std::move(aw), boost::asio::use_future);
  ioc.run();
  return fut.get();
}

}  // namespace nymph::control::admin
