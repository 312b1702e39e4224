// The Slurm runner's file I/O on a stalled shared filesystem: a job's output file is a FIFO nobody writes, so
// opening it blocks the way a hung NFS mount does. The rest of the runner must carry on meanwhile: another job
// is tracked to its end and reported, and a timer on the io_context fires on time.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "tests/runners/slurm/fake_slurm.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::test {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace nymph::runners;
using namespace nymph::runners::slurm;
using namespace std::chrono_literals;
using asio::experimental::awaitable_operators::operator&&;
using Clock = std::chrono::steady_clock;

// Unblocks the FIFO by opening it read-write (which never blocks and counts as a writer): when the test asks,
// or from a watchdog thread once `deadline` has passed, so a runner that blocks its own thread cannot hang
// the test. The descriptor stays open until finish(), so later opens of the FIFO do not block either.
class FifoRelease {
 public:
  FifoRelease(fs::path path, std::chrono::milliseconds deadline) : path_(std::move(path)) {
    watchdog_ = std::thread([this, deadline] {
      std::unique_lock lock(mutex_);
      if (!done_cv_.wait_for(lock, deadline, [this] { return done_; })) release_locked();
    });
  }
  ~FifoRelease() { finish(); }
  void release() {
    std::lock_guard lock(mutex_);
    release_locked();
  }
  bool released() {
    std::lock_guard lock(mutex_);
    return fd_ >= 0;
  }
  void finish() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  void release_locked() {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  }
  fs::path path_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  int fd_ = -1;
  std::thread watchdog_;
};

struct Outcome {
  JobUpdate other;
  std::string other_out;
  bool stalled_meanwhile = false;  // the FIFO was still stalled when the other job had ended
  Clock::duration timer_late{};
  bool blocked_ended_early = false;
  JobUpdate blocked;
};

struct Scene {
  SlurmRunner* runner;
  FifoRelease* fifo;
  Recorder blocked_rec, other_rec;
  std::optional<JobUpdate> blocked_final;
};

JobSpec spec(std::string id) {
  JobSpec s;
  s.job_id = std::move(id);
  s.lease_id = "lease-" + s.job_id;
  s.argv = {"/bin/true"};
  return s;
}

asio::awaitable<Clock::duration> lateness_of(asio::steady_timer* timer) {
  co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  co_return Clock::now() - timer->expiry();
}

asio::awaitable<void> run_blocked(Scene* scene) {
  scene->blocked_final = co_await scene->runner->run(spec("blocked"), scene->blocked_rec);
}

asio::awaitable<Outcome> play(Scene* scene) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, 300ms);
  // co_spawn dispatches: the blocked job runs right here until it first waits (or blocks this thread).
  asio::co_spawn(ex, run_blocked(scene), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  Outcome o;
  std::tie(o.other, o.timer_late) = co_await (scene->runner->run(spec("other"), scene->other_rec) && lateness_of(&timer));
  o.other_out = scene->other_rec.out;
  o.stalled_meanwhile = !scene->fifo->released();
  o.blocked_ended_early = scene->blocked_final.has_value();
  // Let the blocked read finish, cancel the job and wait for its end, so the io_context runs dry.
  scene->fifo->release();
  scene->runner->stop("blocked", StopReason::user_cancel);
  while (!scene->blocked_final) {
    timer.expires_after(5ms);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  o.blocked = *scene->blocked_final;
  co_return o;
}

TEST(RunnerBlockingIo, AStalledOutputFileHoldsUpNeitherOtherJobsNorTimers) {
  const fs::path launch = fs::temp_directory_path() / ("nymph-slurm-runner-io-" + std::to_string(::getpid()));
  fs::remove_all(launch);
  FakeSlurm fake;
  fake.on_submit = [&](const fs::path& dir) {
    FakeJob j;
    if (dir.filename() == "blocked-1") {
      EXPECT_EQ(::mkfifo((dir / kStdoutFile).c_str(), 0600), 0);
      j.squeue = {"RUNNING|None"};
      j.wrote = true;  // nothing ever writes it: opening it for reading blocks
    } else {
      j.squeue = {"PENDING|Priority", "RUNNING|None", ""};
      j.stdout_bytes = "done\n";
    }
    return j;
  };
  SlurmRunnerConfig c;
  c.launch_dir = launch;
  c.poll_interval = 1ms;
  c.output_interval = 1ms;
  asio::io_context ioc;
  FifoRelease fifo(launch / "blocked-1" / kStdoutFile, 4s);
  Outcome o;
  {
    SlurmRunner runner(ioc.get_executor(), c, std::make_unique<Forward>(fake), nymph::null_logger());
    Scene scene{&runner, &fifo, {}, {}, {}};
    o = run_coro(ioc, play(&scene), 30s);
  }
  fifo.finish();
  fs::remove_all(launch);

  EXPECT_EQ(o.other.state, JobState::succeeded) << o.other.message;
  EXPECT_EQ(o.other_out, "done\n");
  EXPECT_TRUE(o.stalled_meanwhile) << "the other job ended only once the stalled file was released";
  EXPECT_LT(o.timer_late, 1s) << "the io_context thread was blocked for "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(o.timer_late).count() << " ms";
  EXPECT_FALSE(o.blocked_ended_early);
  EXPECT_EQ(o.blocked.state, JobState::cancelled) << o.blocked.message;
}

}  // namespace
}  // namespace nymph::test
