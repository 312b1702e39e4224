#include "control/server.hpp"

#include <algorithm>
#include <csignal>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/duration.hpp"
#include "common/spawn.hpp"
#include "http/client.hpp"

namespace nymph::control {

namespace asio = boost::asio;

namespace {

void log_front_limits(spdlog::logger& log, const FrontLimits& limits, OpenFilesLimit files) {
  if (files.after != files.before) log.info("open files limit raised from {} to {}", files.before, files.after);
  else log.info("open files limit {}", files.after);
  log.info("at most {} connections, {} bytes of request bodies in memory, {} ms for a new connection's first request",
           limits.max_connections, limits.max_body_memory, limits.head_timeout.count());
  if (limits.max_connections + 64 > files.after)
    log.warn("--max-connections {} leaves fewer than 64 of the {} open files for the database and log files: "
             "accept() will fail (and pause) before the connection limit is reached",
             limits.max_connections, files.after);
}

}  // namespace

Result<ListenConfig> check(const ServerConfig& config) {
  auto listen = parse_listen(config.listen);
  if (!listen) return listen.error();
  listen->tls_cert = config.tls_cert;
  listen->tls_key = config.tls_key;
  if (config.tls_cert.has_value() != config.tls_key.has_value()) return fail("--tls-cert and --tls-key go together");
  bool tls = config.tls_cert.has_value();
  if (!tls && !http::is_loopback_host(listen->host) && !config.allow_insecure_remote)
    return fail("refusing plain HTTP on non-loopback address " + listen->host +
                ": tokens would cross the network in clear text (use --tls-cert/--tls-key, or "
                "--allow-insecure-remote if you really mean it)");
  const auto& s = config.service;
  if (s.poll_timeout.count() <= 0 || s.lease_ttl.count() <= 0 || s.stale_after.count() <= 0 ||
      config.head_timeout.count() <= 0)
    return fail("--poll-timeout, --lease-ttl, --stale-after and --head-timeout must be > 0");
  if (s.limits.max_log_bytes_per_job == 0) return fail("--max-log-bytes-per-job must be > 0");
  if (s.retention.count() < 0 || s.purge_interval.count() <= 0)
    return fail("--retention must be >= 0 (0: keep everything) and --purge-interval > 0");
  if (config.max_connections && *config.max_connections == 0) return fail("--max-connections must be at least 1");
  std::size_t largest_body = std::max(s.limits.max_json_body, s.limits.max_log_chunk);
  if (config.max_body_memory < largest_body)
    return fail("--max-body-memory must be at least " + std::to_string(largest_body) +
                " bytes (the largest request body), or that request could never be served");
  listen->limits = {config.max_connections.value_or(0), config.max_body_memory, config.head_timeout};
  if (config.db_path.empty()) return fail("--db is required");
  return listen;
}

void run_io(asio::io_context& ioc, spdlog::logger& log) {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      log.error("an operation failed outside any request, serving on: {}", e.what());
    } catch (...) {
      log.error("an operation failed outside any request, serving on: an exception that is not a std::exception");
    }
  }
}

void run_server(const ServerConfig& config, std::shared_ptr<spdlog::logger> log,
                const std::function<void(const std::string& url)>& on_listening) {
  auto listen = check(config);
  if (!listen) throw std::runtime_error(listen.error().message);
  std::signal(SIGPIPE, SIG_IGN);
  auto files = raise_open_files_limit();
  if (listen->limits.max_connections == 0) listen->limits.max_connections = default_max_connections(files.after);

  asio::io_context ioc(1);
  DbWorker db(Store::open(config.db_path, {}, log), log);
  Service service(ioc.get_executor(), db, config.service, log);
  service.load_state();
  HttpServer http(ioc, service, *listen, log);

  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    log->info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    service.stop();
    http.stop();
  });
  asio::co_spawn(ioc, http.run(), log_failure(log, "listener"));
  asio::co_spawn(ioc, service.run_clocks(), log_failure(log, "lease clock"));
  asio::co_spawn(ioc, service.run_purges(), log_failure(log, "purge"));

  log->info("nymph-control serving {} with database {} (poll {} ms, lease {} ms, stale {} ms, retention {})",
            http.url(), config.db_path, config.service.poll_timeout.count(), config.service.lease_ttl.count(),
            config.service.stale_after.count(),
            config.service.retention.count() > 0 ? format_duration(config.service.retention) : "forever");
  log_front_limits(*log, listen->limits, files);
  on_listening(http.url());
  run_io(ioc, *log);
  log->info("stopped");
}

}  // namespace nymph::control
