#include "installer/launch_record.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <boost/json.hpp>

#include "common/files.hpp"
#include "installer/plan.hpp"
#include "slurm/parse.hpp"

namespace nymph::installer {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

Result<std::string> get_string(const json::object& o, std::string_view key, bool required = true) {
  auto* v = o.if_contains(key);
  if (!v || v->is_null()) {
    if (required) return fail("missing \"" + std::string(key) + "\"");
    return std::string{};
  }
  if (!v->is_string()) return fail("\"" + std::string(key) + "\" is not a string");
  return std::string(v->as_string());
}

Result<std::optional<std::int64_t>> get_int(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v || v->is_null()) return std::optional<std::int64_t>{};
  if (v->is_int64()) return std::optional<std::int64_t>{v->as_int64()};
  if (v->is_uint64() && v->as_uint64() <= INT64_MAX)
    return std::optional<std::int64_t>{static_cast<std::int64_t>(v->as_uint64())};
  return fail("\"" + std::string(key) + "\" is not an integer");
}

LaunchState classify_slurm(const LaunchRecord& r, const Observation& obs) {
  if (r.slurm_job_id.empty()) return r.start_error.empty() ? LaunchState::unknown : LaunchState::exited;
  if (!obs.slurm_state) return LaunchState::unknown;
  const std::string& s = *obs.slurm_state;
  if (s.empty()) return LaunchState::exited;
  // CONFIGURING: the allocation is granted and its nodes boot, so the launch counts as running already.
  switch (s == "CONFIGURING" ? slurm::SlurmPhase::running : slurm::phase_of(s)) {
    case slurm::SlurmPhase::pending: return LaunchState::queued;
    case slurm::SlurmPhase::finished: return LaunchState::exited;
    case slurm::SlurmPhase::running:
    case slurm::SlurmPhase::unknown: break;
  }
  return LaunchState::running;
}

}  // namespace

json::value to_json(const LaunchRecord& r) {
  json::object o;
  o["launchId"] = r.launch_id;
  o["workerLabel"] = r.worker_label;
  o["mode"] = r.mode;
  o["host"] = r.host;
  o["server"] = r.server;
  o["configPath"] = r.config_path.native();
  o["logPath"] = r.log_path.native();
  json::array cmd;
  for (const auto& a : r.command) cmd.emplace_back(a);
  o["command"] = std::move(cmd);
  o["createdAtMs"] = r.created_at_ms;
  o["pid"] = r.pid ? json::value(*r.pid) : json::value(nullptr);
  o["slurmJobId"] = r.slurm_job_id.empty() ? json::value(nullptr) : json::value(r.slurm_job_id);
  if (!r.start_error.empty()) o["startError"] = r.start_error;
  if (r.keep) o["keep"] = true;
  return o;
}

Result<LaunchRecord> launch_record_from_json(const json::value& v) {
  if (!v.is_object()) return fail("not a JSON object");
  const auto& o = v.as_object();
  LaunchRecord r;
  struct Field {
    const char* key;
    std::string* out;
    bool required;
  };
  std::string config, log;
  for (auto [key, out, required] :
       {Field{"launchId", &r.launch_id, true}, Field{"workerLabel", &r.worker_label, true},
        Field{"mode", &r.mode, true}, Field{"host", &r.host, true}, Field{"server", &r.server, false},
        Field{"configPath", &config, true}, Field{"logPath", &log, true},
        Field{"slurmJobId", &r.slurm_job_id, false}, Field{"startError", &r.start_error, false}}) {
    auto s = get_string(o, key, required);
    if (!s) return s.error();
    *out = *s;
  }
  if (r.mode != "local" && r.mode != "slurm") return fail("\"mode\" must be \"local\" or \"slurm\"");
  r.config_path = config;
  r.log_path = log;
  if (auto* cmd = o.if_contains("command"); cmd && cmd->is_array()) {
    for (const auto& a : cmd->as_array()) {
      if (!a.is_string()) return fail("\"command\" must be an array of strings");
      r.command.emplace_back(a.as_string());
    }
  }
  auto created = get_int(o, "createdAtMs");
  if (!created) return created.error();
  r.created_at_ms = created->value_or(0);
  auto pid = get_int(o, "pid");
  if (!pid) return pid.error();
  if (*pid) {
    if (**pid <= 1 || **pid > INT32_MAX) return fail("\"pid\" is out of range");
    r.pid = static_cast<int>(**pid);
  }
  if (const auto* keep = o.if_contains("keep")) {
    if (!keep->is_bool()) return fail("\"keep\" must be true or false");
    r.keep = keep->as_bool();
  }
  return r;
}

Result<LaunchRecord> read_launch_record(const fs::path& dir) {
  auto text = read_small_file(dir / kLaunchFile, "launch record", kMaxConfigFileBytes);
  if (!text) return text.error();
  boost::system::error_code ec;
  auto v = json::parse(*text, ec);
  if (ec) return fail((dir / kLaunchFile).string() + ": not JSON (" + ec.message() + ")");
  auto r = launch_record_from_json(v);
  if (!r) return fail((dir / kLaunchFile).string() + ": " + r.error().message);
  return r;
}

Result<void> write_launch_record(const fs::path& dir, const LaunchRecord& record) {
  std::string text = json::serialize(to_json(record)) + "\n";
  auto path = dir / kLaunchFile;
  auto tmp = dir / (std::string(kLaunchFile) + ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail("cannot write " + tmp.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  int err = 0;
  while (done < text.size() && err == 0) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fail("cannot write " + path.string() + ": " + std::strerror(err));
  }
  return {};
}

Result<StatusSnapshot> parse_status(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return fail("not a JSON object");
  const auto& o = v.as_object();
  StatusSnapshot s;
  auto pid = get_int(o, "pid");
  if (!pid) return pid.error();
  if (!*pid || **pid <= 0 || **pid > INT32_MAX) return fail("\"pid\" is missing or out of range");
  s.pid = static_cast<int>(**pid);
  auto state = get_string(o, "state");
  if (!state) return state.error();
  if (state->empty()) return fail("\"state\" is empty");
  s.state = *state;
  if (auto w = get_string(o, "workerId", false)) s.worker_id = *w;
  if (auto m = get_string(o, "message", false)) s.message = *m;
  if (auto* r = o.if_contains("exitReason"); r && r->is_string()) s.exit_reason = std::string(r->as_string());
  if (auto* t = o.if_contains("runnerTrouble"); t && t->is_object())
    for (const auto& [name, text] : t->as_object())
      if (text.is_string() && !text.as_string().empty()) s.runner_trouble[std::string(name)] = std::string(text.as_string());
  if (auto* c = o.if_contains("chain"); c && c->is_object()) s.chain = *c;
  return s;
}

Result<StatusSnapshot> read_status(const fs::path& dir, const std::string& file) {
  auto text = read_small_file(dir / file, "status file", kMaxConfigFileBytes);
  if (!text) return text.error();
  auto s = parse_status(*text);
  if (!s) return fail((dir / file).string() + ": " + s.error().message);
  return s;
}

const char* to_string(LaunchState state) {
  switch (state) {
    case LaunchState::running: return "running";
    case LaunchState::queued: return "queued";
    case LaunchState::exited: return "exited";
    case LaunchState::unknown: break;
  }
  return "unknown";
}

LaunchState classify(const LaunchRecord& r, const Observation& obs) {
  if (r.mode == "slurm") return classify_slurm(r, obs);
  if (!r.start_error.empty() && !obs.process_running) return LaunchState::exited;
  if (!obs.on_this_host || !r.pid) return LaunchState::unknown;
  return obs.process_running ? LaunchState::running : LaunchState::exited;
}

}  // namespace nymph::installer
