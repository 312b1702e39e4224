// The Store: opening, workers (registration, polls and dispatch), restart state and metrics. The job
// half is in store_jobs.cpp, tokens in store_tokens.cpp.
#include "control/store.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include "control/database_file.hpp"
#include "control/rows.hpp"
#include "control/schema.hpp"

namespace nymph::control {

namespace json = boost::json;
using rows::AttemptRow;
using rows::string_map_from;
using rows::strings_from;
using rows::to_text;

std::unique_ptr<Store> Store::open(const std::string& path, UlidGenerator ids, std::shared_ptr<spdlog::logger> log) {
  for (const auto& line : make_database_private(path))
    log->warn("made the database private (it holds job environments and token hashes): {}", line);
  auto db = sql::Connection::open(path);
  db.migrate(schema_migrations());
  return std::unique_ptr<Store>(new Store(std::move(db), LogFiles(path + ".logs"), std::move(ids)));
}

std::string Store::new_id(std::string_view prefix) {
  auto id = ids_.next();
  if (!id) throw std::runtime_error("cannot make an id: " + id.error().message);
  return std::string(prefix) + id->str();
}

void Store::exec(const char* sql) { db_.exec(sql); }

// ---------------------------------------------------------------------------------------------------------
// Workers

std::optional<protocol::WorkerInfo> Store::worker(const std::string& id) {
  static const std::string sql = std::string("SELECT ") + rows::kWorkerColumns + " FROM workers WHERE id=?";
  auto q = db_.query(sql.c_str());
  q.bind(id);
  if (!q.step()) return std::nullopt;
  protocol::WorkerInfo w = rows::worker_from(q);
  auto r = db_.query(
      "SELECT a.job_id FROM attempts a JOIN jobs j ON j.id=a.job_id AND j.current_lease=a.lease_id "
      "WHERE a.worker_id=? AND a.state IN ('assigned','pending','running') ORDER BY j.seq");
  r.bind(id);
  while (r.step()) w.running_jobs.push_back(r.text(0));
  return w;
}

ApiResult<RegisterOutcome> Store::register_worker(const protocol::RegisterRequest& req, const TokenRecord& by,
                                                  WallTime now) {
  RegisterOutcome out;
  std::string when = protocol::format_time(now);
  std::optional<std::string> slurm;
  if (req.slurm) slurm = to_text(*req.slurm);
  std::optional<std::string> identity;  // empty is none
  if (req.identity && !req.identity->empty()) identity = *req.identity;
  out.reply.worker_token = new_token("nyw_");
  auto find = db_.query("SELECT id, status, token_hash FROM workers WHERE launch_id=? AND generation=?");
  find.bind(req.launch_id, req.generation);
  if (find.step()) {
    auto bound_to = find.opt_text(2);
    if (bound_to && *bound_to != by.hash)
      return forbidden("launch '" + req.launch_id + "' was registered with another token");
    out.reply.worker_id = find.text(0);
    auto was = protocol::parse_worker_status(find.text(1));
    bool was_gone = was == protocol::WorkerStatus::gone;
    worker_moved(was, protocol::WorkerStatus::active);
    db_.query(
        "UPDATE workers SET label=?, hostname=?, pid=?, version=?, protocol=?, backend=?, runners=?, tags=?, "
        "capacity=?, profiles=?, slurm=?, status='active', exit_reason=NULL, exit_message='', "
        "directive=CASE WHEN ? THEN NULL ELSE directive END, last_seen=?, token_hash=?, credential_hash=?, "
        "identity=? WHERE id=?")
        .bind(req.label, req.hostname, req.pid, req.version, req.protocol, req.backend, to_text(req.runners),
              to_text(req.tags), to_text(req.capacity), to_text(req.profiles), slurm, was_gone, when, by.hash,
              token_hash(out.reply.worker_token), identity, out.reply.worker_id)
        .run();
  } else {
    out.created = true;
    out.reply.worker_id = new_id("wrk_");
    worker_moved(std::nullopt, protocol::WorkerStatus::active);
    db_.query(
        "INSERT INTO workers(id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, "
        "capacity, profiles, slurm, status, registered_at, last_seen, token_hash, credential_hash, identity, "
        "generation) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,'active',?,?,?,?,?,?)")
        .bind(out.reply.worker_id, req.launch_id, req.label, req.hostname, req.pid, req.version, req.protocol,
              req.backend, to_text(req.runners), to_text(req.tags), to_text(req.capacity), to_text(req.profiles),
              slurm, when, when, by.hash, token_hash(out.reply.worker_token), identity, req.generation)
        .run();
  }
  out.caps = WorkerCaps{req.runners, req.tags, req.profiles, serves_until(req.slurm)};
  if (identity)
    take_over(out.reply.worker_id, *identity, by, req, out, now);
  else
    reconcile(out.reply.worker_id, req.running, out.reply.cancel, out.renewed_leases, {}, nullptr,
              &out.reply.last_seq);
  return out;
}

void Store::take_over(const std::string& worker_id, const std::string& identity, const TokenRecord& by,
                      const protocol::RegisterRequest& req, RegisterOutcome& out, WallTime now) {
  // Every other worker of this token and identity may hand its listed attempts over, a gone one included
  // (a manager that reported /exit before its successor started); only those not gone are replaced.
  std::vector<std::string> adoptable;
  std::vector<std::pair<std::string, std::string>> predecessors;  // id, status
  {
    auto q = db_.query("SELECT id, status FROM workers WHERE token_hash=? AND identity=? AND id<>? ORDER BY id");
    q.bind(by.hash, identity, worker_id);
    while (q.step()) {
      adoptable.push_back(q.text(0));
      if (q.text(1) != "gone") predecessors.emplace_back(q.text(0), q.text(1));
    }
  }
  reconcile(worker_id, req.running, out.reply.cancel, out.renewed_leases, adoptable, &out.adopted_leases,
            &out.reply.last_seq);
  const std::string when = protocol::format_time(now);
  const std::string why = "its worker was replaced by worker " + worker_id;
  for (const auto& [id, status] : predecessors) {
    worker_moved(protocol::parse_worker_status(status), protocol::WorkerStatus::gone);
    // Its credential ends with it (401): a replaced agent exits instead of re-registering and taking the
    // attempts back.
    db_.query("UPDATE workers SET status='gone', exit_reason='killed', exit_message=?, last_seen=?, "
              "credential_hash=NULL WHERE id=?")
        .bind("replaced by worker " + worker_id, when, id)
        .run();
    out.replaced_workers.push_back(id);
    // What the new worker did not list (listed ones are ours now).
    for (const auto& a : live_attempts_on(id)) {
      out.lost_leases.push_back(a.lease_id);
      if (auto needs = lose_attempt(a, why, now)) out.requeued.push_back(std::move(*needs));
    }
  }
}

std::optional<AttemptRow> Store::attempt_of(const std::string& lease_id) {
  static const std::string sql = std::string("SELECT ") + rows::kAttemptRowColumns +
                                 " FROM attempts a JOIN jobs j ON j.id=a.job_id WHERE a.lease_id=?";
  auto q = db_.query(sql.c_str());
  q.bind(lease_id);
  if (!q.step()) return std::nullopt;
  return rows::attempt_row_from(q);
}

std::vector<AttemptRow> Store::live_attempts_on(const std::string& worker_id) {
  static const std::string sql = std::string("SELECT ") + rows::kAttemptRowColumns +
                                 " FROM attempts a JOIN jobs j ON j.id=a.job_id AND j.current_lease=a.lease_id "
                                 "WHERE a.worker_id=? AND a.state IN ('assigned','pending','running')";
  auto q = db_.query(sql.c_str());
  q.bind(worker_id);
  std::vector<AttemptRow> out;
  while (q.step()) out.push_back(rows::attempt_row_from(q));
  return out;
}

void Store::reconcile(const std::string& worker_id, const std::vector<protocol::AttemptRef>& running,
                      std::vector<protocol::CancelOrder>& cancel, std::vector<LeaseRef>& renewed,
                      const std::vector<std::string>& adoptable, std::vector<std::string>* adopted,
                      std::map<std::string, std::int64_t>* last_seq) {
  // A manager lists every attempt it holds in every poll (ten thousand): the worker's own live ones are read in one
  // query, not one per listed lease. Any other listed lease (final, another worker's, unknown) is looked up alone.
  auto live_here = live_attempts_on(worker_id);
  std::unordered_map<std::string_view, AttemptRow*> live_by_lease;
  live_by_lease.reserve(live_here.size());
  for (auto& a : live_here) live_by_lease.emplace(a.lease_id, &a);
  for (const auto& ref : running) {
    std::optional<AttemptRow> looked_up;
    AttemptRow* a = nullptr;
    if (auto it = live_by_lease.find(ref.lease_id); it != live_by_lease.end())
      a = it->second;
    else if ((looked_up = attempt_of(ref.lease_id)))
      a = &*looked_up;
    if (a && a->job_id == ref.job_id && a->worker_id != worker_id && a->current() &&
        std::find(adoptable.begin(), adoptable.end(), a->worker_id) != adoptable.end()) {
      // Takeover: the attempt carries on here under the same lease (a final one too: its event may be
      // unacknowledged, and the new worker re-sends it).
      db_.query("UPDATE attempts SET worker_id=? WHERE lease_id=?").bind(worker_id, a->lease_id).run();
      db_.query("UPDATE jobs SET worker_id=? WHERE id=? AND current_lease=?").bind(worker_id, a->job_id, a->lease_id).run();
      a->worker_id = worker_id;
      if (adopted) adopted->push_back(a->lease_id);
    }
    if (!a || a->job_id != ref.job_id || a->worker_id != worker_id || !a->current()) {
      cancel.push_back({ref.job_id, ref.lease_id, protocol::CancelReason::lease_lost});
      continue;
    }
    if (last_seq) (*last_seq)[ref.lease_id] = a->last_seq;
    if (!a->live()) continue;  // final: the worker still owes us nothing but the event ack
    renewed.push_back({ref.lease_id, a->runner});
    if (a->cancel_requested) cancel.push_back({ref.job_id, ref.lease_id, protocol::CancelReason::user});
  }
}

ApiResult<PollOutcome> Store::poll(const std::string& worker_id, const protocol::PollRequest& req, WallTime now) {
  static const std::string sql = std::string("SELECT status, directive, ") + rows::kCapsColumns + " FROM workers WHERE id=?";
  auto q = db_.query(sql.c_str());
  q.bind(worker_id);
  if (!q.step() || q.text(0) == "gone") return unknown_worker(worker_id);
  PollOutcome out;
  if (auto d = q.opt_text(1)) out.reply.directive = protocol::parse_directive(*d);
  out.caps = rows::caps_from(q, 2);
  // last_seen is kept to the second: a burst of polls (one per finished job) then commits nothing, so the
  // poll does not queue an fsync in front of the events that follow it.
  db_.query("UPDATE workers SET status='active', last_seen=? WHERE id=? AND (status<>'active' OR last_seen<?)")
      .bind(protocol::format_time(now), worker_id, protocol::format_time(now - std::chrono::seconds(1)))
      .run();
  worker_moved(protocol::parse_worker_status(q.text(0)), protocol::WorkerStatus::active);
  reconcile(worker_id, req.running, out.reply.cancel, out.renewed_leases);
  out.draining = req.draining || out.reply.directive.has_value();
  if (!out.draining) out.reply.jobs = dispatch(worker_id, out.caps, req.free, now);
  return out;
}

std::vector<protocol::JobAssignment> Store::dispatch(const std::string& worker_id, const WorkerCaps& caps,
                                                     const std::map<std::string, int>& free, WallTime now) {
  std::map<std::string, int> budget;
  json::array runners;
  for (const auto& [runner, n] : free)
    if (n > 0 && std::find(caps.runners.begin(), caps.runners.end(), runner) != caps.runners.end()) {
      budget[runner] = n;
      runners.emplace_back(runner);
    }
  std::vector<protocol::JobAssignment> out;
  if (budget.empty()) return out;
  struct Candidate {
    std::string id, runner, kind, spec;
    int attempts;
  };
  std::vector<Candidate> picked;
  // The other active, undirected workers with the slurm (process) runner, each read once if needed.
  std::optional<std::vector<WorkerCaps>> slurm_workers, process_workers;
  auto slurm_elsewhere = [&](const JobNeeds& needs) {
    if (!slurm_workers) slurm_workers = other_workers(worker_id, "slurm");
    JobNeeds on = needs;
    on.runner = "slurm";
    return std::any_of(slurm_workers->begin(), slurm_workers->end(),
                       [&](const WorkerCaps& w) { return can_take(w, on); });
  };
  // Placement by allocation end: a process job goes to a worker with an end only when it fits before it.
  auto fits_here = [&](const JobNeeds& needs) {
    if (needs.runner != "process" || caps.serves_until == WallTime::max()) return true;
    std::optional<WallTime> longest_elsewhere;
    if (!needs.timeout_s) {
      if (!process_workers) process_workers = other_workers(worker_id, "process");
      for (const auto& w : *process_workers)
        if (can_take(w, needs) && (!longest_elsewhere || w.serves_until > *longest_elsewhere))
          longest_elsewhere = w.serves_until;
    }
    return fits_before_end(needs.timeout_s, caps.serves_until, now, longest_elsewhere);
  };
  {
    auto q = db_.query(
        "SELECT id, runner, kind, profile, required_tags, spec, attempts, json_extract(spec, '$.timeoutS') FROM jobs "
        "WHERE state='queued' AND (runner IN (SELECT value FROM json_each(?)) OR runner=?) ORDER BY seq");
    q.bind(json::serialize(runners), std::string(kAutoRunner));
    while (q.step()) {
      auto tags = string_map_from(q.text(4));
      JobNeeds needs{q.text(1), std::move(tags), q.opt_text(3), q.opt_f64(7)};
      if (needs.runner == kAutoRunner) {
        // Unpinned training job: slurm here if this worker has it, process only where no Slurm worker could.
        if (!can_take_now(caps, budget, needs)) continue;
        auto chosen = choose_runner(caps, budget, needs, slurm_elsewhere(needs));
        if (!chosen) continue;
        needs.runner = *chosen;
      } else if (!can_take_now(caps, budget, needs)) {
        continue;
      }
      if (!fits_here(needs)) continue;
      --budget[needs.runner];
      picked.push_back({q.text(0), needs.runner, q.text(2), q.text(5), q.i32(6)});
      bool exhausted = std::all_of(budget.begin(), budget.end(), [](const auto& kv) { return kv.second <= 0; });
      if (exhausted) break;
    }
  }
  std::string when = protocol::format_time(now);
  for (auto& c : picked) {
    protocol::JobAssignment a;
    a.job_id = c.id;
    a.attempt = c.attempts + 1;
    a.lease_id = new_id("lse_");
    a.runner = c.runner;
    a.kind = c.kind;
    a.spec = rows::spec_from(c.spec);
    db_.query("INSERT INTO attempts(lease_id, job_id, attempt, worker_id, state, assigned_at) VALUES(?,?,?,?,'assigned',?)")
        .bind(a.lease_id, a.job_id, a.attempt, worker_id, when)
        .run();
    db_.query("UPDATE jobs SET state='running', runner=?, attempts=?, current_lease=?, worker_id=?, updated_at=? WHERE id=?")
        .bind(a.runner, a.attempt, a.lease_id, worker_id, when, a.job_id)
        .run();
    job_moved(protocol::JobState::queued, protocol::JobState::running);
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<WorkerCaps> Store::other_workers(const std::string& worker_id, const std::string& runner) {
  std::vector<WorkerCaps> out;
  static const std::string sql = std::string("SELECT ") + rows::kCapsColumns +
                                 " FROM workers WHERE status='active' AND directive IS NULL AND id<>? "
                                 "AND EXISTS (SELECT 1 FROM json_each(runners) WHERE value=?)";
  auto q = db_.query(sql.c_str());
  q.bind(worker_id, runner);
  while (q.step()) out.push_back(rows::caps_from(q, 0));
  return out;
}

ApiResult<void> Store::worker_exit(const std::string& worker_id, const protocol::ExitRequest& req, WallTime now) {
  auto find = db_.query("SELECT status FROM workers WHERE id=?");
  find.bind(worker_id);
  if (!find.step()) return unknown_worker(worker_id);
  worker_moved(protocol::parse_worker_status(find.text(0)), protocol::WorkerStatus::gone);
  db_.query("UPDATE workers SET status='gone', exit_reason=?, exit_message=?, last_seen=? WHERE id=?")
      .bind(protocol::to_string(req.exit_reason), req.message, protocol::format_time(now), worker_id)
      .run();
  return {};
}

ApiResult<protocol::WorkerInfo> Store::set_directive(const std::string& worker_id, protocol::Directive d) {
  db_.query("UPDATE workers SET directive=CASE WHEN directive='kill' THEN 'kill' ELSE ? END WHERE id=?")
      .bind(protocol::to_string(d), worker_id)
      .run();
  auto w = worker(worker_id);
  if (!w) return unknown_worker(worker_id);
  return *w;
}

protocol::WorkerList Store::list_workers(const std::optional<std::string>& after, const PageSpec& page) {
  std::vector<std::pair<std::string, std::string>> candidates;  // the cursor of a worker is its id
  {
    auto q = db_.query("SELECT id FROM workers WHERE id > COALESCE(?, '') ORDER BY id LIMIT ?");
    q.bind(after, page.limit + 1);
    while (q.step()) candidates.emplace_back(q.text(0), q.text(0));
  }
  protocol::WorkerList out;
  out.next_cursor = rows::fill_page(candidates, page.limit, page.max_bytes,
                                    [this](const std::string& id) { return worker(id); }, out.workers);
  return out;
}

bool Store::touch_worker(const std::string& worker_id, WallTime now) {
  // To the second, like a poll's: a burst of events then commits no extra write.
  db_.query("UPDATE workers SET last_seen=? WHERE id=? AND last_seen<?")
      .bind(protocol::format_time(now), worker_id, protocol::format_time(now - std::chrono::seconds(1)))
      .run();
  return db_.changes() > 0;
}

bool Store::mark_stale(const std::string& worker_id) {
  db_.query("UPDATE workers SET status='stale' WHERE id=? AND status='active'").bind(worker_id).run();
  if (db_.changes() == 0) return false;
  worker_moved(protocol::WorkerStatus::active, protocol::WorkerStatus::stale);
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// Retention

PurgeOutcome Store::purge(WallTime cutoff, int batch) {
  PurgeOutcome out;
  const std::string before = protocol::format_time(cutoff);
  auto select = [&](const char* sql) {
    std::vector<std::pair<std::string, std::string>> found;  // id, state or status
    auto q = db_.query(sql);
    q.bind(before, batch);
    while (q.step()) found.emplace_back(q.text(0), q.text(1));
    return found;
  };
  auto jobs = select(
      "SELECT id, state FROM jobs WHERE state IN ('succeeded','failed','cancelled','lost') AND finished_at < ? LIMIT ?");
  for (const auto& [id, state] : jobs) {
    out.log_files += delete_job(id);
    job_moved(protocol::parse_job_state(state), std::nullopt);
  }
  auto workers = select(
      "SELECT id, status FROM workers w WHERE status IN ('gone','stale') AND last_seen < ? AND NOT EXISTS "
      "(SELECT 1 FROM attempts a WHERE a.worker_id=w.id AND a.state IN ('assigned','pending','running')) LIMIT ?");
  for (const auto& [id, status] : workers) {
    db_.query("DELETE FROM workers WHERE id=?").bind(id).run();
    worker_moved(protocol::parse_worker_status(status), std::nullopt);
    out.worker_ids.push_back(id);
  }
  out.jobs = static_cast<std::int64_t>(jobs.size());
  out.workers = static_cast<std::int64_t>(workers.size());
  out.more = out.jobs == batch || out.workers == batch;
  return out;
}

std::int64_t Store::delete_job(const std::string& job_id) {
  std::vector<std::pair<int, std::string>> streams;  // attempt, stream
  {
    auto q = db_.query("SELECT attempt, stream FROM log_sizes WHERE job_id=?");
    q.bind(job_id);
    while (q.step()) streams.emplace_back(q.i32(0), q.text(1));
  }
  for (const char* sql : {"DELETE FROM events WHERE job_id=?", "DELETE FROM attempts WHERE job_id=?",
                          "DELETE FROM log_sizes WHERE job_id=?", "DELETE FROM log_chunks WHERE job_id=?",
                          "DELETE FROM jobs WHERE id=?"})
    db_.query(sql).bind(job_id).run();
  std::int64_t files = 0;
  for (const auto& [attempt, stream] : streams) files += logs_.remove(job_id, attempt, stream) ? 1 : 0;
  return files;
}

// ---------------------------------------------------------------------------------------------------------
// Restart and metrics

LiveState Store::live_state() {
  LiveState out;
  {
    auto q = db_.query("SELECT id FROM workers WHERE status='active'");
    while (q.step()) out.active_workers.push_back(q.text(0));
  }
  auto q = db_.query(
      "SELECT a.lease_id, j.runner FROM attempts a JOIN jobs j ON j.id=a.job_id AND j.current_lease=a.lease_id "
      "WHERE a.state IN ('assigned','pending','running')");
  while (q.step()) out.live_leases.push_back({q.text(0), q.text(1)});
  return out;
}

StateCounts& StateCounts::operator+=(const StateCounts& d) {
  for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i] += d.jobs[i];
  for (std::size_t i = 0; i < workers.size(); ++i) workers[i] += d.workers[i];
  return *this;
}

StateCounts Store::counts() {
  StateCounts out;
  // A value this code never writes (a corrupt row) is in no gauge.
  auto q = db_.query(
      "SELECT 'job', state, COUNT(*) FROM jobs GROUP BY state "
      "UNION ALL SELECT 'worker', status, COUNT(*) FROM workers GROUP BY status");
  while (q.step()) {
    if (q.text(0) == "job") {
      if (auto s = protocol::parse_job_state(q.text(1))) out[*s] = q.i64(2);
    } else if (auto s = protocol::parse_worker_status(q.text(1))) {
      out[*s] = q.i64(2);
    }
  }
  return out;
}

StateCounts Store::take_changes() { return std::exchange(changes_, StateCounts{}); }

void Store::job_moved(std::optional<protocol::JobState> from, std::optional<protocol::JobState> to) {
  if (from) --changes_[*from];
  if (to) ++changes_[*to];
}

void Store::worker_moved(std::optional<protocol::WorkerStatus> from, std::optional<protocol::WorkerStatus> to) {
  if (from) --changes_[*from];
  if (to) ++changes_[*to];
}

}  // namespace nymph::control
