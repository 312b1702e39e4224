#pragma once
// The HTTP/1.1 front of the control plane: Beast over TCP or TLS, one coroutine per connection, all on the
// caller's io_context. Parses requests under the protocol limits and hands them to the Service.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <spdlog/logger.h>

#include "common/error.hpp"
#include "control/connection_budget.hpp"

namespace nymph::control {

class Service;

struct ListenConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8470;            // 0: any free port
  std::optional<std::string> tls_cert;  // PEM certificate chain; with tls_key enables HTTPS
  std::optional<std::string> tls_key;
  FrontLimits limits;                   // connections, body bytes, head timeout
};

// Parses "HOST:PORT" or "[V6]:PORT" into host and port. Returns an Error naming the bad text.
Result<ListenConfig> parse_listen(std::string_view text);

class HttpServer {
 public:
  // Binds and listens. Throws std::runtime_error (start-up error) when the address cannot be bound or the
  // certificate/key cannot be loaded.
  HttpServer(boost::asio::io_context& ioc, Service& service, ListenConfig config, std::shared_ptr<spdlog::logger> log);
  ~HttpServer();

  // The bound port (useful with port 0).
  std::uint16_t port() const;
  // "http://HOST:PORT" or "https://HOST:PORT" of the bound address.
  std::string url() const;

  // Accepts connections until stop(). Each connection runs in its own coroutine. At limits.max_connections
  // it closes the connection waiting longest for a request head to make room, or closes the new one at once
  // when every connection is busy with a request. When accept() fails (out of descriptors) it closes such an
  // idle connection and retries, or pauses (100 ms doubling to 1 s; logged once per burst). Never throws
  // but for cancellation.
  boost::asio::awaitable<void> run();

  // Closes the listener and every open connection. Idempotent.
  void stop();

  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nymph::control
