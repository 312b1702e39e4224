#include "agent/status_file.hpp"

#include <boost/json.hpp>

#include "common/files.hpp"

namespace nymph::agent {

namespace json = boost::json;

namespace {
std::int64_t to_unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::chrono::system_clock::time_point from_unix_ms(std::int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}
}  // namespace

Result<void> write_status_file(const std::filesystem::path& path, const DaemonStatus& s,
                               StatusDurability durability) {
  json::object o;
  o["pid"] = s.pid;
  o["launchId"] = s.launch_id;
  o["label"] = s.label;
  o["workerId"] = s.worker_id;
  o["state"] = s.state;
  o["exitReason"] = s.exit_reason ? json::value(*s.exit_reason) : json::value(nullptr);
  o["message"] = s.message;
  o["startedAtMs"] = to_unix_ms(s.started_at);
  o["updatedAtMs"] = to_unix_ms(s.updated_at);
  o["runningJobs"] = s.running_jobs;
  if (!s.runner_trouble.empty()) o["runnerTrouble"] = json::value_from(s.runner_trouble);
  if (s.chain)
    o["chain"] = json::object{{"generation", s.chain->generation},
                              {"state", s.chain->state},
                              {"reason", s.chain->reason},
                              {"successorJobId", s.chain->successor_job_id}};
  std::string text = json::serialize(o) + "\n";

  return write_file_atomically(path, text, 0600,
                               durability == StatusDurability::synced ? Sync::file_and_directory : Sync::none);
}

Result<DaemonStatus> read_status_file(const std::filesystem::path& path) {
  auto text = read_small_file(path, "status file", kMaxConfigFileBytes);
  if (!text) return text.error();
  boost::system::error_code ec;
  auto v = json::parse(*text, ec);
  if (ec || !v.is_object()) return fail(path.string() + " is not a status file");
  const auto& o = v.as_object();
  DaemonStatus s;
  try {
    s.pid = static_cast<int>(o.at("pid").to_number<std::int64_t>());
    s.launch_id = json::value_to<std::string>(o.at("launchId"));
    s.label = json::value_to<std::string>(o.at("label"));
    s.worker_id = json::value_to<std::string>(o.at("workerId"));
    s.state = json::value_to<std::string>(o.at("state"));
    if (o.at("exitReason").is_string()) s.exit_reason = json::value_to<std::string>(o.at("exitReason"));
    s.message = json::value_to<std::string>(o.at("message"));
    s.started_at = from_unix_ms(o.at("startedAtMs").to_number<std::int64_t>());
    s.updated_at = from_unix_ms(o.at("updatedAtMs").to_number<std::int64_t>());
    s.running_jobs = static_cast<int>(o.at("runningJobs").to_number<std::int64_t>());
    if (const auto* t = o.if_contains("runnerTrouble"); t && t->is_object())
      for (const auto& [name, text] : t->as_object())
        if (text.is_string()) s.runner_trouble[std::string(name)] = std::string(text.as_string());
    if (const auto* c = o.if_contains("chain"); c && c->is_object()) {
      const auto& co = c->as_object();
      s.chain = ChainStatus{.generation = co.at("generation").to_number<std::int64_t>(),
                            .state = json::value_to<std::string>(co.at("state")),
                            .reason = json::value_to<std::string>(co.at("reason")),
                            .successor_job_id = json::value_to<std::string>(co.at("successorJobId"))};
    }
  } catch (const std::exception& e) {
    return fail(path.string() + " is not a valid status file: " + e.what());
  }
  return s;
}

}  // namespace nymph::agent
