#pragma once
// The Slurm runner's I/O threads. launch_dir is on a shared filesystem, which can stall for minutes (a hung
// NFS server): every open, read, write, fsync and removal there runs on these threads, never on the
// io_context thread, so polls, heartbeats and the other jobs carry on meanwhile. Journal writes go through
// one strand: they happen one at a time, in the order they were issued.
#include <exception>
#include <type_traits>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nymph::runners::slurm {

class IoPool {
 public:
  // Starts `threads` threads (at least 1).
  explicit IoPool(int threads);
  // Waits for all queued work (join()).
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Runs `fn()` on an I/O thread; the awaiting coroutine resumes on its own executor with fn's result, or
  // with the exception fn threw. `fn` must own (capture by value) whatever it reads. Not cancellable: a call
  // that blocks holds only its I/O thread.
  template <class F>
  boost::asio::awaitable<std::invoke_result_t<F&>> run(F fn) {
    co_return co_await boost::asio::co_spawn(pool_.get_executor(), call(std::move(fn)), boost::asio::use_awaitable);
  }

  // run(), in issue order with every other run_ordered() and post_ordered() call.
  template <class F>
  boost::asio::awaitable<std::invoke_result_t<F&>> run_ordered(F fn) {
    co_return co_await boost::asio::co_spawn(ordered_, call(std::move(fn)), boost::asio::use_awaitable);
  }

  // Queues `fn()` like run_ordered() without waiting for it. `fn` must not throw (it reports its own errors).
  template <class F>
  void post_ordered(F fn) {
    static_assert(std::is_nothrow_invocable_v<F&>, "post_ordered: the function must be noexcept");
    boost::asio::post(ordered_, std::move(fn));
  }

  // Waits until every queued call has run, then stops the threads. Further calls are not allowed.
  void join();

 private:
  template <class F>
  static boost::asio::awaitable<std::invoke_result_t<F&>> call(F fn) {
    co_return fn();
  }

  boost::asio::thread_pool pool_;
  boost::asio::strand<boost::asio::thread_pool::executor_type> ordered_;
};

}  // namespace nymph::runners::slurm
