#include "slurm/child_command_runner.hpp"

namespace nymph::slurm {

boost::asio::awaitable<Result<CommandResult>> ChildCommandRunner::run(std::vector<std::string> argv,
                                                                     std::optional<Environment> env,
                                                                     std::chrono::milliseconds timeout) {
  const std::string program = argv.empty() ? std::string() : argv.front();
  // Named locals, not temporaries or default arguments, go into the coroutine call: GCC 12 frees a
  // defaulted CommandOptions argument of run_command twice (ASan bad-free) when it is left out.
  Environment environment = env ? std::move(*env) : platform::current_environment();
  platform::CommandOptions options;
  options.max_output = max_output_;
  auto r = co_await platform::run_command(std::move(argv), std::move(environment), timeout, options);
  if (r && r->out_truncated && !r->timed_out)
    co_return fail(program + " printed more than " + std::to_string(max_output_) +
                   " bytes; its output is not read (cut, it could be read wrong)");
  co_return platform::timeout_as_error(std::move(r), program, timeout);
}

}  // namespace nymph::slurm
