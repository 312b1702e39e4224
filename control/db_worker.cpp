#include "control/db_worker.hpp"

namespace nymph::control {

DbWorker::DbWorker(std::unique_ptr<Store> store, std::shared_ptr<spdlog::logger> log)
    : store_(std::move(store)), log_(std::move(log)), gauges_(store_->counts()), thread_([this] { loop(); }) {}

StateCounts DbWorker::gauges() const {
  std::lock_guard lock(gauges_mutex_);
  return gauges_;
}

DbWorker::~DbWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void DbWorker::enqueue(std::unique_ptr<OpBase> op) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(op));
  }
  wake_.notify_one();
}

void DbWorker::loop() {
  for (;;) {
    std::deque<std::unique_ptr<OpBase>> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      batch.swap(queue_);
    }
    run_batch(batch);
  }
}

void DbWorker::run_batch(std::deque<std::unique_ptr<OpBase>>& batch) {
  std::exception_ptr commit_error;
  StateCounts changes;  // of the operations kept
  try {
    store_->exec("BEGIN IMMEDIATE");
    try {
      for (auto& op : batch) {
        store_->exec("SAVEPOINT op");
        bool keep = op->execute(*store_);
        StateCounts op_changes = store_->take_changes();
        if (keep) changes += op_changes;
        store_->exec(keep ? "RELEASE op" : "ROLLBACK TO op; RELEASE op");
      }
      store_->exec("COMMIT");
    } catch (...) {
      commit_error = std::current_exception();
      try {
        store_->exec("ROLLBACK");
      } catch (...) {
      }
    }
  } catch (...) {
    commit_error = std::current_exception();
  }
  if (commit_error) {
    try {
      std::rethrow_exception(commit_error);
    } catch (const std::exception& e) {
      log_->error("database batch of {} operations failed: {}", batch.size(), e.what());
    }
  } else {
    {
      std::lock_guard lock(gauges_mutex_);
      gauges_ += changes;
    }
    committed_ops_ += batch.size();
    ++batches_;
  }
  for (auto& op : batch) op->finish(commit_error);
}

}  // namespace nymph::control
