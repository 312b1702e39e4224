#include "control/rows.hpp"

#include <stdexcept>

namespace nymph::control::rows {

namespace json = boost::json;

namespace {

[[noreturn]] void corrupt(const std::string& what) { throw std::runtime_error("corrupt " + what + " in the database"); }

json::value json_from(const std::string& text) {
  auto v = protocol::parse_json(text);
  if (!v) corrupt("JSON (" + v.error().message + ")");
  return std::move(*v);
}

template <class T>
T decoded(const std::string& text) {
  auto r = protocol::from_json<T>(json_from(text));
  if (!r) corrupt("JSON (" + r.error().message + ")");
  return std::move(*r);
}

std::optional<json::value> opt_json(const sql::Statement& q, int c) {
  if (q.null(c)) return std::nullopt;
  return json_from(q.text(c));
}

// The columns exit_code, signal, message, slurm_job_id from `c` on, which attempts and events share.
template <class T>
void outcome_from(const sql::Statement& q, int c, T& x) {
  x.exit_code = q.opt_i32(c);
  x.signal = q.opt_i32(c + 1);
  x.message = q.text(c + 2);
  x.slurm_job_id = q.opt_text(c + 3);
}

protocol::JobState job_state(const std::string& s) {
  auto st = protocol::parse_job_state(s);
  if (!st) corrupt("job state '" + s + "'");
  return *st;
}

protocol::AttemptState attempt_state(const std::string& s) {
  auto st = protocol::parse_attempt_state(s);
  if (!st) corrupt("attempt state '" + s + "'");
  return *st;
}

}  // namespace

protocol::WorkerInfo worker_from(const sql::Statement& q) {
  protocol::WorkerInfo w;
  w.id = q.text(0);
  w.launch_id = q.text(1);
  w.label = q.text(2);
  w.hostname = q.text(3);
  w.pid = q.i64(4);
  w.version = q.text(5);
  w.protocol = q.i32(6);
  w.backend = q.text(7);
  w.runners = strings_from(q.text(8));
  w.tags = string_map_from(q.text(9));
  w.capacity = int_map_from(q.text(10));
  w.profiles = strings_from(q.text(11));
  if (!q.null(12)) w.slurm = decoded<protocol::SlurmAllocation>(q.text(12));
  w.status = protocol::parse_worker_status(q.text(13)).value_or(protocol::WorkerStatus::stale);
  if (auto r = q.opt_text(14)) w.exit_reason = protocol::parse_exit_reason(*r);
  w.exit_message = q.text(15);
  if (auto d = q.opt_text(16)) w.directive = protocol::parse_directive(*d);
  w.registered_at = q.text(17);
  w.last_seen = q.text(18);
  w.identity = q.opt_text(19);
  w.generation = q.i64(20);
  return w;
}

protocol::JobInfo job_from(const sql::Statement& q) {
  protocol::JobInfo j;
  j.id = q.text(0);
  j.state = job_state(q.text(1));
  j.runner = q.text(2);
  j.kind = q.text(3);
  j.spec = spec_from(q.text(4));
  j.required_tags = string_map_from(q.text(5));
  j.max_attempts = q.i32(6);
  j.attempt = q.i32(7);
  j.worker_id = q.opt_text(8);
  j.cancel_requested = q.i32(9) != 0;
  j.exit_code = q.opt_i32(10);
  j.signal = q.opt_i32(11);
  j.message = q.text(12);
  j.result = opt_json(q, 13);
  j.created_at = q.text(14);
  j.updated_at = q.text(15);
  j.finished_at = q.opt_text(16);
  return j;
}

protocol::AttemptInfo attempt_from(const sql::Statement& q) {
  protocol::AttemptInfo x;
  x.attempt = q.i32(0);
  x.lease_id = q.text(1);
  x.worker_id = q.text(2);
  x.state = attempt_state(q.text(3));
  outcome_from(q, 4, x);
  x.assigned_at = q.text(8);
  x.finished_at = q.opt_text(9);
  return x;
}

protocol::EventInfo event_from(const sql::Statement& q) {
  protocol::EventInfo x;
  x.attempt = q.i32(0);
  x.lease_id = q.text(1);
  x.seq = q.i64(2);
  x.state = protocol::parse_event_state(q.text(3)).value_or(protocol::EventState::running);
  outcome_from(q, 4, x);
  x.result = opt_json(q, 8);
  x.at = q.opt_text(9);
  x.received_at = q.text(10);
  if (auto r = q.opt_text(11)) x.reason = protocol::parse_event_reason(*r);
  return x;
}

WorkerCaps caps_from(const sql::Statement& q, int first) {
  WorkerCaps caps{strings_from(q.text(first)), string_map_from(q.text(first + 1)), strings_from(q.text(first + 2))};
  if (!q.null(first + 3)) caps.serves_until = serves_until(decoded<protocol::SlurmAllocation>(q.text(first + 3)));
  return caps;
}

AttemptRow attempt_row_from(const sql::Statement& q) {
  AttemptRow a;
  a.lease_id = q.text(0);
  a.job_id = q.text(1);
  a.attempt = q.i32(2);
  a.worker_id = q.text(3);
  a.state = attempt_state(q.text(4));
  a.last_seq = q.i64(5);
  a.job_state = job_state(q.text(6));
  a.current_lease = q.opt_text(7);
  a.cancel_requested = q.i32(8) != 0;
  a.attempts_made = q.i32(9);
  a.max_attempts = q.i32(10);
  a.runner = q.text(11);
  a.profile = q.opt_text(12);
  a.required_tags = q.text(13);
  a.uncounted_attempts = q.i32(14);
  a.runner_auto = q.i32(15) != 0;
  a.timeout_s = q.opt_f64(16);
  return a;
}

protocol::JobSpec spec_from(const std::string& text) { return decoded<protocol::JobSpec>(text); }

std::vector<std::string> strings_from(const std::string& text) {
  std::vector<std::string> out;
  json::value v = json_from(text);
  if (v.is_array())
    for (const auto& e : v.get_array())
      if (e.is_string()) out.emplace_back(e.get_string());
  return out;
}

std::map<std::string, std::string> string_map_from(const std::string& text) {
  std::map<std::string, std::string> out;
  json::value v = json_from(text);
  if (v.is_object())
    for (const auto& kv : v.get_object())
      if (kv.value().is_string()) out.emplace(kv.key(), kv.value().get_string());
  return out;
}

std::map<std::string, int> int_map_from(const std::string& text) {
  std::map<std::string, int> out;
  json::value v = json_from(text);
  if (v.is_object())
    for (const auto& kv : v.get_object())
      if (kv.value().is_int64()) out.emplace(kv.key(), static_cast<int>(kv.value().get_int64()));
  return out;
}

}  // namespace nymph::control::rows
