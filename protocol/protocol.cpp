#include "protocol/protocol.hpp"

#include <time.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <boost/json/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "common/ulid.hpp"

namespace nymph::protocol {

namespace json = boost::json;

// ---------------------------------------------------------------------------------------------------------
// Enumerations

namespace {

template <class E, std::size_t N>
std::string_view name_of(E e, const std::array<std::string_view, N>& names) {
  auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : std::string_view("?");
}

template <class E, std::size_t N>
std::optional<E> value_of(std::string_view s, const std::array<std::string_view, N>& names) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 6> kEventStates{"pending", "running", "succeeded",
                                                       "failed",  "cancelled", "lost"};
constexpr std::array<std::string_view, 7> kJobStates{"queued", "running",   "cancelling", "succeeded",
                                                     "failed", "cancelled", "lost"};
constexpr std::array<std::string_view, 7> kAttemptStates{"assigned", "pending",   "running", "succeeded",
                                                         "failed",   "cancelled", "lost"};
constexpr std::array<std::string_view, 2> kCancelReasons{"user", "leaseLost"};
constexpr std::array<std::string_view, 2> kDirectives{"kill", "drain"};
constexpr std::array<std::string_view, 6> kExitReasons{"sigterm", "sigint", "killed", "walltime", "idle", "error"};
constexpr std::array<std::string_view, 3> kWorkerStatuses{"active", "stale", "gone"};

}  // namespace

std::string_view to_string(EventState s) { return name_of(s, kEventStates); }
std::string_view to_string(JobState s) { return name_of(s, kJobStates); }
std::string_view to_string(AttemptState s) { return name_of(s, kAttemptStates); }
std::string_view to_string(CancelReason r) { return name_of(r, kCancelReasons); }
std::string_view to_string(Directive d) { return name_of(d, kDirectives); }
std::string_view to_string(ExitReason r) { return name_of(r, kExitReasons); }
std::string_view to_string(WorkerStatus s) { return name_of(s, kWorkerStatuses); }
std::optional<EventState> parse_event_state(std::string_view s) { return value_of<EventState>(s, kEventStates); }
std::optional<JobState> parse_job_state(std::string_view s) { return value_of<JobState>(s, kJobStates); }
std::optional<AttemptState> parse_attempt_state(std::string_view s) {
  return value_of<AttemptState>(s, kAttemptStates);
}
std::optional<CancelReason> parse_cancel_reason(std::string_view s) {
  return value_of<CancelReason>(s, kCancelReasons);
}
std::optional<Directive> parse_directive(std::string_view s) { return value_of<Directive>(s, kDirectives); }
std::optional<ExitReason> parse_exit_reason(std::string_view s) { return value_of<ExitReason>(s, kExitReasons); }
std::optional<WorkerStatus> parse_worker_status(std::string_view s) {
  return value_of<WorkerStatus>(s, kWorkerStatuses);
}

bool is_final(JobState s) { return s >= JobState::succeeded; }
bool is_final(EventState s) { return s >= EventState::succeeded; }
bool is_final(AttemptState s) { return s >= AttemptState::succeeded; }

// ---------------------------------------------------------------------------------------------------------
// Decoding: one `read` overload per type; the Decoder keeps the path for the error message.

namespace {

struct Decoder {
  std::vector<std::string> path;
  std::string error;

  bool fail(std::string_view what) {
    if (!error.empty()) return false;
    std::string where;
    for (const auto& p : path) {
      if (!where.empty() && p.front() != '[') where += '.';
      where += p;
    }
    error = where.empty() ? "body: " + std::string(what) : "field '" + where + "': " + std::string(what);
    return false;
  }
};

bool read(Decoder& d, const json::value& v, std::string& out) {
  if (!v.is_string()) return d.fail("expected a string");
  out.assign(v.get_string().data(), v.get_string().size());
  return true;
}

bool read(Decoder& d, const json::value& v, bool& out) {
  if (!v.is_bool()) return d.fail("expected true or false");
  out = v.get_bool();
  return true;
}

template <class Int>
bool read_integer(Decoder& d, const json::value& v, Int& out) {
  auto lo = std::numeric_limits<Int>::min();
  auto hi = std::numeric_limits<Int>::max();
  if (v.is_int64()) {
    auto x = v.get_int64();
    if ((std::is_signed_v<Int> && x < static_cast<std::int64_t>(lo)) || (!std::is_signed_v<Int> && x < 0) ||
        (x > 0 && static_cast<std::uint64_t>(x) > static_cast<std::uint64_t>(hi)))
      return d.fail("integer out of range");
    out = static_cast<Int>(x);
    return true;
  }
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<std::uint64_t>(hi)) return d.fail("integer out of range");
    out = static_cast<Int>(v.get_uint64());
    return true;
  }
  if (v.is_double()) {
    double x = v.get_double();
    if (std::trunc(x) != x) return d.fail("expected an integer");
    if (x < static_cast<double>(lo) || x > static_cast<double>(hi)) return d.fail("integer out of range");
    out = static_cast<Int>(x);
    return true;
  }
  return d.fail("expected an integer");
}

bool read(Decoder& d, const json::value& v, int& out) { return read_integer(d, v, out); }
bool read(Decoder& d, const json::value& v, std::int64_t& out) { return read_integer(d, v, out); }
bool read(Decoder& d, const json::value& v, std::uint64_t& out) { return read_integer(d, v, out); }

bool read(Decoder& d, const json::value& v, double& out) {
  if (!v.is_number()) return d.fail("expected a number");
  out = v.to_number<double>();
  if (!std::isfinite(out)) return d.fail("expected a finite number");
  return true;
}

bool read(Decoder& d, const json::value& v, json::object& out) {
  if (!v.is_object()) return d.fail("expected an object");
  out = v.get_object();
  return true;
}

bool read(Decoder&, const json::value& v, json::value& out) {
  out = v;
  return true;
}

template <class E>
bool read_enum(Decoder& d, const json::value& v, E& out, std::optional<E> (*parse)(std::string_view),
               std::string_view allowed) {
  if (!v.is_string()) return d.fail("expected a string");
  auto e = parse(std::string_view(v.get_string().data(), v.get_string().size()));
  if (!e) return d.fail("unknown value '" + std::string(v.get_string()) + "' (expected " + std::string(allowed) + ")");
  out = *e;
  return true;
}

bool read(Decoder& d, const json::value& v, EventState& out) {
  return read_enum(d, v, out, parse_event_state, "pending, running, succeeded, failed, cancelled or lost");
}
bool read(Decoder& d, const json::value& v, JobState& out) {
  return read_enum(d, v, out, parse_job_state,
                   "queued, running, cancelling, succeeded, failed, cancelled or lost");
}
bool read(Decoder& d, const json::value& v, AttemptState& out) {
  return read_enum(d, v, out, parse_attempt_state,
                   "assigned, pending, running, succeeded, failed, cancelled or lost");
}
bool read(Decoder& d, const json::value& v, CancelReason& out) {
  return read_enum(d, v, out, parse_cancel_reason, "user or leaseLost");
}
bool read(Decoder& d, const json::value& v, Directive& out) {
  return read_enum(d, v, out, parse_directive, "kill or drain");
}
bool read(Decoder& d, const json::value& v, ExitReason& out) {
  return read_enum(d, v, out, parse_exit_reason, "sigterm, sigint, killed, walltime, idle or error");
}
bool read(Decoder& d, const json::value& v, WorkerStatus& out) {
  return read_enum(d, v, out, parse_worker_status, "active, stale or gone");
}

template <class T>
bool read(Decoder& d, const json::value& v, std::optional<T>& out) {
  if (v.is_null()) {
    out.reset();
    return true;
  }
  T x{};
  if (!read(d, v, x)) return false;
  out = std::move(x);
  return true;
}

template <class T>
bool read(Decoder& d, const json::value& v, std::vector<T>& out) {
  if (!v.is_array()) return d.fail("expected an array");
  out.clear();
  out.reserve(v.get_array().size());
  std::size_t i = 0;
  for (const auto& e : v.get_array()) {
    d.path.push_back("[" + std::to_string(i++) + "]");
    T x{};
    bool ok = read(d, e, x);
    d.path.pop_back();
    if (!ok) return false;
    out.push_back(std::move(x));
  }
  return true;
}

template <class T>
bool read(Decoder& d, const json::value& v, std::map<std::string, T>& out) {
  if (!v.is_object()) return d.fail("expected an object");
  out.clear();
  for (const auto& kv : v.get_object()) {
    d.path.emplace_back(kv.key());
    T x{};
    bool ok = read(d, kv.value(), x);
    d.path.pop_back();
    if (!ok) return false;
    out.emplace(std::string(kv.key()), std::move(x));
  }
  return true;
}

// The members of one JSON object, read by key.
class Fields {
 public:
  Fields(Decoder& d, const json::object& o) : d_(d), o_(o) {}

  // Reads `key` into `out` when present and not null; absent leaves `out` unchanged.
  template <class T>
  bool opt(std::string_view key, T& out) {
    auto it = o_.find(key);
    if (it == o_.end() || it->value().is_null()) return true;
    d_.path.emplace_back(key);
    bool ok = read(d_, it->value(), out);
    d_.path.pop_back();
    return ok;
  }

  // Like opt, but absent or null is an error.
  template <class T>
  bool req(std::string_view key, T& out) {
    auto it = o_.find(key);
    if (it == o_.end() || it->value().is_null()) {
      d_.path.emplace_back(key);
      d_.fail("is required");
      d_.path.pop_back();
      return false;
    }
    return opt(key, out);
  }

 private:
  Decoder& d_;
  const json::object& o_;
};

// Runs `body(fields)` when `v` is an object.
template <class F>
bool read_object(Decoder& d, const json::value& v, F&& body) {
  if (!v.is_object()) return d.fail("expected an object");
  Fields f(d, v.get_object());
  return body(f);
}

bool read(Decoder& d, const json::value& v, ErrorBody& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("code", x.code) && f.opt("message", x.message) && f.opt("expectedOffset", x.expected_offset);
  });
}

bool read(Decoder& d, const json::value& v, AttemptRef& x) {
  return read_object(d, v, [&](Fields& f) { return f.req("jobId", x.job_id) && f.req("leaseId", x.lease_id); });
}

bool read(Decoder& d, const json::value& v, SlurmAllocation& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("jobId", x.job_id) && f.opt("partition", x.partition) && f.opt("endTime", x.end_time);
  });
}

bool read(Decoder& d, const json::value& v, Payload& x) {
  return read_object(d, v, [&](Fields& f) { return f.req("profile", x.profile) && f.opt("parameters", x.parameters); });
}

bool read_spec_fields(Fields& f, JobSpec& x) {
  return f.opt("argv", x.argv) && f.opt("command", x.command) && f.opt("env", x.env) &&
         f.opt("timeoutS", x.timeout_s) && f.opt("runConfig", x.run_config) && f.opt("payload", x.payload);
}

bool read(Decoder& d, const json::value& v, JobSpec& x) {
  return read_object(d, v, [&](Fields& f) { return read_spec_fields(f, x); });
}

bool read(Decoder& d, const json::value& v, RegisterRequest& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("launchId", x.launch_id) && f.opt("label", x.label) && f.req("hostname", x.hostname) &&
           f.opt("pid", x.pid) && f.opt("version", x.version) && f.opt("protocol", x.protocol) &&
           f.opt("backend", x.backend) && f.req("runners", x.runners) && f.opt("tags", x.tags) &&
           f.opt("capacity", x.capacity) && f.opt("profiles", x.profiles) && f.opt("slurm", x.slurm) &&
           f.opt("running", x.running);
  });
}

bool read(Decoder& d, const json::value& v, CancelOrder& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("jobId", x.job_id) && f.opt("leaseId", x.lease_id) && f.req("reason", x.reason);
  });
}

bool read(Decoder& d, const json::value& v, RegisterResponse& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("workerId", x.worker_id) && f.opt("pollTimeoutS", x.poll_timeout_s) &&
           f.opt("leaseTtlS", x.lease_ttl_s) && f.opt("staleAfterS", x.stale_after_s) &&
           f.opt("protocol", x.protocol) && f.opt("cancel", x.cancel);
  });
}

bool read(Decoder& d, const json::value& v, PollRequest& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.opt("free", x.free) && f.opt("running", x.running) && f.opt("draining", x.draining);
  });
}

bool read(Decoder& d, const json::value& v, JobAssignment& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("jobId", x.job_id) && f.req("attempt", x.attempt) && f.req("leaseId", x.lease_id) &&
           f.req("runner", x.runner) && f.req("kind", x.kind) && f.req("spec", x.spec);
  });
}

bool read(Decoder& d, const json::value& v, PollResponse& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.opt("jobs", x.jobs) && f.opt("cancel", x.cancel) && f.opt("directive", x.directive);
  });
}

bool read(Decoder& d, const json::value& v, EventRequest& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("leaseId", x.lease_id) && f.req("seq", x.seq) && f.req("state", x.state) &&
           f.opt("exitCode", x.exit_code) && f.opt("signal", x.signal) && f.opt("message", x.message) &&
           f.opt("slurmJobId", x.slurm_job_id) && f.opt("result", x.result) && f.opt("at", x.at);
  });
}

bool read(Decoder& d, const json::value& v, EventResponse& x) {
  return read_object(d, v, [&](Fields& f) { return f.opt("duplicate", x.duplicate) && f.req("jobState", x.job_state); });
}

bool read(Decoder& d, const json::value& v, LogAppendResponse& x) {
  return read_object(d, v, [&](Fields& f) { return f.req("nextOffset", x.next_offset); });
}

bool read(Decoder& d, const json::value& v, ExitRequest& x) {
  return read_object(d, v, [&](Fields& f) { return f.req("exitReason", x.exit_reason) && f.opt("message", x.message); });
}

bool read(Decoder& d, const json::value& v, JobSubmission& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.opt("runner", x.runner) && f.opt("kind", x.kind) && read_spec_fields(f, x.spec) &&
           f.opt("requiredTags", x.required_tags) && f.opt("maxAttempts", x.max_attempts);
  });
}

bool read(Decoder& d, const json::value& v, EventInfo& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.opt("attempt", x.attempt) && f.opt("leaseId", x.lease_id) && f.opt("seq", x.seq) &&
           f.req("state", x.state) && f.opt("exitCode", x.exit_code) && f.opt("signal", x.signal) &&
           f.opt("message", x.message) && f.opt("slurmJobId", x.slurm_job_id) && f.opt("result", x.result) &&
           f.opt("at", x.at) && f.opt("receivedAt", x.received_at);
  });
}

bool read(Decoder& d, const json::value& v, AttemptInfo& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.opt("attempt", x.attempt) && f.opt("leaseId", x.lease_id) && f.opt("workerId", x.worker_id) &&
           f.req("state", x.state) && f.opt("exitCode", x.exit_code) && f.opt("signal", x.signal) &&
           f.opt("message", x.message) && f.opt("slurmJobId", x.slurm_job_id) &&
           f.opt("assignedAt", x.assigned_at) && f.opt("finishedAt", x.finished_at);
  });
}

bool read(Decoder& d, const json::value& v, JobInfo& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("id", x.id) && f.req("state", x.state) && f.opt("runner", x.runner) && f.opt("kind", x.kind) &&
           f.opt("spec", x.spec) && f.opt("requiredTags", x.required_tags) &&
           f.opt("maxAttempts", x.max_attempts) && f.opt("attempt", x.attempt) && f.opt("workerId", x.worker_id) &&
           f.opt("cancelRequested", x.cancel_requested) && f.opt("exitCode", x.exit_code) &&
           f.opt("signal", x.signal) && f.opt("message", x.message) && f.opt("result", x.result) &&
           f.opt("createdAt", x.created_at) && f.opt("updatedAt", x.updated_at) &&
           f.opt("finishedAt", x.finished_at) && f.opt("attempts", x.attempts) && f.opt("events", x.events);
  });
}

bool read(Decoder& d, const json::value& v, JobList& x) {
  return read_object(d, v, [&](Fields& f) { return f.req("jobs", x.jobs); });
}

bool read(Decoder& d, const json::value& v, WorkerInfo& x) {
  return read_object(d, v, [&](Fields& f) {
    return f.req("id", x.id) && f.opt("launchId", x.launch_id) && f.opt("label", x.label) &&
           f.opt("hostname", x.hostname) && f.opt("pid", x.pid) && f.opt("version", x.version) &&
           f.opt("protocol", x.protocol) && f.opt("backend", x.backend) && f.opt("runners", x.runners) &&
           f.opt("tags", x.tags) && f.opt("capacity", x.capacity) && f.opt("profiles", x.profiles) &&
           f.opt("slurm", x.slurm) && f.req("status", x.status) && f.opt("exitReason", x.exit_reason) &&
           f.opt("exitMessage", x.exit_message) && f.opt("directive", x.directive) &&
           f.opt("registeredAt", x.registered_at) && f.opt("lastSeen", x.last_seen) &&
           f.opt("runningJobs", x.running_jobs);
  });
}

bool read(Decoder& d, const json::value& v, WorkerList& x) {
  return read_object(d, v, [&](Fields& f) { return f.req("workers", x.workers); });
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

json::value to_value(const std::string& s) { return json::value(s); }
json::value to_value(bool b) { return json::value(b); }
json::value to_value(int i) { return json::value(i); }
json::value to_value(std::int64_t i) { return json::value(i); }
json::value to_value(std::uint64_t i) { return json::value(i); }
json::value to_value(double x) {
  // Whole numbers are written as integers ("30", not "3E1"); readers accept either.
  if (std::trunc(x) == x && std::fabs(x) < 9e15) return json::value(static_cast<std::int64_t>(x));
  return json::value(x);
}
json::value to_value(const json::object& o) { return json::value(o); }
json::value to_value(const json::value& v) { return v; }
template <class E>
  requires std::is_enum_v<E>
json::value to_value(E e) {
  return json::value(to_string(e));
}
template <class T>
  requires std::is_class_v<T> && requires(json::value& jv, const T& t) { tag_invoke(json::value_from_tag{}, jv, t); }
json::value to_value(const T& x) {
  return json::value_from(x);
}
template <class T>
json::value to_value(const std::vector<T>& xs) {
  json::array a;
  a.reserve(xs.size());
  for (const auto& x : xs) a.push_back(to_value(x));
  return a;
}
template <class T>
json::value to_value(const std::map<std::string, T>& m) {
  json::object o;
  o.reserve(m.size());
  for (const auto& [k, x] : m) o.emplace(k, to_value(x));
  return o;
}
template <class T>
json::value to_value(const std::optional<T>& x) {
  return x ? to_value(*x) : json::value(nullptr);
}

// put(o, key, x): always; put_opt: only when the optional is set.
template <class T>
void put(json::object& o, std::string_view key, const T& x) {
  o[key] = to_value(x);
}
template <class T>
void put_opt(json::object& o, std::string_view key, const std::optional<T>& x) {
  if (x) o[key] = to_value(*x);
}

void write_spec_fields(json::object& o, const JobSpec& x) {
  put_opt(o, "argv", x.argv);
  put_opt(o, "command", x.command);
  put(o, "env", x.env);
  put_opt(o, "timeoutS", x.timeout_s);
  put(o, "runConfig", x.run_config);
  put_opt(o, "payload", x.payload);
}

// Fills `jv` with a fresh object filled by `body`.
template <class F>
void write_object(json::value& jv, F&& body) {
  json::object& o = jv.emplace_object();
  body(o);
}

// Limits walk after parsing (Boost.JSON enforces depth itself).
bool within_limits(const json::value& v, const Limits& limits, std::string& why) {
  switch (v.kind()) {
    case json::kind::string:
      if (v.get_string().size() > limits.max_string) {
        why = "a string exceeds " + std::to_string(limits.max_string) + " bytes";
        return false;
      }
      return true;
    case json::kind::array:
      if (v.get_array().size() > limits.max_array) {
        why = "an array exceeds " + std::to_string(limits.max_array) + " elements";
        return false;
      }
      for (const auto& e : v.get_array())
        if (!within_limits(e, limits, why)) return false;
      return true;
    case json::kind::object:
      if (v.get_object().size() > limits.max_array) {
        why = "an object exceeds " + std::to_string(limits.max_array) + " members";
        return false;
      }
      for (const auto& kv : v.get_object()) {
        if (kv.key().size() > limits.max_string) {
          why = "a key exceeds " + std::to_string(limits.max_string) + " bytes";
          return false;
        }
        if (!within_limits(kv.value(), limits, why)) return false;
      }
      return true;
    default:
      return true;
  }
}

}  // namespace

void tag_invoke(json::value_from_tag, json::value& jv, const ErrorBody& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "code", x.code);
    put(o, "message", x.message);
    put_opt(o, "expectedOffset", x.expected_offset);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const AttemptRef& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "jobId", x.job_id);
    put(o, "leaseId", x.lease_id);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const SlurmAllocation& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "jobId", x.job_id);
    put(o, "partition", x.partition);
    put_opt(o, "endTime", x.end_time);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const Payload& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "profile", x.profile);
    put(o, "parameters", x.parameters);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const JobSpec& x) {
  write_object(jv, [&](json::object& o) { write_spec_fields(o, x); });
}
void tag_invoke(json::value_from_tag, json::value& jv, const RegisterRequest& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "launchId", x.launch_id);
    put(o, "label", x.label);
    put(o, "hostname", x.hostname);
    put(o, "pid", x.pid);
    put(o, "version", x.version);
    put(o, "protocol", x.protocol);
    put(o, "backend", x.backend);
    put(o, "runners", x.runners);
    put(o, "tags", x.tags);
    put(o, "capacity", x.capacity);
    put(o, "profiles", x.profiles);
    put_opt(o, "slurm", x.slurm);
    put(o, "running", x.running);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const CancelOrder& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "jobId", x.job_id);
    put(o, "leaseId", x.lease_id);
    put(o, "reason", x.reason);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const RegisterResponse& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "workerId", x.worker_id);
    put(o, "pollTimeoutS", x.poll_timeout_s);
    put(o, "leaseTtlS", x.lease_ttl_s);
    put(o, "staleAfterS", x.stale_after_s);
    put(o, "protocol", x.protocol);
    put(o, "cancel", x.cancel);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const PollRequest& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "free", x.free);
    put(o, "running", x.running);
    put(o, "draining", x.draining);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const JobAssignment& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "jobId", x.job_id);
    put(o, "attempt", x.attempt);
    put(o, "leaseId", x.lease_id);
    put(o, "runner", x.runner);
    put(o, "kind", x.kind);
    put(o, "spec", x.spec);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const PollResponse& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "jobs", x.jobs);
    put(o, "cancel", x.cancel);
    put(o, "directive", x.directive);  // explicit null when none
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const EventRequest& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "leaseId", x.lease_id);
    put(o, "seq", x.seq);
    put(o, "state", x.state);
    put_opt(o, "exitCode", x.exit_code);
    put_opt(o, "signal", x.signal);
    put(o, "message", x.message);
    put_opt(o, "slurmJobId", x.slurm_job_id);
    put_opt(o, "result", x.result);
    put_opt(o, "at", x.at);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const EventResponse& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "duplicate", x.duplicate);
    put(o, "jobState", x.job_state);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const LogAppendResponse& x) {
  write_object(jv, [&](json::object& o) { put(o, "nextOffset", x.next_offset); });
}
void tag_invoke(json::value_from_tag, json::value& jv, const ExitRequest& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "exitReason", x.exit_reason);
    put(o, "message", x.message);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const JobSubmission& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "runner", x.runner);
    put(o, "kind", x.kind);
    write_spec_fields(o, x.spec);
    put(o, "requiredTags", x.required_tags);
    put(o, "maxAttempts", x.max_attempts);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const EventInfo& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "attempt", x.attempt);
    put(o, "leaseId", x.lease_id);
    put(o, "seq", x.seq);
    put(o, "state", x.state);
    put_opt(o, "exitCode", x.exit_code);
    put_opt(o, "signal", x.signal);
    put(o, "message", x.message);
    put_opt(o, "slurmJobId", x.slurm_job_id);
    put_opt(o, "result", x.result);
    put_opt(o, "at", x.at);
    put(o, "receivedAt", x.received_at);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const AttemptInfo& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "attempt", x.attempt);
    put(o, "leaseId", x.lease_id);
    put(o, "workerId", x.worker_id);
    put(o, "state", x.state);
    put_opt(o, "exitCode", x.exit_code);
    put_opt(o, "signal", x.signal);
    put(o, "message", x.message);
    put_opt(o, "slurmJobId", x.slurm_job_id);
    put(o, "assignedAt", x.assigned_at);
    put_opt(o, "finishedAt", x.finished_at);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const JobInfo& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "id", x.id);
    put(o, "state", x.state);
    put(o, "runner", x.runner);
    put(o, "kind", x.kind);
    put(o, "spec", x.spec);
    put(o, "requiredTags", x.required_tags);
    put(o, "maxAttempts", x.max_attempts);
    put(o, "attempt", x.attempt);
    put_opt(o, "workerId", x.worker_id);
    put(o, "cancelRequested", x.cancel_requested);
    put_opt(o, "exitCode", x.exit_code);
    put_opt(o, "signal", x.signal);
    put(o, "message", x.message);
    put_opt(o, "result", x.result);
    put(o, "createdAt", x.created_at);
    put(o, "updatedAt", x.updated_at);
    put_opt(o, "finishedAt", x.finished_at);
    if (!x.attempts.empty()) put(o, "attempts", x.attempts);
    if (!x.events.empty()) put(o, "events", x.events);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const JobList& x) {
  write_object(jv, [&](json::object& o) { put(o, "jobs", x.jobs); });
}
void tag_invoke(json::value_from_tag, json::value& jv, const WorkerInfo& x) {
  write_object(jv, [&](json::object& o) {
    put(o, "id", x.id);
    put(o, "launchId", x.launch_id);
    put(o, "label", x.label);
    put(o, "hostname", x.hostname);
    put(o, "pid", x.pid);
    put(o, "version", x.version);
    put(o, "protocol", x.protocol);
    put(o, "backend", x.backend);
    put(o, "runners", x.runners);
    put(o, "tags", x.tags);
    put(o, "capacity", x.capacity);
    put(o, "profiles", x.profiles);
    put_opt(o, "slurm", x.slurm);
    put(o, "status", x.status);
    put(o, "exitReason", x.exit_reason);  // explicit null when the worker never reported
    put(o, "exitMessage", x.exit_message);
    put(o, "directive", x.directive);
    put(o, "registeredAt", x.registered_at);
    put(o, "lastSeen", x.last_seen);
    put(o, "runningJobs", x.running_jobs);
  });
}
void tag_invoke(json::value_from_tag, json::value& jv, const WorkerList& x) {
  write_object(jv, [&](json::object& o) { put(o, "workers", x.workers); });
}

// ---------------------------------------------------------------------------------------------------------
// from_json / try_value_to

template <class T>
Result<T> from_json(const json::value& v) {
  Decoder d;
  T x{};
  if (!read(d, v, x)) return fail(d.error);
  return x;
}

Result<json::value> parse_json(std::string_view text, const Limits& limits) {
  json::parse_options opts;
  opts.max_depth = static_cast<std::size_t>(limits.max_depth);
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, opts);
  if (ec) {
    if (ec == json::error::too_deep)
      return fail("invalid JSON: nested deeper than " + std::to_string(limits.max_depth) + " levels");
    return fail("invalid JSON: " + ec.message());
  }
  std::string why;
  if (!within_limits(v, limits, why)) return fail("invalid JSON: " + why);
  return v;
}

template <class T>
Result<T> parse_as(std::string_view text, const Limits& limits) {
  auto v = parse_json(text, limits);
  if (!v) return v.error();
  return from_json<T>(*v);
}

#define NYMPH_PROTOCOL_DECODE(T)                                                                      \
  template Result<T> from_json<T>(const json::value&);                                                \
  template Result<T> parse_as<T>(std::string_view, const Limits&);                                    \
  boost::system::result<T> tag_invoke(json::try_value_to_tag<T>, const json::value& jv) {             \
    Decoder d;                                                                                        \
    T x{};                                                                                            \
    if (!read(d, jv, x)) return boost::system::error_code(json::error::not_exact);                    \
    return x;                                                                                         \
  }
NYMPH_PROTOCOL_DECODE(ErrorBody)
NYMPH_PROTOCOL_DECODE(AttemptRef)
NYMPH_PROTOCOL_DECODE(SlurmAllocation)
NYMPH_PROTOCOL_DECODE(Payload)
NYMPH_PROTOCOL_DECODE(JobSpec)
NYMPH_PROTOCOL_DECODE(RegisterRequest)
NYMPH_PROTOCOL_DECODE(CancelOrder)
NYMPH_PROTOCOL_DECODE(RegisterResponse)
NYMPH_PROTOCOL_DECODE(PollRequest)
NYMPH_PROTOCOL_DECODE(JobAssignment)
NYMPH_PROTOCOL_DECODE(PollResponse)
NYMPH_PROTOCOL_DECODE(EventRequest)
NYMPH_PROTOCOL_DECODE(EventResponse)
NYMPH_PROTOCOL_DECODE(LogAppendResponse)
NYMPH_PROTOCOL_DECODE(ExitRequest)
NYMPH_PROTOCOL_DECODE(JobSubmission)
NYMPH_PROTOCOL_DECODE(EventInfo)
NYMPH_PROTOCOL_DECODE(AttemptInfo)
NYMPH_PROTOCOL_DECODE(JobInfo)
NYMPH_PROTOCOL_DECODE(JobList)
NYMPH_PROTOCOL_DECODE(WorkerInfo)
NYMPH_PROTOCOL_DECODE(WorkerList)
#undef NYMPH_PROTOCOL_DECODE

std::string error_document(const ErrorBody& e) {
  json::object doc;
  doc["error"] = json::value_from(e);
  return json::serialize(doc);
}

std::optional<ErrorBody> parse_error_document(std::string_view body) {
  auto v = parse_json(body);
  if (!v || !v->is_object()) return std::nullopt;
  auto it = v->get_object().find("error");
  if (it == v->get_object().end()) return std::nullopt;
  auto e = from_json<ErrorBody>(it->value());
  if (!e) return std::nullopt;
  return *e;
}

// ---------------------------------------------------------------------------------------------------------
// Paths, ids, times

std::string workers_path() { return "/v1/workers"; }
std::string poll_path(std::string_view id) { return "/v1/workers/" + std::string(id) + "/poll"; }
std::string exit_path(std::string_view id) { return "/v1/workers/" + std::string(id) + "/exit"; }
std::string kill_path(std::string_view id) { return "/v1/workers/" + std::string(id) + "/kill"; }
std::string drain_path(std::string_view id) { return "/v1/workers/" + std::string(id) + "/drain"; }
std::string jobs_path() { return "/v1/jobs"; }
std::string job_path(std::string_view id) { return "/v1/jobs/" + std::string(id); }
std::string events_path(std::string_view id) { return job_path(id) + "/events"; }
std::string cancel_path(std::string_view id) { return job_path(id) + "/cancel"; }

std::string log_put_target(std::string_view job_id, std::string_view stream, std::uint64_t offset,
                           std::string_view lease_id) {
  return job_path(job_id) + "/logs/" + std::string(stream) + "?offset=" + std::to_string(offset) +
         "&lease=" + std::string(lease_id);
}

std::string log_get_target(std::string_view job_id, std::string_view stream, std::uint64_t offset,
                           std::optional<int> attempt) {
  std::string t = job_path(job_id) + "/logs/" + std::string(stream) + "?offset=" + std::to_string(offset);
  if (attempt) t += "&attempt=" + std::to_string(*attempt);
  return t;
}

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string new_ulid() {
  thread_local UlidGenerator generator;  // monotonic within a millisecond, random bits from the kernel
  auto id = generator.next();
  if (!id) throw std::runtime_error("cannot make an id: " + id.error().message);
  return id->str();
}

std::string format_time(std::chrono::system_clock::time_point t) {
  auto ms_total = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  auto secs = static_cast<time_t>(ms_total / 1000);
  auto ms = static_cast<int>(ms_total % 1000);
  if (ms < 0) {
    ms += 1000;
    --secs;
  }
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

Result<std::chrono::system_clock::time_point> parse_time(std::string_view text) {
  auto bad = [&] { return fail("invalid time '" + std::string(text) + "' (expected RFC 3339 UTC, e.g. 2026-01-02T03:04:05.678Z)"); };
  auto num = [&](std::size_t pos, std::size_t len, int& out) {
    if (pos + len > text.size()) return false;
    auto [p, ec] = std::from_chars(text.data() + pos, text.data() + pos + len, out);
    return ec == std::errc{} && p == text.data() + pos + len;
  };
  struct tm tm {};
  int year = 0, mon = 0;
  if (text.size() < 20 || !num(0, 4, year) || text[4] != '-' || !num(5, 2, mon) || text[7] != '-' ||
      !num(8, 2, tm.tm_mday) || (text[10] != 'T' && text[10] != 't') || !num(11, 2, tm.tm_hour) || text[13] != ':' ||
      !num(14, 2, tm.tm_min) || text[16] != ':' || !num(17, 2, tm.tm_sec))
    return bad();
  std::size_t pos = 19;
  int ms = 0;
  if (text[pos] == '.') {
    std::size_t start = ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == start) return bad();
    std::string digits(text.substr(start, std::min<std::size_t>(pos - start, 3)));
    digits.resize(3, '0');
    ms = std::stoi(digits);
  }
  std::string_view zone = text.substr(pos);
  if (zone != "Z" && zone != "z" && zone != "+00:00") return bad();
  if (mon < 1 || mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60)
    return bad();
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  time_t secs = timegm(&tm);
  return std::chrono::system_clock::time_point(std::chrono::seconds(secs)) + std::chrono::milliseconds(ms);
}

}  // namespace nymph::protocol
