#pragma once
// When status.json may be rewritten for a change of its running-jobs count alone: every finished job changes
// it, and each rewrite is a new file renamed over the old one (an inode created and one freed, on the
// io_context thread). Paced, a busy daemon rewrites it at most once per gap; a change of state, exit reason or
// runner trouble is not paced (the daemon writes it at once and reports it with wrote()). Sans-io: the daemon
// arms one timer for deferred().
#include <chrono>
#include <optional>

namespace nymph::agent {

class StatusPacer {
 public:
  using Clock = std::chrono::steady_clock;

  // At most one paced write per `min_gap`.
  explicit StatusPacer(std::chrono::milliseconds min_gap) : gap_(min_gap) {}

  // A paced change at `now`: true when it is to be written now (the last write is at least a gap old);
  // otherwise it is pending, due at deferred().
  bool change(Clock::time_point now) {
    if (!last_write_ || now - *last_write_ >= gap_) return true;
    pending_ = true;
    return false;
  }
  // A write at `now`, paced or not: it carries every pending change.
  void wrote(Clock::time_point now) {
    last_write_ = now;
    pending_ = false;
  }
  // When the pending change is due; nullopt when none is pending.
  std::optional<Clock::time_point> deferred() const {
    if (!pending_) return std::nullopt;
    return *last_write_ + gap_;
  }

 private:
  std::chrono::milliseconds gap_;
  std::optional<Clock::time_point> last_write_;
  bool pending_ = false;
};

}  // namespace nymph::agent
