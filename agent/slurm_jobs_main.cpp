#include "agent/slurm_jobs_main.hpp"

#include <iostream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>

#include "common/cli_json.hpp"
#include "slurm/child_command_runner.hpp"
#include "slurm/listing.hpp"

namespace nymph::agent {

int slurm_jobs_main(bool json, std::chrono::milliseconds timeout) {
  boost::asio::io_context ioc;
  slurm::ChildCommandRunner commands;
  std::optional<Result<std::vector<slurm::SlurmJobRow>>> rows;
  std::exception_ptr error;
  boost::asio::co_spawn(ioc, slurm::list_slurm_jobs(commands, {.timeout = timeout}),
                        [&](std::exception_ptr e, Result<std::vector<slurm::SlurmJobRow>> r) {
                          error = e;
                          if (!e) rows = std::move(r);
                        });
  ioc.run();
  if (error) std::rethrow_exception(error);
  // "No jobs" is {"jobs": []}; "could not ask" is this error object (exit 1).
  if (!*rows) return cli::report_failure("slurm jobs", "slurmUnavailable", rows->error().message, json);
  if (json)
    std::cout << boost::json::serialize(slurm::listing_to_json(**rows)) << "\n";
  else
    std::cout << slurm::listing_to_table(**rows);
  return 0;
}

}  // namespace nymph::agent
