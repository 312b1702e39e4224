#pragma once
// The readers of one child's output pipes and how they stop. Reading to EOF normally ends when the child's
// process group is gone; a process that left the group (setsid) may still hold a pipe, so once the group has
// been ended the readers get a grace period, then take what is buffered and stop.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>

#include "platform/child_process.hpp"

namespace nymph::platform {

// Shared by the readers of one child and the coroutine that ends it; lives as long as all of them. Single-
// threaded: use it on the executor the readers run on.
class ReadGroup {
 public:
  // After final_drain() turned true a reader takes at most this many more bytes per stream, then stops.
  static constexpr std::size_t kFinalDrainBudget = 1024 * 1024;

  // `readers`: how many readers will call reader_done().
  ReadGroup(const boost::asio::any_io_executor& exec, int readers);

  // True once finish() has stopped waiting for EOF: a reader takes what is buffered, then stops.
  bool final_drain() const { return final_drain_; }

  // Each reader calls this exactly once, when it stops (EOF, read error or final drain).
  void reader_done();

  // Call once `child`'s group has been ended: waits up to `grace` for every reader to reach EOF; then sets
  // final_drain(), cancels the pending waits on child's stdout/stderr pipes and waits for the readers to
  // stop. Returns at once when they already have. Not cancellable.
  boost::asio::awaitable<void> finish(ChildProcess& child, std::chrono::milliseconds grace);

 private:
  int readers_;
  bool final_drain_ = false;
  boost::asio::steady_timer all_read_;  // cancelled when the last reader is done
};

}  // namespace nymph::platform
