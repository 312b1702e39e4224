#include "control/validate.hpp"

#include <cmath>

namespace nymph::control {

namespace {

// The longest registration identity ("<unix user>@<cluster>").
constexpr std::size_t kMaxIdentity = 200;

std::string q(std::string_view s) { return "'" + std::string(s.substr(0, 64)) + (s.size() > 64 ? "...'" : "'"); }

Result<void> name(std::string_view field, std::string_view value, const protocol::Limits& l, bool allow_empty = false) {
  if (value.empty() && !allow_empty) return fail("field '" + std::string(field) + "': must not be empty");
  if (value.size() > l.max_name)
    return fail("field '" + std::string(field) + "': longer than " + std::to_string(l.max_name) + " bytes");
  return {};
}

Result<void> names(std::string_view field, const std::vector<std::string>& values, const protocol::Limits& l) {
  for (const auto& v : values)
    if (auto r = name(field, v, l); !r) return r;
  return {};
}

Result<void> tag_map(std::string_view field, const std::map<std::string, std::string>& tags, const protocol::Limits& l) {
  for (const auto& [k, v] : tags) {
    if (auto r = name(field, k, l); !r) return r;
    if (auto r = name(field, v, l, true); !r) return r;
  }
  return {};
}

// What a job runs reaches execve as C strings: a NUL would silently cut the value short.
Result<void> no_nul(const std::string& field, std::string_view value) {
  if (value.find('\0') != std::string_view::npos) return fail("field '" + field + "': contains a NUL byte");
  return {};
}

Result<void> no_nul_in_spec(const protocol::JobSpec& spec) {
  if (spec.argv)
    for (std::size_t i = 0; i < spec.argv->size(); ++i)
      if (auto r = no_nul("argv[" + std::to_string(i) + "]", (*spec.argv)[i]); !r) return r;
  if (spec.command)
    if (auto r = no_nul("command", *spec.command); !r) return r;
  for (const auto& [k, v] : spec.env)
    if (auto r = no_nul("env." + k, v); !r) return r;
  return {};
}

Result<void> refs(const std::vector<protocol::AttemptRef>& running) {
  for (const auto& a : running) {
    if (auto r = protocol::check_id("running.jobId", a.job_id); !r) return r;
    if (auto r = protocol::check_id("running.leaseId", a.lease_id); !r) return r;
  }
  return {};
}

}  // namespace

bool is_env_name(std::string_view n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n.front()))) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

Result<void> validate(const protocol::RegisterRequest& r, const protocol::Limits& l) {
  if (auto x = protocol::check_id("launchId", r.launch_id); !x) return x;
  if (auto x = name("label", r.label, l, true); !x) return x;
  if (auto x = name("hostname", r.hostname, l); !x) return x;
  if (auto x = name("version", r.version, l, true); !x) return x;
  if (r.backend != "local" && r.backend != "slurm")
    return fail("field 'backend': " + q(r.backend) + " (expected local or slurm)");
  if (r.runners.empty()) return fail("field 'runners': must list at least one runner");
  if (auto x = names("runners", r.runners, l); !x) return x;
  if (auto x = names("profiles", r.profiles, l); !x) return x;
  if (auto x = tag_map("tags", r.tags, l); !x) return x;
  for (const auto& [runner, n] : r.capacity)
    if (n < 0) return fail("field 'capacity." + runner + "': must be >= 0");
  if (r.pid < 0) return fail("field 'pid': must be >= 0");
  if (r.slurm && r.slurm->end_time && !protocol::parse_time(*r.slurm->end_time))
    return fail("field 'slurm.endTime': " + q(*r.slurm->end_time) + " is not an RFC 3339 time");
  if (r.slurm && r.slurm->lead_s && (*r.slurm->lead_s < 0 || *r.slurm->lead_s > protocol::kMaxWalltimeLeadS))
    return fail("field 'slurm.leadS': must be 0 to " + std::to_string(protocol::kMaxWalltimeLeadS));
  if (r.generation < 1 || r.generation > protocol::kMaxGeneration)
    return fail("field 'generation': must be 1 to " + std::to_string(protocol::kMaxGeneration));
  if (r.identity) {
    if (r.identity->size() > kMaxIdentity)
      return fail("field 'identity': longer than " + std::to_string(kMaxIdentity) + " bytes");
    for (char c : *r.identity)
      if (c < 0x20 || c > 0x7e) return fail("field 'identity': only printable ASCII characters are allowed");
  }
  return refs(r.running);
}

Result<void> validate(const protocol::PollRequest& r, const protocol::Limits&) {
  for (const auto& [runner, n] : r.free)
    if (n < 0) return fail("field 'free." + runner + "': must be >= 0");
  return refs(r.running);
}

Result<void> validate(const protocol::EventRequest& r, const protocol::Limits&) {
  if (auto x = protocol::check_id("leaseId", r.lease_id); !x) return x;
  if (r.seq < 1 || r.seq > protocol::kMaxEventSeq)
    return fail("field 'seq': must be between 1 and " + std::to_string(protocol::kMaxEventSeq));
  if (r.at)
    if (auto t = protocol::parse_time(*r.at); !t) return fail("field 'at': " + t.error().message);
  if (r.reason && r.state != protocol::EventState::lost) return fail("field 'reason': only with state lost");
  return {};
}

Result<void> validate(const protocol::JobSubmission& s, const protocol::Limits& l) {
  if (auto x = name("runner", s.runner, l, true); !x) return x;  // empty: chosen by kind
  if (s.max_attempts < 1 || s.max_attempts > 10) return fail("field 'maxAttempts': must be between 1 and 10");
  if (auto x = tag_map("requiredTags", s.required_tags, l); !x) return x;
  for (const auto& [k, v] : s.spec.env)
    if (!is_env_name(k)) return fail("field 'env': " + q(k) + " is not a valid environment variable name");
  if (auto x = no_nul_in_spec(s.spec); !x) return x;
  if (s.spec.timeout_s && !(*s.spec.timeout_s > 0 && *s.spec.timeout_s <= protocol::kMaxTimeoutS))
    return fail("field 'timeoutS': must be > 0 and at most " + std::to_string(std::llround(protocol::kMaxTimeoutS)));
  auto slurm = s.spec.run_config.find("slurm");
  if (slurm != s.spec.run_config.end() && !slurm->value().is_object())
    return fail("field 'runConfig.slurm': expected an object");
  if (s.kind == "command") {
    if (s.spec.payload) return fail("field 'payload': only for kind training");
    if (s.spec.argv.has_value() == s.spec.command.has_value())
      return fail("kind command needs exactly one of 'argv' or 'command'");
    if (s.spec.argv && s.spec.argv->empty()) return fail("field 'argv': must not be empty");
    if (s.spec.argv && s.spec.argv->front().empty()) return fail("field 'argv[0]': must not be empty");
    if (s.spec.command && s.spec.command->empty()) return fail("field 'command': must not be empty");
    return {};
  }
  if (s.kind == "training") {
    if (s.spec.argv || s.spec.command) return fail("kind training takes a 'payload', not 'argv' or 'command'");
    if (!s.spec.payload) return fail("field 'payload': required for kind training");
    return name("payload.profile", s.spec.payload->profile, l);
  }
  return fail("field 'kind': " + q(s.kind) + " (expected command or training)");
}

Result<void> validate(const protocol::PurgeRequest& r, const protocol::Limits&) {
  constexpr double kMaxAgeS = 1e10;  // about 317 years: anything longer keeps everything anyway
  if (r.older_than_s && !(*r.older_than_s >= 0 && *r.older_than_s <= kMaxAgeS))
    return fail("field 'olderThanS': must be between 0 and 1e10 seconds");
  return {};
}

}  // namespace nymph::control
