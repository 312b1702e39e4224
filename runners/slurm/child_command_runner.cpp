#include "runners/slurm/child_command_runner.hpp"

#include "common/duration.hpp"
#include "runners/child_process.hpp"

namespace nymph::runners::slurm {

boost::asio::awaitable<Result<CommandResult>> ChildCommandRunner::run(
    std::vector<std::string> argv, std::optional<std::map<std::string, std::string>> env,
    std::chrono::milliseconds timeout) {
  const std::string program = argv.empty() ? std::string() : argv.front();
  // Named locals, not temporaries or default arguments, go into the coroutine call: GCC 12 frees a
  // defaulted CommandOptions argument of run_command twice (ASan bad-free) when it is left out.
  Environment environment = env ? std::move(*env) : current_environment();
  CommandOptions options;
  auto r = co_await run_command(std::move(argv), std::move(environment), timeout, options);
  if (!r) co_return r.error();
  if (r->timed_out) co_return fail(program + " did not finish within " + format_duration(timeout));
  int code = r->status.exit_code ? *r->status.exit_code : 128 + r->status.signal.value_or(0);
  co_return CommandResult{code, std::move(r->out), std::move(r->err)};
}

}  // namespace nymph::runners::slurm
