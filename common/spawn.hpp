#pragma once
// The completion handler every co_spawn gets: an exception that escapes a spawned coroutine is logged with what
// the coroutine was doing, never lost and never thrown into io_context::run().
#include <exception>
#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace nymph {

// For co_spawn(ex, coro(), log_failure(log, "the delivery of job x")): logs "<what> failed: <exception>" at
// error level.
inline auto log_failure(std::shared_ptr<spdlog::logger> log, std::string what) {
  return [log = std::move(log), what = std::move(what)](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log->error("{} failed: {}", what, ex.what());
    } catch (...) {
      log->error("{} failed: unknown exception", what);
    }
  };
}

}  // namespace nymph
