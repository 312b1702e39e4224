#pragma once
// The DB thread: runs Store operations off the io_context, in batches. Operations queued while a batch runs
// form the next batch: one transaction, one savepoint per operation (an operation that throws or returns an
// error is rolled back alone), one COMMIT (fsync) for all of them, and only then are their callers resumed.
// So everything a caller acknowledges after `co_await run(...)` is durable. It also keeps the state gauges
// (jobs by state, workers by status) in memory: counted once at start, then moved by what each committed
// operation changed (Store::take_changes), so reading them costs no database work.
#include <condition_variable>
#include <atomic>
#include <deque>
#include <future>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/logger.h>

#include "control/store.hpp"

namespace nymph::control {

class DbWorker {
 public:
  // Counts the store's jobs and workers (the gauges' starting point; throws as Store::counts), then starts
  // the DB thread owning `store`.
  DbWorker(std::unique_ptr<Store> store, std::shared_ptr<spdlog::logger> log);
  // Runs what is queued, then joins the thread.
  ~DbWorker();
  DbWorker(const DbWorker&) = delete;
  DbWorker& operator=(const DbWorker&) = delete;

  // Runs `f(Store&)` on the DB thread and resumes the caller on its executor once the batch is committed.
  // Returns what f returned; rethrows what f threw (f's changes are rolled back then), or StorageError when
  // the batch could not begin or commit (nothing of the operation was applied). Not cancellable: the
  // operation always runs to completion.
  //
  // GCC 12 destroys a lambda *temporary* in a co_await expression twice: name the lambda first,
  //   auto op = [id](Store& s) { return s.get_job(id); };
  //   auto r = co_await db.run(std::move(op));
  template <class F>
  boost::asio::awaitable<std::invoke_result_t<F, Store&>> run(F f) {
    using R = std::invoke_result_t<F, Store&>;
    static_assert(!std::is_void_v<R>, "return a value from DB operations");
    auto initiate = [this, f = std::move(f)](auto handler) mutable {
      enqueue(std::make_unique<Op<F, decltype(handler)>>(std::move(f), std::move(handler)));
    };
    auto value = co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&,
                                                      void(std::exception_ptr, std::optional<R>)>(
        std::move(initiate), boost::asio::use_awaitable);
    co_return std::move(*value);
  }

  // Runs `f(Store&)` synchronously on the DB thread, blocking the caller (start-up and tests only). Returns
  // and throws as run().
  template <class F>
  auto run_blocking(F f) {
    std::promise<std::invoke_result_t<F, Store&>> p;
    auto fut = p.get_future();
    enqueue(std::make_unique<BlockingOp<F>>(std::move(f), std::move(p)));
    return fut.get();
  }

  // Operations committed so far and batches used (for metrics and the bench).
  std::uint64_t committed_ops() const { return committed_ops_.load(); }
  std::uint64_t batches() const { return batches_.load(); }
  // Jobs by state and workers by status as committed so far (equal to Store::counts() between batches).
  // Any thread; takes a lock for the copy, runs nothing on the DB thread.
  StateCounts gauges() const;

 private:
  struct OpBase {
    virtual ~OpBase() = default;
    // Runs the operation; false when it must be rolled back (it threw or returned an error).
    virtual bool execute(Store& s) = 0;
    // Hands the outcome to the caller; `commit_error` is set when the batch failed to commit.
    virtual void finish(std::exception_ptr commit_error) = 0;
  };

  template <class R>
  static bool failed(const R& r) {
    if constexpr (requires { r.has_error(); }) return r.has_error();
    else return false;
  }

  // Runs `f` and keeps its value or exception; how the outcome reaches the caller is the subclass's finish().
  template <class F>
  struct OpOf : OpBase {
    using R = std::invoke_result_t<F, Store&>;
    explicit OpOf(F f) : f_(std::move(f)) {}
    bool execute(Store& s) final {
      try {
        value_.emplace(f_(s));
        return !failed(*value_);
      } catch (...) {
        error_ = std::current_exception();
        return false;
      }
    }
    F f_;
    std::optional<R> value_;
    std::exception_ptr error_;
  };

  // Resumes an awaiting coroutine on its executor.
  template <class F, class Handler>
  struct Op final : OpOf<F> {
    Op(F f, Handler h)
        : OpOf<F>(std::move(f)), handler_(std::move(h)), work_(boost::asio::get_associated_executor(handler_)) {}
    void finish(std::exception_ptr commit_error) override {
      if (commit_error) {
        this->error_ = commit_error;
        this->value_.reset();
      }
      auto ex = work_.get_executor();
      boost::asio::post(ex, [h = std::move(handler_), e = this->error_, v = std::move(this->value_)]() mutable {
        std::move(h)(e, std::move(v));
      });
      work_.reset();
    }
    Handler handler_;
    boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work_;
  };

  // Fulfils a promise (run_blocking).
  template <class F>
  struct BlockingOp final : OpOf<F> {
    BlockingOp(F f, std::promise<typename OpOf<F>::R> p) : OpOf<F>(std::move(f)), p_(std::move(p)) {}
    void finish(std::exception_ptr commit_error) override {
      if (commit_error) this->error_ = commit_error;
      if (this->error_) p_.set_exception(this->error_);
      else p_.set_value(std::move(*this->value_));
    }
    std::promise<typename OpOf<F>::R> p_;
  };

  void enqueue(std::unique_ptr<OpBase> op);
  void loop();
  void run_batch(std::deque<std::unique_ptr<OpBase>>& batch);

  std::unique_ptr<Store> store_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex gauges_mutex_;
  StateCounts gauges_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<OpBase>> queue_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> committed_ops_{0};
  std::atomic<std::uint64_t> batches_{0};
  std::thread thread_;
};

}  // namespace nymph::control
