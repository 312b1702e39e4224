#pragma once
// `nymph-control serve`: wires the store, the DB thread, the service and the HTTP server onto one io_context.
#include <functional>
#include <memory>
#include <optional>
#include <string>

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
  ServiceConfig service;
};

// Checks the combination of options (TLS pair, plain HTTP only on loopback unless allowed, durations > 0).
// Returns an Error saying what to change.
Result<ListenConfig> check(const ServerConfig& config);

// Serves until SIGTERM or SIGINT, then shuts down cleanly (held polls answered, connections closed, the DB
// thread drained). `on_listening(url)` is called once the socket listens. Throws std::runtime_error for
// start-up errors (bad options, database, bind, certificate).
void run_server(const ServerConfig& config, std::shared_ptr<spdlog::logger> log,
                const std::function<void(const std::string& url)>& on_listening);

}  // namespace nymph::control
