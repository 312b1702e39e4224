#include "runners/slurm/tracker.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <string_view>

#include "common/duration.hpp"
#include "slurm/options.hpp"

namespace nymph::runners::slurm {
namespace {

using nymph::slurm::decode_wait_status;
using nymph::slurm::parse_sacct_jobs;
using nymph::slurm::for_each_squeue_job;
using nymph::slurm::SacctJob;
using nymph::slurm::SqueueJob;
using nymph::slurm::phase_of;
using nymph::slurm::sacct_says_accounting_disabled;
using nymph::slurm::SlurmPhase;
using nymph::slurm::squeue_says_invalid_job;
using nymph::slurm::trim;

std::string describe_failure(const Result<CommandResult>& r) {
  if (!r) return r.error().message;
  std::string err(trim(r->err));
  return "exit status " + std::to_string(r->exit_code) + (err.empty() ? "" : ": " + err);
}

JobUpdate update_for(JobState state, const std::string& slurm_id, std::string message) {
  JobUpdate u;
  u.state = state;
  u.slurm_job_id = slurm_id;
  u.message = std::move(message);
  return u;
}

// What Job keeps of a job's name or cluster: 0 for "" (not checked), else a hash that is never 0.
std::size_t identity_hash(std::string_view s) {
  if (s.empty()) return 0;
  const std::size_t h = std::hash<std::string_view>{}(s);
  return h == 0 ? 1 : h;
}

}  // namespace

std::string slurm_job_label(std::string_view slurm_id) { return "Slurm job " + std::string(slurm_id); }

void Tracker::add(TrackedJob job) {
  Job j;
  j.submitted_at = job.submitted_at;
  j.name_hash = identity_hash(job.name);
  j.cluster_hash = identity_hash(job.cluster);
  j.record = job.record;
  jobs_.try_emplace(std::move(job.slurm_id), j);
}

TrackedRecord* Tracker::record_of(std::string_view slurm_id) const {
  auto it = jobs_.find(slurm_id);
  return it == jobs_.end() ? nullptr : it->second.record;
}

bool Tracker::ours(const Job& job, std::string_view name, std::string_view cluster,
                   std::optional<std::int64_t> submit) const {
  if (job.name_hash != 0 && identity_hash(name) != job.name_hash) return false;
  if (job.cluster_hash != 0 && !cluster.empty() && identity_hash(cluster) != job.cluster_hash) return false;
  if (submit) {
    auto earliest = std::chrono::duration_cast<std::chrono::seconds>(
        (job.submitted_at - kSubmitTimeMargin).time_since_epoch());
    if (*submit < earliest.count()) return false;
  }
  return true;
}

std::optional<WallClock::time_point> Tracker::started_at(std::string_view slurm_id) const {
  auto it = jobs_.find(slurm_id);
  if (it == jobs_.end()) return std::nullopt;
  if (!it->second.started_at) return std::nullopt;
  return *it->second.started_at;
}

void Tracker::remove(std::string_view slurm_id) {
  if (auto it = jobs_.find(slurm_id); it != jobs_.end()) jobs_.erase(it);
}

void Tracker::request_cancel(std::string_view slurm_id, CancelCause cause) {
  auto it = jobs_.find(slurm_id);
  if (it == jobs_.end() || it->second.cancel) return;
  it->second.cancel = cause;
}

TrackerAction Tracker::resume(const TrackerEvent& ev, WallClock::time_point now) {
  TrackerAction a;
  now_ = now;
  auto expect = [&](Stage s) {
    if (stage_ != s) throw std::logic_error("slurm tracker: event does not answer the last action");
  };
  return std::visit(
      [&](const auto& e) -> TrackerAction {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, tracker_event::CycleStart>) {
          expect(Stage::idle);
          return start_cycle(now);
        } else if constexpr (std::is_same_v<E, tracker_event::ScancelDone>) {
          expect(Stage::scancel);
          if (!e.result || e.result->exit_code != 0) {
            a.warnings.push_back("scancel failed (" + describe_failure(e.result) + "); retrying next cycle");
            for (const auto& id : cancelling_)
              if (auto it = jobs_.find(id); it != jobs_.end()) it->second.cancel_resend = true;
          }
          return query_squeue(std::move(a));
        } else if constexpr (std::is_same_v<E, tracker_event::SqueueDone>) {
          expect(Stage::squeue);
          return on_squeue(e.result, std::move(a));
        } else if constexpr (std::is_same_v<E, tracker_event::SacctDone>) {
          expect(Stage::sacct);
          return on_sacct(e.result, std::move(a));
        } else {
          expect(Stage::exit_files);
          return on_exit_files(e, std::move(a));
        }
      },
      ev);
}

TrackerAction Tracker::start_cycle(WallClock::time_point now) {
  TrackerAction a;
  std::vector<std::string> given_up;
  for (auto& [id, job] : jobs_) {
    if (!job.cancel) {
      // Running time counts from Slurm's start; queue time has its own bound.
      if (job.started_at && now - *job.started_at > config_.max_poll_duration)
        job.cancel = CancelCause::max_poll_duration;
      else if (!job.started_at && now - job.submitted_at > config_.max_queue_duration)
        job.cancel = CancelCause::max_queue_duration;
    }
    bool bound = job.cancel == CancelCause::max_poll_duration || job.cancel == CancelCause::max_queue_duration;
    if (bound && job.cancel_sent_at && now - *job.cancel_sent_at > config_.cancel_grace) given_up.push_back(id);
  }
  for (const auto& id : given_up) {
    const char* bound = jobs_.find(id)->second.cancel == CancelCause::max_poll_duration ? "max_poll_duration"
                                                                                       : "max_queue_duration";
    auto u = update_for(JobState::lost, id,
                        slurm_job_label(id) + " exceeded " + bound + " and Slurm did not confirm its "
                        "cancellation; no longer tracked (it may still be in Slurm)");
    a.warnings.push_back(u.message);
    finish(id, std::move(u), a);
  }
  for (auto& [id, job] : jobs_) {
    if (!job.cancel || (job.cancel_sent_at && !job.cancel_resend)) continue;
    job.cancel_sent_at = now;
    job.cancel_resend = false;
    a.slurm_ids.push_back(id);
  }
  cancelling_ = a.slurm_ids;
  if (!a.slurm_ids.empty()) {
    stage_ = Stage::scancel;
    a.step = TrackerStep::scancel;
    return a;
  }
  return query_squeue(std::move(a));
}

TrackerAction Tracker::query_squeue(TrackerAction a) {
  a.slurm_ids.clear();
  queried_.clear();
  missing_.clear();
  for (const auto& [id, job] : jobs_) queried_.push_back(id);
  if (queried_.empty()) return finish_cycle(std::move(a));
  stage_ = Stage::squeue;
  a.step = TrackerStep::squeue;
  a.slurm_ids = queried_;
  return a;
}

TrackerAction Tracker::on_squeue(const Result<CommandResult>& r, TrackerAction a) {
  std::string_view out;  // what squeue showed; nothing when it only refused a purged id
  if (r && r->exit_code != 0 && squeue_says_invalid_job(r->err)) {
    // A single purged id makes squeue fail; for us it just means "not shown".
  } else if (!r || r->exit_code != 0) {
    a.warnings.push_back("squeue failed (" + describe_failure(r) + "); retrying next cycle");
    return finish_cycle(std::move(a));
  } else {
    out = r->out;
  }
  // One row at a time (ten thousand held at once cost more than the rest of a cycle); the rows and `shown` view
  // r->out. queried_ is in jobs_' order, sorted: binary searches keep a cycle O(N log N) at 10 000 jobs.
  std::vector<std::string_view> shown;
  shown.reserve(queried_.size());
  if (auto read = for_each_squeue_job(out, [&](const SqueueJob& row) { on_squeue_row(row, shown, a); }); !read) {
    a.warnings.push_back(read.error().message + "; retrying next cycle");
    return finish_cycle(std::move(a));
  }
  std::sort(shown.begin(), shown.end());
  for (const auto& id : queried_)
    if (tracking(id) && !std::binary_search(shown.begin(), shown.end(), id)) missing_.push_back(id);
  return after_squeue(std::move(a));
}

void Tracker::on_squeue_row(const SqueueJob& row, std::vector<std::string_view>& shown, TrackerAction& a) {
  if (!std::binary_search(queried_.begin(), queried_.end(), row.job_id)) return;
  auto it = jobs_.find(row.job_id);
  if (it == jobs_.end()) return;
  // Another job under a recycled id is not ours: for us ours is then "not shown".
  if (!ours(it->second, row.name, row.cluster, row.submit_time)) return;
  auto phase = phase_of(row.state);
  if (phase == SlurmPhase::pending || phase == SlurmPhase::running) {
    shown.push_back(row.job_id);
    report_active(row, a, now_);
  } else if (phase == SlurmPhase::finished && (row.wait_status || row.state == "COMPLETED")) {
    // squeue's word counts (on a cluster without accounting it is the only one): the job has ended.
    auto [code, sig] = decode_wait_status(row.wait_status.value_or(0));
    shown.push_back(row.job_id);
    const std::string id(row.job_id), state(row.state);
    finish(id, final_from_state(id, it->second, state, state, code, sig), a);
  }
  // Anything else (an unknown state, a final one without an exit code) is left to sacct and the exit file.
}

void Tracker::report_active(const SqueueJob& row, TrackerAction& a, WallClock::time_point now) {
  auto& job = jobs_.find(row.job_id)->second;
  job.missing_cycles = 0;
  job.evidence = Evidence::none;
  if (job.cancel && job.cancel_sent_at && row.state != "COMPLETING") job.cancel_resend = true;
  bool pending = phase_of(row.state) == SlurmPhase::pending;
  if (!pending && !job.started_at) {
    // Slurm's own start time when it printed one (a resumed attempt started long before we saw it).
    job.started_at = now;
    if (row.start_time) {
      auto start = WallClock::time_point(std::chrono::seconds(*row.start_time));
      if (start < now) job.started_at = start;
    }
  }
  std::string message = slurm_job_label(row.job_id) + " is " + std::string(row.state);
  if (pending && !row.reason.empty() && row.reason != "None") message += " (" + std::string(row.reason) + ")";
  std::size_t key = std::hash<std::string>{}((pending ? "p:" : "r:") + message) | 1;
  if (row.state == "COMPLETING") key = job.last_report;  // a phase of running, not worth an update
  if (key == job.last_report) return;
  job.last_report = key;
  const std::string id(row.job_id);
  a.reports.push_back({id, update_for(pending ? JobState::pending : JobState::running, id, message), job.record});
}

TrackerAction Tracker::after_squeue(TrackerAction a) {
  if (missing_.empty()) return finish_cycle(std::move(a));
  a.slurm_ids = missing_;
  a.sacct_since = jobs_.find(missing_.front())->second.submitted_at;
  for (const auto& id : missing_) a.sacct_since = std::min(a.sacct_since, jobs_.find(id)->second.submitted_at);
  a.sacct_since -= kSubmitTimeMargin;
  if (accounting_disabled_) {
    for (const auto& id : missing_) jobs_.find(id)->second.evidence = Evidence::no_accounting;
    stage_ = Stage::exit_files;
    a.step = TrackerStep::read_exit_files;
  } else {
    stage_ = Stage::sacct;
    a.step = TrackerStep::sacct;
  }
  return a;
}

TrackerAction Tracker::on_sacct(const Result<CommandResult>& r, TrackerAction a) {
  std::vector<SacctJob> rows;
  Evidence fallback = Evidence::sacct_absent;
  if (r && r->exit_code != 0 && sacct_says_accounting_disabled(r->err)) {
    accounting_disabled_ = true;
    fallback = Evidence::no_accounting;
    a.warnings.emplace_back("sacct: Slurm accounting storage is disabled; final states come from exit-status files");
  } else if (!r || r->exit_code != 0) {
    fallback = Evidence::sacct_unavailable;
    a.warnings.push_back("sacct failed (" + describe_failure(r) + "); trying exit-status files, else next cycle");
  } else if (auto parsed = parse_sacct_jobs(r->out); !parsed) {
    fallback = Evidence::sacct_unavailable;
    a.warnings.push_back(parsed.error().message);
  } else {
    rows = std::move(*parsed);
  }
  std::multimap<std::string_view, const SacctJob*> rows_of;  // by id: a purge of thousands stays O(N log N)
  for (const auto& s : rows) rows_of.emplace(s.job_id, &s);
  std::vector<std::string> unresolved;
  for (const auto& id : missing_) {
    if (!tracking(id)) continue;
    auto& job = jobs_.find(id)->second;
    // Records of other jobs under a recycled id are ignored; of ours (a requeue), the latest submission.
    const SacctJob* row = nullptr;
    for (auto [at, end] = rows_of.equal_range(id); at != end; ++at) {
      const SacctJob& s = *at->second;
      if (!ours(job, s.name, s.cluster, s.submit_time)) continue;
      if (!row || s.submit_time.value_or(0) >= row->submit_time.value_or(0)) row = &s;
    }
    if (row && phase_of(row->state) != SlurmPhase::pending && phase_of(row->state) != SlurmPhase::running) {
      finish(id, final_from_state(id, job, row->state, row->state_text, row->exit_code, row->signal), a);
      continue;
    }
    job.evidence = row ? Evidence::sacct_not_final : fallback;
    unresolved.push_back(id);
  }
  missing_ = unresolved;
  if (missing_.empty()) return finish_cycle(std::move(a));
  stage_ = Stage::exit_files;
  a.step = TrackerStep::read_exit_files;
  a.slurm_ids = missing_;
  return a;
}

TrackerAction Tracker::on_exit_files(const tracker_event::ExitFilesRead& ev, TrackerAction a) {
  for (const auto& id : missing_) {
    if (!tracking(id)) continue;
    auto& job = jobs_.find(id)->second;
    auto it = ev.status.find(id);
    std::optional<int> status = it == ev.status.end() ? std::nullopt : it->second;
    if (job.evidence == Evidence::sacct_unavailable) {
      // sacct could not answer: an exit-status file is a real record; its absence proves nothing yet.
      if (status) finish(id, final_from_exit_file(id, job, *status), a);
      continue;
    }
    ++job.missing_cycles;
    bool patient = job.evidence == Evidence::sacct_not_final && job.missing_cycles < config_.lost_after_cycles;
    if (status && !patient) finish(id, final_from_exit_file(id, job, *status), a);
    else if (!status && job.missing_cycles >= config_.lost_after_cycles) finish(id, lost(id, job), a);
  }
  return finish_cycle(std::move(a));
}

TrackerAction Tracker::finish_cycle(TrackerAction a) {
  stage_ = Stage::idle;
  // Released, not cleared: at ten thousand jobs the cycle's id lists would keep half a megabyte between cycles.
  queried_ = {};
  missing_ = {};
  cancelling_ = {};
  a.step = TrackerStep::cycle_done;
  a.slurm_ids.clear();
  return a;
}

void Tracker::finish(const std::string& id, JobUpdate u, TrackerAction& a) {
  auto it = jobs_.find(id);
  TrackedRecord* record = it == jobs_.end() ? nullptr : it->second.record;
  if (it != jobs_.end()) jobs_.erase(it);
  a.reports.push_back({id, std::move(u), record});
}

JobUpdate Tracker::final_from_state(const std::string& id, const Job& job, const std::string& state,
                                    const std::string& state_text, int exit_code, int signal) const {
  const std::string label = slurm_job_label(id);
  JobUpdate u;
  u.slurm_job_id = id;
  u.exit_code = exit_code;
  if (signal != 0) u.signal = signal;
  if (state == "COMPLETED") {
    u.state = JobState::succeeded;
    u.message = label + " COMPLETED";
  } else if (state == "CANCELLED" && (job.cancel == CancelCause::user || job.cancel == CancelCause::lease_lost)) {
    u.state = JobState::cancelled;
    u.message = label + " cancelled (" + state_text + ")";
  } else if (state == "CANCELLED" && job.cancel == CancelCause::max_poll_duration) {
    u.state = JobState::failed;
    u.message = label + " cancelled: running longer than max_poll_duration (" +
                format_duration(config_.max_poll_duration) + ")";
  } else if (state == "CANCELLED" && job.cancel == CancelCause::max_queue_duration) {
    u.state = JobState::failed;
    u.message = label + " cancelled: queued longer than max_queue_duration (" +
                format_duration(config_.max_queue_duration) + ")";
  } else if (state == "TIMEOUT") {
    u.state = JobState::failed;
    u.message = label + " TIMEOUT: it reached its Slurm time limit";
  } else {
    u.state = JobState::failed;
    u.message = label + " ended " + state_text + ", exit code " + std::to_string(exit_code) +
                (signal ? ", signal " + std::to_string(signal) : "");
  }
  return u;
}

JobUpdate Tracker::final_from_exit_file(const std::string& id, const Job& job, int status) const {
  const std::string label = slurm_job_label(id);
  JobUpdate u;
  u.slurm_job_id = id;
  u.exit_code = status;
  const std::string source = " (from its exit-status file; no accounting record)";
  if (job.cancel == CancelCause::max_queue_duration || job.cancel == CancelCause::max_poll_duration) {
    u.state = JobState::failed;
    u.message = label + " cancelled: " +
                (job.cancel == CancelCause::max_poll_duration
                     ? "running longer than max_poll_duration (" + format_duration(config_.max_poll_duration)
                     : "queued longer than max_queue_duration (" + format_duration(config_.max_queue_duration)) +
                ")" + source;
  } else if (job.cancel == CancelCause::user || job.cancel == CancelCause::lease_lost) {
    u.state = JobState::cancelled;
    u.message = label + " cancelled, exit status " + std::to_string(status) + source;
  } else if (status == 0) {
    u.state = JobState::succeeded;
    u.message = label + " exited 0" + source;
  } else {
    u.state = JobState::failed;
    u.message = label + " exited " + std::to_string(status) + source;
  }
  return u;
}

JobUpdate Tracker::lost(const std::string& id, const Job& job) const {
  std::string why = job.evidence == Evidence::no_accounting ? "accounting is disabled"
                    : job.evidence == Evidence::sacct_not_final ? "sacct never showed a final state"
                                                                 : "sacct has no record of it";
  auto u = update_for(JobState::lost, id,
                      slurm_job_label(id) + " is no longer in squeue, " + why +
                          ", and it left no exit-status file: its outcome is unknown");
  if (job.cancel == CancelCause::user || job.cancel == CancelCause::lease_lost) {
    u.state = JobState::cancelled;
    u.message = slurm_job_label(id) + " cancelled; it left no record of its exit status";
  }
  return u;
}

}  // namespace nymph::runners::slurm
