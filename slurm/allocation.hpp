#pragma once
// The Slurm allocation a process runs in (SLURM_JOB_ID), as squeue reports it: partition and time left.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "common/error.hpp"
#include "slurm/command_runner.hpp"

namespace nymph::slurm {

// One job's allocation.
struct Allocation {
  std::string job_id;
  std::string partition;
  std::optional<std::chrono::seconds> time_left;  // nullopt: no limit (UNLIMITED, NOT_SET)
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

// The squeue format allocation_argv asks for: partition and time left.
inline constexpr std::string_view kAllocationFormat = "%P|%L";

// Parses squeue's answer for allocation_argv: the first non-empty line, "PARTITION|TIME_LEFT" with a time left
// parse_time_left reads, or UNLIMITED / NOT_SET. An Error quoting the output otherwise (also when empty).
Result<Allocation> parse_allocation(std::string_view job_id, std::string_view out);

// Asks `squeue` (with the inherited environment, bounded by `timeout`) for job `job_id`. An Error saying why
// when squeue cannot run, fails, or does not show that job. Never throws for those.
boost::asio::awaitable<Result<Allocation>> query_allocation(CommandRunner& commands, std::string squeue,
                                                            std::string job_id, std::chrono::milliseconds timeout);

}  // namespace nymph::slurm
