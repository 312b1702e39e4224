#include "platform/command.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <ctime>
#include <exception>
#include <optional>
#include <utility>

#include "common/duration.hpp"
#include "platform/read_group.hpp"

namespace nymph::platform {

namespace asio = boost::asio;
using asio::experimental::awaitable_operators::operator||;
using asio::experimental::awaitable_operators::operator&&;
using boost::system::error_code;
using std::chrono::milliseconds;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// write(2) to a pipe whose reader may be gone: EPIPE instead of a SIGPIPE that would end this process. The
// signal is blocked for this thread around the write, and the one the write raised is consumed.
ssize_t write_without_sigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe_only, old, pending;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ::sigpending(&pending);
  const bool was_pending = ::sigismember(&pending, SIGPIPE) == 1;
  ssize_t n = ::write(fd, data, size);
  const int err = errno;
  if (n < 0 && err == EPIPE && !was_pending) {
    timespec zero{};
    ::sigtimedwait(&pipe_only, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

// Writes `input` to the child's stdin as it reads it, then closes the pipe. Stops early when the child no longer
// reads (EPIPE) or the pipe was closed under it.
asio::awaitable<void> write_input(ChildProcess* child, std::string input) {
  std::size_t done = 0;
  while (child->in() && done < input.size()) {
    ssize_t n = write_without_sigpipe(child->in()->native_handle(), input.data() + done, input.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      auto [ec] = co_await child->in()->async_wait(asio::posix::stream_descriptor::wait_write, use_tuple);
      if (ec) break;
    } else if (!(n < 0 && errno == EINTR)) {
      break;
    }
  }
  child->close_input();
}

// Reads `sd` to EOF into `into` (keeping at most `max` bytes).
asio::awaitable<void> read_bounded(asio::posix::stream_descriptor* sd, std::string* into, bool* truncated,
                                   std::size_t max, ReadGroup* group) {
  char buf[16384];
  std::size_t final_budget = ReadGroup::kFinalDrainBudget;
  for (;;) {
    error_code ec;
    std::size_t n = sd->read_some(asio::buffer(buf), ec);
    if (!ec) {
      std::size_t keep = std::min(n, max - std::min(max, into->size()));
      into->append(buf, keep);
      if (keep < n) *truncated = true;
      if (group->final_drain() && (final_budget -= std::min(final_budget, n)) == 0) break;
      continue;
    }
    if (ec != asio::error::would_block && ec != asio::error::try_again) break;  // EOF or error
    if (group->final_drain()) break;
    co_await sd->async_wait(asio::posix::stream_descriptor::wait_read, use_tuple);
  }
  group->reader_done();
}

asio::awaitable<void> supervise_command(ChildProcess* child, CommandResult* result, milliseconds timeout,
                                        milliseconds grace, ReadGroup* group) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto first = co_await (wait_quietly(*child) || timer.async_wait(use_tuple));
  result->timed_out = first.index() == 1;
  result->status = co_await child->terminate(grace);
  result->exit_code = result->status.shell_code();
  child->close_input();
  co_await group->finish(*child, grace);
}

}  // namespace

asio::awaitable<Result<CommandResult>> run_command(std::vector<std::string> argv, Environment env, milliseconds timeout,
                                                   CommandOptions options) {
  auto exec = co_await asio::this_coro::executor;
  LaunchOptions launch{std::move(argv), std::move(env), options.working_dir};
  launch.input_pipe = !options.input.empty();
  auto child = ChildProcess::launch(exec, std::move(launch));
  if (!child) co_return child.error();

  CommandResult result;
  ReadGroup group(exec, 2);
  co_await (write_input(&*child, std::move(options.input)) &&
            read_bounded(child->out(), &result.out, &result.out_truncated, options.max_output, &group) &&
            read_bounded(child->err(), &result.err, &result.err_truncated, options.max_output, &group) &&
            supervise_command(&*child, &result, timeout, options.kill_grace, &group));
  co_return result;
}

asio::awaitable<Result<CommandResult>> run_command(std::vector<std::string> argv, Environment env,
                                                   milliseconds timeout) {
  // A plain function: the coroutine's CommandOptions is a named local here, never a default argument.
  CommandOptions options;
  return run_command(std::move(argv), std::move(env), timeout, std::move(options));
}

Result<CommandResult> run_command_blocking(std::vector<std::string> argv, Environment env, milliseconds timeout,
                                           CommandOptions options) {
  asio::io_context ioc;
  std::optional<Result<CommandResult>> result;
  std::exception_ptr error;
  asio::co_spawn(ioc, run_command(std::move(argv), std::move(env), timeout, std::move(options)),
                 [&](std::exception_ptr e, Result<CommandResult> r) {
                   error = e;
                   if (!e) result.emplace(std::move(r));
                 });
  ioc.run();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

Result<CommandResult> timeout_as_error(Result<CommandResult> r, std::string_view program, milliseconds timeout) {
  if (r && r->timed_out) return fail(std::string(program) + " did not finish within " + format_duration(timeout));
  return r;
}

}  // namespace nymph::platform
