#pragma once
// `nymph-control serve`: wires the store, the DB thread, the service and the HTTP server onto one io_context.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <spdlog/logger.h>

#include "control/http_server.hpp"
#include "control/service.hpp"

namespace nymph::control {

struct ServerConfig {
  std::string listen = "127.0.0.1:8470";
  std::string db_path;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  bool allow_insecure_remote = false;  // plain HTTP on a non-loopback address
  std::optional<std::size_t> max_connections;  // nullopt: default_max_connections(the open-files limit)
  std::size_t max_body_memory = FrontLimits{}.max_body_memory;
  std::chrono::milliseconds head_timeout = FrontLimits{}.head_timeout;
  ServiceConfig service;
};

// Checks the combination of options (TLS pair, plain HTTP only on loopback unless allowed, durations > 0,
// at least one connection, a body budget that holds the largest body). Returns an Error saying what to
// change. The result's limits.max_connections is `config.max_connections` or 0 (run_server derives it).
Result<ListenConfig> check(const ServerConfig& config);

// Runs `ioc` until it runs out of work or is stopped. An exception that escapes a handler (a std::bad_alloc
// inside an asynchronous operation, say) is logged and the loop goes on: no request ends the process.
void run_io(boost::asio::io_context& ioc, spdlog::logger& log);

// Serves until SIGTERM or SIGINT, then shuts down cleanly (held polls answered, connections closed, the DB
// thread drained). `on_listening(url)` is called once the socket listens. Throws std::runtime_error for
// start-up errors (bad options, database, bind, certificate).
void run_server(const ServerConfig& config, std::shared_ptr<spdlog::logger> log,
                const std::function<void(const std::string& url)>& on_listening);

}  // namespace nymph::control
