#include "runners/runner.hpp"

#include <exception>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nymph::runners {

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::pending: return "pending";
    case JobState::running: return "running";
    case JobState::succeeded: return "succeeded";
    case JobState::failed: return "failed";
    case JobState::cancelled: return "cancelled";
    case JobState::lost: return "lost";
  }
  return "unknown";
}

bool is_final(JobState s) { return s != JobState::pending && s != JobState::running; }

JobUpdate runner_error(std::exception_ptr e) {
  JobUpdate u{.state = JobState::failed, .message = "runner error: unknown exception"};
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& error) {
    u.message = std::string("runner error: ") + error.what();
  } catch (...) {  // the message above
  }
  return u;
}

namespace {
// Runs `work` on `ex` and hands its update to `done`; an exception is a `failed` update.
void spawn_to_done(const boost::asio::any_io_executor& ex, boost::asio::awaitable<JobUpdate> work, AttemptDone done) {
  boost::asio::co_spawn(ex, std::move(work), [done = std::move(done)](std::exception_ptr e, JobUpdate u) mutable {
    std::move(done)(e ? runner_error(e) : std::move(u));
  });
}
}  // namespace

void Runner::launch(boost::asio::any_io_executor ex, JobSpec spec, JobReporter& reporter, AttemptDone done) {
  spawn_to_done(ex, run(std::move(spec), reporter), std::move(done));
}

void ResumableRunner::relaunch(boost::asio::any_io_executor ex, InFlightAttempt attempt, JobReporter& reporter,
                               AttemptDone done) {
  spawn_to_done(ex, resume(std::move(attempt), reporter), std::move(done));
}


}  // namespace nymph::runners
