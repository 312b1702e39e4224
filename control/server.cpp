#include "control/server.hpp"

#include <csignal>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/duration.hpp"
#include "common/spawn.hpp"
#include "http/client.hpp"

namespace nymph::control {

namespace asio = boost::asio;

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
  if (s.poll_timeout.count() <= 0 || s.lease_ttl.count() <= 0 || s.stale_after.count() <= 0)
    return fail("--poll-timeout, --lease-ttl and --stale-after must be > 0");
  if (s.limits.max_log_bytes_per_job == 0) return fail("--max-log-bytes-per-job must be > 0");
  if (s.retention.count() < 0 || s.purge_interval.count() <= 0)
    return fail("--retention must be >= 0 (0: keep everything) and --purge-interval > 0");
  if (config.db_path.empty()) return fail("--db is required");
  return listen;
}

void run_server(const ServerConfig& config, std::shared_ptr<spdlog::logger> log,
                const std::function<void(const std::string& url)>& on_listening) {
  auto listen = check(config);
  if (!listen) throw std::runtime_error(listen.error().message);
  std::signal(SIGPIPE, SIG_IGN);

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
  on_listening(http.url());
  ioc.run();
  log->info("stopped");
}

}  // namespace nymph::control
