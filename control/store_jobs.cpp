// The job half of the Store: submit, list, show and cancel jobs; events and lease loss of attempts; job logs.
#include "control/store.hpp"

#include <algorithm>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "control/rows.hpp"

namespace nymph::control {

namespace json = boost::json;
using protocol::EventState;
using protocol::JobState;
using rows::AttemptRow;
using rows::to_text;

namespace {

ApiError no_longer_live(const AttemptRow& a) {
  return lease_lost("lease '" + a.lease_id + "' of job '" + a.job_id + "' is no longer the job's live attempt");
}

ApiError attempt_finished(const AttemptRow& a) {
  return conflict("attemptFinished", "attempt " + std::to_string(a.attempt) + " of job '" + a.job_id +
                                         "' already reported its final state");
}

}  // namespace

std::optional<protocol::JobInfo> Store::job(const std::string& job_id) {
  static const std::string sql = std::string("SELECT ") + rows::kJobColumns + " FROM jobs WHERE id=?";
  auto q = db_.query(sql.c_str());
  q.bind(job_id);
  if (!q.step()) return std::nullopt;
  return rows::job_from(q);
}

SubmitOutcome Store::submit(const protocol::JobSubmission& sub, WallTime now) {
  std::string id = new_id("job_");
  std::string when = protocol::format_time(now);
  JobNeeds needs = needs_of(sub);
  const bool runner_auto = needs.runner == kAutoRunner;
  db_.query(
      "INSERT INTO jobs(id, state, runner, kind, profile, spec, required_tags, max_attempts, created_at, updated_at, "
      "runner_auto) VALUES(?,'queued',?,?,?,?,?,?,?,?,?)")
      .bind(id, needs.runner, sub.kind, needs.profile, to_text(sub.spec), to_text(sub.required_tags),
            sub.max_attempts, when, when, runner_auto ? 1 : 0)
      .run();
  job_moved(std::nullopt, JobState::queued);
  return SubmitOutcome{*job(id), std::move(needs)};
}

protocol::JobList Store::list_jobs(std::optional<protocol::JobState> state, std::optional<std::int64_t> before,
                                   const PageSpec& page) {
  std::vector<std::pair<std::string, std::string>> candidates;  // the cursor of a job is its seq
  {
    auto q = db_.query(
        "SELECT seq, id FROM jobs WHERE (?1 IS NULL OR state=?1) AND seq < COALESCE(?2, 9223372036854775807) "
        "ORDER BY seq DESC LIMIT ?3");
    std::optional<std::string> s;
    if (state) s = std::string(protocol::to_string(*state));
    q.bind(s, before, page.limit + 1);
    while (q.step()) candidates.emplace_back(std::to_string(q.i64(0)), q.text(1));
  }
  protocol::JobList out;
  out.next_cursor = rows::fill_page(candidates, page.limit, page.max_bytes,
                                    [this](const std::string& id) { return job(id); }, out.jobs);
  return out;
}

ApiResult<protocol::JobInfo> Store::get_job(const std::string& job_id) {
  auto j = job(job_id);
  if (!j) return unknown_job(job_id);
  static const std::string attempts_sql =
      std::string("SELECT ") + rows::kAttemptColumns + " FROM attempts WHERE job_id=? ORDER BY attempt";
  auto a = db_.query(attempts_sql.c_str());
  a.bind(job_id);
  while (a.step()) j->attempts.push_back(rows::attempt_from(a));
  static const std::string events_sql =
      std::string("SELECT ") + rows::kEventColumns + " FROM events WHERE job_id=? ORDER BY attempt, seq";
  auto e = db_.query(events_sql.c_str());
  e.bind(job_id);
  while (e.step()) j->events.push_back(rows::event_from(e));
  return *j;
}

ApiResult<CancelOutcome> Store::cancel_job(const std::string& job_id, WallTime now) {
  auto j = job(job_id);
  if (!j) return unknown_job(job_id);
  std::string when = protocol::format_time(now);
  CancelOutcome out;
  switch (j->state) {
    case JobState::queued:
      db_.query("UPDATE jobs SET state='cancelled', cancel_requested=1, message='cancelled before it started', "
            "updated_at=?, finished_at=? WHERE id=?")
          .bind(when, when, job_id)
          .run();
      job_moved(JobState::queued, JobState::cancelled);
      break;
    case JobState::running:
      db_.query("UPDATE jobs SET state='cancelling', cancel_requested=1, updated_at=? WHERE id=?").bind(when, job_id).run();
      job_moved(JobState::running, JobState::cancelling);
      out.wake_worker = j->worker_id;
      break;
    case JobState::cancelling:
      out.wake_worker = j->worker_id;
      break;
    case JobState::cancelled:
      break;
    default:
      return conflict("jobFinished", "job '" + job_id + "' already " + std::string(protocol::to_string(j->state)));
  }
  out.job = *job(job_id);
  return out;
}

std::optional<JobNeeds> Store::lose_attempt(const AttemptRow& a, const std::string& message, WallTime now) {
  std::string when = protocol::format_time(now);
  db_.query("UPDATE attempts SET state='lost', message=?, finished_at=? WHERE lease_id=?")
      .bind(message, when, a.lease_id)
      .run();
  JobState next = after_lost_attempt(a.attempts_made, a.max_attempts, a.cancel_requested);
  job_moved(a.job_state, next);
  if (next == JobState::queued) {
    // An unpinned job is chosen a runner again at its next dispatch.
    std::string runner = a.runner_auto ? std::string(kAutoRunner) : a.runner;
    db_.query("UPDATE jobs SET state='queued', runner=?, current_lease=NULL, worker_id=NULL, updated_at=? WHERE id=?")
        .bind(runner, when, a.job_id)
        .run();
    return JobNeeds{runner, rows::string_map_from(a.required_tags), a.profile, a.timeout_s};
  }
  std::string why = next == JobState::cancelled ? "cancelled; its attempt was lost: " + message
                                                : "attempt " + std::to_string(a.attempt) + " lost (" + message +
                                                      "); no attempts left";
  db_.query("UPDATE jobs SET state=?, message=?, updated_at=?, finished_at=? WHERE id=?")
      .bind(protocol::to_string(next), why, when, when, a.job_id)
      .run();
  return std::nullopt;
}

ApiResult<EventOutcome> Store::apply_event(const std::string& job_id, const protocol::EventRequest& ev,
                                           const std::string& worker_id, WallTime now) {
  auto a = attempt_of_job(job_id, ev.lease_id, worker_id);
  if (!a) return a.error();
  EventOutcome out;
  {
    auto dup = db_.query("SELECT 1 FROM events WHERE lease_id=? AND seq=?");
    dup.bind(ev.lease_id, ev.seq);
    if (dup.step()) {
      out.reply.duplicate = true;
      out.reply.job_state = a->job_state;
      return out;
    }
  }
  if (!a->current()) return no_longer_live(*a);
  if (!a->live()) return attempt_finished(*a);
  if (ev.seq < a->last_seq) {
    // Applying it would lose either it or what came after it (a final event acknowledged but never applied).
    ApiError e = conflict("outOfOrder", "seq " + std::to_string(ev.seq) + " of lease '" + ev.lease_id +
                                            "' is below seq " + std::to_string(a->last_seq) +
                                            ", already applied: events of a lease are applied in seq order");
    e.last_seq = a->last_seq;
    return e;
  }
  std::string when = protocol::format_time(now);
  std::optional<std::string> result;
  if (ev.result) result = json::serialize(*ev.result);
  std::optional<std::string> reason;
  if (ev.reason) reason = std::string(protocol::to_string(*ev.reason));
  db_.query("INSERT INTO events(lease_id, seq, job_id, attempt, state, exit_code, signal, message, slurm_job_id, result, "
        "at, received_at, reason) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)")
      .bind(ev.lease_id, ev.seq, job_id, a->attempt, protocol::to_string(ev.state), ev.exit_code, ev.signal, ev.message,
            ev.slurm_job_id, result, ev.at, when, reason)
      .run();
  out.reply.job_state = a->job_state;
  db_.query("UPDATE attempts SET last_seq=?, slurm_job_id=COALESCE(?, slurm_job_id) WHERE lease_id=?")
      .bind(ev.seq, ev.slurm_job_id, ev.lease_id)
      .run();
  if (ev.state == EventState::lost) {
    AttemptRow lost = *a;
    bool refused = !lost_attempt_counts(ev.reason, a->last_seq == 0, a->uncounted_attempts);
    if (refused) {
      // Refused before it started: the job keeps its attempts (the attempt keeps its number and row).
      db_.query("UPDATE jobs SET uncounted_attempts=uncounted_attempts+1 WHERE id=?").bind(job_id).run();
      --lost.attempts_made;
    }
    std::string why = ev.message;
    if (why.empty()) why = refused ? "refused by the worker: over capacity" : "reported lost by the worker";
    out.requeued = lose_attempt(lost, why, now);
    out.attempt_ended = true;
    if (!refused) out.freed_slot = {a->worker_id, a->runner};  // a refused job never held a slot
    out.reply.job_state = job(job_id)->state;
    return out;
  }
  JobState next = after_event(a->job_state, ev.state);
  out.reply.job_state = next;
  job_moved(a->job_state, next);
  if (!protocol::is_final(ev.state)) {
    db_.query("UPDATE attempts SET state=? WHERE lease_id=?").bind(protocol::to_string(attempt_state_of(ev.state)), ev.lease_id).run();
    db_.query("UPDATE jobs SET state=?, updated_at=? WHERE id=?").bind(protocol::to_string(next), when, job_id).run();
    return out;
  }
  out.attempt_ended = true;
  out.freed_slot = {a->worker_id, a->runner};
  db_.query("UPDATE attempts SET state=?, exit_code=?, signal=?, message=?, finished_at=? WHERE lease_id=?")
      .bind(protocol::to_string(attempt_state_of(ev.state)), ev.exit_code, ev.signal, ev.message, when, ev.lease_id)
      .run();
  db_.query("UPDATE jobs SET state=?, exit_code=?, signal=?, message=?, result=?, updated_at=?, finished_at=? WHERE id=?")
      .bind(protocol::to_string(next), ev.exit_code, ev.signal, ev.message, result, when, when, job_id)
      .run();
  return out;
}

std::vector<protocol::JobAssignment> Store::take_next(const std::string& worker_id, const std::string& runner,
                                                     const std::string& event_lease, std::int64_t event_seq,
                                                     WallTime now) {
  static const std::string sql = std::string("SELECT status, directive, ") + rows::kCapsColumns + " FROM workers WHERE id=?";
  auto q = db_.query(sql.c_str());
  q.bind(worker_id);
  if (!q.step() || q.text(0) == "gone" || q.opt_text(1)) return {};
  auto jobs = dispatch(worker_id, rows::caps_from(q, 2), {{runner, 1}}, now);
  if (jobs.empty()) return jobs;
  json::array leases;
  for (const auto& j : jobs) leases.emplace_back(j.lease_id);
  db_.query("UPDATE events SET leased=? WHERE lease_id=? AND seq=?")
      .bind(json::serialize(leases), event_lease, event_seq)
      .run();
  return jobs;
}

std::vector<protocol::JobAssignment> Store::taken_by_event(const std::string& event_lease, std::int64_t event_seq,
                                                          const std::string& worker_id) {
  std::vector<std::string> leases;
  {
    auto q = db_.query("SELECT leased FROM events WHERE lease_id=? AND seq=?");
    q.bind(event_lease, event_seq);
    if (!q.step()) return {};
    auto text = q.opt_text(0);
    if (!text) return {};
    const json::value parsed = json::parse(*text);
    for (const auto& l : parsed.as_array()) leases.emplace_back(l.as_string());
  }
  std::vector<protocol::JobAssignment> out;
  for (const auto& lease : leases) {
    auto q = db_.query(
        "SELECT a.job_id, a.attempt, j.runner, j.kind, j.spec FROM attempts a JOIN jobs j ON j.id=a.job_id "
        "WHERE a.lease_id=? AND a.worker_id=? AND a.state='assigned' AND a.last_seq=0 AND j.current_lease=a.lease_id");
    q.bind(lease, worker_id);
    if (!q.step()) continue;
    protocol::JobAssignment a;
    a.job_id = q.text(0);
    a.attempt = q.i32(1);
    a.lease_id = lease;
    a.runner = q.text(2);
    a.kind = q.text(3);
    a.spec = rows::spec_from(q.text(4));
    out.push_back(std::move(a));
  }
  return out;
}

LeaseExpiry Store::expire_lease(const std::string& lease_id, const std::string& message, WallTime now) {
  LeaseExpiry out;
  auto a = attempt_of(lease_id);
  if (!a || !a->live() || !a->current()) return out;
  out.expired = true;
  out.worker_id = a->worker_id;
  out.requeued = lose_attempt(*a, message, now);
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Logs

ApiResult<std::uint64_t> Store::append_log(const std::string& job_id, std::string_view stream,
                                           const std::string& lease_id, const std::string& worker_id,
                                           std::uint64_t offset, std::string_view bytes, std::uint64_t max_job_bytes) {
  auto a = attempt_of_job(job_id, lease_id, worker_id);
  if (!a) return a.error();
  if (!a->current()) return no_longer_live(*a);
  if (!a->live()) return attempt_finished(*a);
  std::uint64_t size = log_size(job_id, a->attempt, stream);
  if (offset > size) {
    ApiError e = conflict("logGap", "offset " + std::to_string(offset) + " is past the " + std::to_string(size) +
                                        " bytes stored for " + std::string(stream) + " of attempt " +
                                        std::to_string(a->attempt));
    e.expected_offset = size;
    return e;
  }
  std::uint64_t skip = size - offset;
  if (skip >= bytes.size()) return ApiResult<std::uint64_t>(boost::system::in_place_value, size);  // all stored already
  std::string_view tail = bytes.substr(static_cast<std::size_t>(skip));
  if (std::uint64_t stored = job_log_bytes(job_id); stored + tail.size() > max_job_bytes)
    return ApiError{413, "logCapReached",
                    "job '" + job_id + "' has " + std::to_string(stored) + " bytes of logs; " +
                        std::to_string(tail.size()) + " more would pass the cap of " + std::to_string(max_job_bytes) +
                        " bytes per job (both streams, all attempts)",
                    {}};
  if (has_log_chunks(job_id, a->attempt, stream)) {  // begun by a version that kept logs in the database
    db_.query("INSERT INTO log_chunks(job_id, attempt, stream, start, data) VALUES(?,?,?,?,?)")
        .bind(job_id, a->attempt, stream, size, sql::Blob{tail})
        .run();
  } else {
    // Durable in the file before the new size is committed; bytes past `size` (from an upload whose commit
    // never happened) are overwritten.
    logs_.write(job_id, a->attempt, stream, size, tail);
  }
  std::uint64_t next = size + tail.size();
  db_.query("INSERT INTO log_sizes(job_id, attempt, stream, size) VALUES(?,?,?,?) "
            "ON CONFLICT(job_id, attempt, stream) DO UPDATE SET size=excluded.size")
      .bind(job_id, a->attempt, stream, next)
      .run();
  return ApiResult<std::uint64_t>(boost::system::in_place_value, next);
}

ApiResult<LogChunk> Store::read_log(const std::string& job_id, std::string_view stream, std::uint64_t offset,
                                    std::optional<int> attempt, std::size_t max_bytes) {
  auto j = job(job_id);
  if (!j) return unknown_job(job_id);
  LogChunk out;
  out.attempt = attempt.value_or(j->attempt);
  out.complete = protocol::is_final(j->state);
  out.size = log_size(job_id, out.attempt, stream);
  if (offset >= out.size) return out;
  std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(out.size - offset, max_bytes));
  out.data = has_log_chunks(job_id, out.attempt, stream) ? read_log_chunks(job_id, out.attempt, stream, offset, want)
                                                         : logs_.read(job_id, out.attempt, stream, offset, want);
  return out;
}

std::uint64_t Store::log_size(const std::string& job_id, int attempt, std::string_view stream) {
  auto q = db_.query("SELECT size FROM log_sizes WHERE job_id=? AND attempt=? AND stream=?");
  q.bind(job_id, attempt, stream);
  return q.step() ? static_cast<std::uint64_t>(q.i64(0)) : 0;
}

std::uint64_t Store::job_log_bytes(const std::string& job_id) {
  auto q = db_.query("SELECT COALESCE(SUM(size), 0) FROM log_sizes WHERE job_id=?");
  q.bind(job_id);
  q.step();
  return static_cast<std::uint64_t>(q.i64(0));
}

bool Store::has_log_chunks(const std::string& job_id, int attempt, std::string_view stream) {
  auto q = db_.query("SELECT 1 FROM log_chunks WHERE job_id=? AND attempt=? AND stream=? LIMIT 1");
  q.bind(job_id, attempt, stream);
  return q.step();
}

std::string Store::read_log_chunks(const std::string& job_id, int attempt, std::string_view stream,
                                   std::uint64_t offset, std::size_t want) {
  auto q = db_.query(
      "SELECT start, data FROM log_chunks WHERE job_id=?1 AND attempt=?2 AND stream=?3 AND start >= "
      "(SELECT COALESCE(MAX(start), 0) FROM log_chunks WHERE job_id=?1 AND attempt=?2 AND stream=?3 AND start <= ?4) "
      "ORDER BY start");
  q.bind(job_id, attempt, stream, offset);
  std::string out;
  while (out.size() < want && q.step()) {
    auto start = static_cast<std::uint64_t>(q.i64(0));
    std::string data = q.blob(1);
    std::uint64_t from = offset > start ? offset - start : 0;
    if (from >= data.size()) continue;
    std::size_t n = std::min<std::size_t>(data.size() - static_cast<std::size_t>(from), want - out.size());
    out.append(data, static_cast<std::size_t>(from), n);
  }
  return out;
}
ApiResult<AttemptRow> Store::attempt_of_job(const std::string& job_id, const std::string& lease_id,
                                           const std::string& worker_id) {
  auto exists = db_.query("SELECT 1 FROM jobs WHERE id=?");
  exists.bind(job_id);
  if (!exists.step()) return unknown_job(job_id);
  auto a = attempt_of(lease_id);
  if (!a || a->job_id != job_id) return lease_lost("lease '" + lease_id + "' is not an attempt of job '" + job_id + "'");
  if (a->worker_id != worker_id) return forbidden("lease '" + lease_id + "' belongs to another worker");
  return std::move(*a);
}

}  // namespace nymph::control
