// The Service's retention: the periodic purge and POST /v1/purge.
#include <boost/asio/as_tuple.hpp>

#include "common/duration.hpp"
#include "control/service.hpp"
#include "control/service_detail.hpp"

namespace nymph::control {

namespace asio = boost::asio;
using namespace detail;

namespace {

constexpr int kPurgeBatch = 500;  // jobs (and workers) per database operation: other requests wait less

}  // namespace

asio::awaitable<void> Service::run_purges() {
  if (config_.retention.count() <= 0) co_return;
  while (!stopping_) {
    try {
      co_await purge(config_.retention);
    } catch (const std::exception& e) {
      log_->error("purge of what is older than {} failed: {}", format_duration(config_.retention), e.what());
    }
    if (stopping_) break;
    purge_timer_.expires_after(config_.purge_interval);
    co_await purge_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<protocol::PurgeResponse> Service::purge(std::chrono::milliseconds older_than) {
  const WallTime cutoff = wall_now() - older_than;
  protocol::PurgeResponse total;
  total.older_than_s = std::chrono::duration<double>(older_than).count();
  for (bool more = true; more;) {
    auto op = [cutoff](Store& s) { return s.purge(cutoff, kPurgeBatch); };
    PurgeOutcome r = co_await db_.run(std::move(op));
    for (const auto& w : r.worker_ids) {
      cancels_sent_.erase(w);
      forget_worker_credential(w);
    }
    total.jobs += r.jobs;
    total.workers += r.workers;
    total.log_files += r.log_files;
    more = r.more;
  }
  if (total.jobs > 0 || total.workers > 0)
    log_->info("purged {} finished jobs ({} log files) and {} gone or stale workers older than {}", total.jobs,
               total.log_files, total.workers, format_duration(older_than));
  co_return total;
}

asio::awaitable<HttpReply> Service::purge_now(const HttpRequest& req) {
  auto body = decode<protocol::PurgeRequest>(req.body, config_.limits);
  if (!body) co_return body.error();
  std::chrono::milliseconds older_than = config_.retention;
  if (body->older_than_s)
    older_than = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(*body->older_than_s));
  else if (older_than.count() <= 0)
    co_return error_reply(400, "badRequest", "this server keeps everything (--retention 0): give 'olderThanS'");
  auto purged = co_await purge(older_than);
  co_return json_reply(200, purged);
}

}  // namespace nymph::control
