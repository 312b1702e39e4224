#include "agent/probe.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>
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
      r.runners.emplace_back("slurm");
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
  auto scontrol = platform::find_on_path((std::filesystem::path(*squeue).parent_path() / "scontrol").string(), in.path_env);
  if (!scontrol) scontrol = platform::find_on_path("scontrol", in.path_env);
  if (scontrol) {
    std::vector<std::string> argv{*scontrol, "show", "config"};
    auto shown = co_await commands.run(std::move(argv), slurm::scrubbed_environment(), in.command_timeout);
    if (shown && shown->exit_code == 0) r.allocation->kill_wait = parse_kill_wait(shown->out);
  }
  if (!r.allocation->kill_wait) log->warn("cannot read KillWait from `scontrol show config`; assuming 30 s");
  const auto& end = r.allocation->end_time;
  log->info("running inside Slurm job {} (partition {}, ends {})", job_id, r.allocation->partition,
            end ? protocol::format_time(*end) : std::string("never"));
  co_return r;
}

std::optional<std::chrono::seconds> parse_kill_wait(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.substr(0, 8) != "KillWait") continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos || line.find_first_not_of(' ', 8) != eq) continue;
    auto digits = line.find_first_not_of(' ', eq + 1);
    if (digits == std::string_view::npos) return std::nullopt;
    long long value = 0;
    std::size_t i = digits;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && value < 1'000'000; ++i) value = value * 10 + (line[i] - '0');
    if (i == digits) return std::nullopt;
    return std::chrono::seconds(value);
  }
  return std::nullopt;
}

std::chrono::milliseconds exit_budget(std::chrono::milliseconds stop_timeout, const std::optional<SlurmAllocation>& a) {
  using namespace std::chrono_literals;
  if (!a) return stop_timeout;
  std::chrono::milliseconds slurm = a->kill_wait.value_or(30s) - 3s;
  return std::max<std::chrono::milliseconds>(1s, std::min(stop_timeout, slurm));
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
