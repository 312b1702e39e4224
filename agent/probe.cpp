#include "agent/probe.hpp"

#include <cstdlib>
#include <unistd.h>

#include <boost/json.hpp>

#include "platform/environment.hpp"
#include "protocol/protocol.hpp"

namespace nymph::agent {

namespace {
std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string h = buf;
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  return h;
}
}  // namespace

ProbeInputs probe_inputs_from_environment() {
  ProbeInputs in;
  in.path_env = env_or_empty("PATH");
  if (const char* id = std::getenv("SLURM_JOB_ID"); id && *id) in.slurm_job_id = id;
  return in;
}

ProbeResult probe_host(const ProbeInputs& in) {
  ProbeResult r;
  r.hostname = short_hostname();
  if (in.slurm_runner_enabled) {
    r.sbatch_path = platform::find_on_path(in.sbatch_override.value_or("sbatch"), in.path_env);
    if (r.sbatch_path) {
      r.runners.push_back("slurm");
      r.tags["host"] = "slurm";
    }
  }
  return r;
}

SlurmAllocation allocation_at(const slurm::Allocation& a, std::chrono::system_clock::time_point now,
                              std::chrono::steady_clock::time_point steady_now) {
  SlurmAllocation out{.job_id = a.job_id, .partition = a.partition};
  if (a.time_left) {
    out.end_time = now + *a.time_left;
    out.walltime_end = steady_now + *a.time_left;
  }
  return out;
}

boost::asio::awaitable<ProbeResult> probe(ProbeInputs in, slurm::CommandRunner& commands,
                                          std::shared_ptr<spdlog::logger> log) {
  ProbeResult r = probe_host(in);
  if (!in.slurm_job_id) co_return r;
  const std::string& job_id = *in.slurm_job_id;
  auto squeue = platform::find_on_path(in.squeue, in.path_env);
  if (!squeue) {
    log->warn("SLURM_JOB_ID={} is set but squeue was not found; running as a local worker", job_id);
    co_return r;
  }
  auto found = co_await slurm::query_allocation(commands, *squeue, job_id, in.command_timeout);
  if (!found) {
    log->warn("SLURM_JOB_ID={} is set but squeue does not show that job ({}); running as a local worker", job_id,
              found.error().message);
    co_return r;
  }
  r.backend = "slurm";
  r.allocation = allocation_at(*found, std::chrono::system_clock::now(), std::chrono::steady_clock::now());
  const auto& end = r.allocation->end_time;
  log->info("running inside Slurm job {} (partition {}, ends {})", job_id, r.allocation->partition,
            end ? protocol::format_time(*end) : std::string("never"));
  co_return r;
}

boost::json::value to_json(const ProbeResult& r) {
  boost::json::object o;
  o["hostname"] = r.hostname;
  o["backend"] = r.backend;
  boost::json::array runners;
  for (const auto& x : r.runners) runners.emplace_back(x);
  o["runners"] = std::move(runners);
  boost::json::object tags;
  for (const auto& [k, v] : r.tags) tags[k] = v;
  o["tags"] = std::move(tags);
  if (r.sbatch_path) o["sbatch"] = *r.sbatch_path;
  if (r.allocation) {
    boost::json::object s;
    s["jobId"] = r.allocation->job_id;
    s["partition"] = r.allocation->partition;
    if (r.allocation->end_time)
      s["endTime"] = std::chrono::duration_cast<std::chrono::seconds>(r.allocation->end_time->time_since_epoch()).count();
    else
      s["endTime"] = nullptr;
    o["slurm"] = std::move(s);
  } else {
    o["slurm"] = nullptr;
  }
  return o;
}

}  // namespace nymph::agent
