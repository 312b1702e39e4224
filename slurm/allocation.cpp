#include "slurm/allocation.hpp"

#include "slurm/commands.hpp"
#include "slurm/options.hpp"
#include "slurm/parse.hpp"
#include "slurm/time.hpp"

namespace nymph::slurm {

Result<Allocation> parse_allocation(std::string_view job_id, std::string_view out) {
  std::string_view text = trim(out);
  std::string_view line = trim(text.substr(0, text.find('\n')));
  auto bar = line.find('|');
  auto bad = [&] { return fail("cannot read squeue's allocation line " + printable(out) + " (expected partition|time left)"); };
  if (bar == std::string_view::npos || bar == 0) return bad();
  Allocation a{std::string(job_id), std::string(line.substr(0, bar)), std::nullopt};
  std::string_view left = trim(line.substr(bar + 1));
  if (auto secs = parse_time_left(left)) a.time_left = *secs;
  else if (left != "UNLIMITED" && left != "NOT_SET") return bad();
  return a;
}

boost::asio::awaitable<Result<Allocation>> query_allocation(CommandRunner& commands, std::string squeue,
                                                            std::string job_id, std::chrono::milliseconds timeout) {
  auto r = co_await commands.run(allocation_argv(std::move(squeue), job_id), std::nullopt, timeout);
  if (!r) co_return r.error();
  if (r->exit_code != 0) {
    std::string why(trim(r->err));
    co_return fail("squeue exited with status " + std::to_string(r->exit_code) + (why.empty() ? "" : ": " + why));
  }
  co_return parse_allocation(job_id, r->out);
}

}  // namespace nymph::slurm
