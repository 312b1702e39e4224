#include "agent/probe.hpp"

#include <cstdlib>
#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <sstream>
#include <vector>

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

std::optional<std::string> find_on_path(const std::string& name, const std::string& path_env) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  std::stringstream ss(path_env);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

ProbeResult probe_host(const ProbeInputs& in) {
  ProbeResult r;
  r.hostname = short_hostname();
  if (in.slurm_runner_enabled) {
    r.sbatch_path = in.sbatch_override ? find_on_path(*in.sbatch_override, in.path_env)
                                       : find_on_path("sbatch", in.path_env);
    if (r.sbatch_path) {
      r.runners.push_back("slurm");
      r.tags["host"] = "slurm";
    }
  }
  return r;
}

std::optional<std::chrono::seconds> parse_slurm_time_left(const std::string& text) {
  long long days = 0;
  std::string rest = text;
  if (auto dash = rest.find('-'); dash != std::string::npos) {
    try {
      std::size_t used = 0;
      days = std::stoll(rest.substr(0, dash), &used);
      if (used != dash || days < 0) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    rest = rest.substr(dash + 1);
  }
  std::vector<long long> parts;
  std::stringstream ss(rest);
  std::string field;
  while (std::getline(ss, field, ':')) {
    if (field.empty() || field.size() > 2 || !std::all_of(field.begin(), field.end(), ::isdigit)) return std::nullopt;
    parts.push_back(std::stoll(field));
  }
  long long h = 0, m = 0, s = 0;
  if (text.find('-') != std::string::npos) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    if (parts.empty() || parts.size() > 3) return std::nullopt;
    h = parts[0];
    m = parts.size() > 1 ? parts[1] : 0;
    s = parts.size() > 2 ? parts[2] : 0;
  } else if (parts.size() == 2) {
    m = parts[0];
    s = parts[1];
  } else if (parts.size() == 3) {
    h = parts[0];
    m = parts[1];
    s = parts[2];
  } else {
    return std::nullopt;
  }
  if (m > 59 || s > 59) return std::nullopt;
  return std::chrono::seconds(((days * 24 + h) * 60 + m) * 60 + s);
}

std::optional<SlurmAllocation> parse_allocation_line(const std::string& job_id, const std::string& line,
                                                     std::chrono::system_clock::time_point now) {
  auto bar = line.find('|');
  if (bar == std::string::npos || bar == 0) return std::nullopt;
  SlurmAllocation a{.job_id = job_id, .partition = line.substr(0, bar)};
  std::string left = line.substr(bar + 1);
  while (!left.empty() && (left.back() == '\n' || left.back() == ' ')) left.pop_back();
  if (auto secs = parse_slurm_time_left(left)) a.end_time = now + *secs;
  else if (left != "UNLIMITED" && left != "NOT_SET") return std::nullopt;
  return a;
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
