#include "installer/launches.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "common/ulid.hpp"
#include "installer/process.hpp"
#include "runners/slurm/journal.hpp"
#include "slurm/commands.hpp"
#include "slurm/parse.hpp"

namespace nymph::installer {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// squeue's state of this user's jobs: job id -> state; nullopt when squeue could not be run, failed or printed
// something unreadable.
std::optional<std::map<std::string, std::string>> slurm_states(const ManageContext& ctx) {
  auto r = run_bounded(slurm::squeue_user_argv(ctx.squeue, std::to_string(::getuid())), {}, ctx.command_timeout);
  if (!r || r->exit_code != 0) return std::nullopt;
  auto rows = slurm::parse_squeue(r->out);
  if (!rows) return std::nullopt;
  std::map<std::string, std::string> out;
  for (auto& row : *rows) out[row.job_id] = std::move(row.state);
  return out;
}

// Turns squeue's table into the Observation of one launch: "" when the job is no longer listed.
std::optional<std::string> slurm_state_of(const std::optional<std::map<std::string, std::string>>& states,
                                          const std::string& job_id) {
  if (!states) return std::nullopt;
  auto it = states->find(job_id);
  return it == states->end() ? std::string{} : it->second;
}

// A kept launch: every generation classified from squeue; the launch runs while one runs, is queued while one is
// queued (and none runs), unknown when squeue could not say, else exited. Its status is the newest started
// generation's.
void inspect_chain(LaunchInfo& info, const std::optional<std::map<std::string, std::string>>& slurm) {
  auto chain = agent::read_chain_record(info.dir);
  if (!chain || !*chain) {
    info.problem = chain ? "chain.json is missing" : chain.error().message;
    if (auto st = read_status(info.dir)) info.status = *st;
    return;
  }
  ChainView view{.record = std::move(**chain)};
  bool any_running = false, any_queued = false, any_unknown = false;
  for (const auto& g : view.record.generations) {
    LaunchRecord one = *info.record;
    one.slurm_job_id = g.slurm_job_id;
    Observation obs{.slurm_state = slurm_state_of(slurm, g.slurm_job_id)};
    auto state = g.slurm_job_id.empty() ? LaunchState::exited : classify(one, obs);
    view.states.push_back(state);
    any_running = any_running || state == LaunchState::running;
    any_queued = any_queued || state == LaunchState::queued;
    any_unknown = any_unknown || state == LaunchState::unknown;
    if (state == LaunchState::queued && !g.started_at_ms) view.next = g;
    if (g.started_at_ms)
      if (auto st = read_status(info.dir, agent::status_file_name(g.generation))) info.status = *st;
  }
  if (!info.status)  // no generation recorded its start (yet): what generation 1 wrote, if anything
    if (auto st = read_status(info.dir)) info.status = *st;
  info.state = any_running ? LaunchState::running
               : any_queued ? LaunchState::queued
               : any_unknown ? LaunchState::unknown
                             : LaunchState::exited;
  if (info.state == LaunchState::unknown) info.problem = "squeue failed";
  info.chain = std::move(view);
}

LaunchInfo inspect(const fs::path& dir, const ManageContext& ctx,
                   const std::optional<std::map<std::string, std::string>>& slurm) {
  LaunchInfo info{.launch_id = dir.filename().native(), .dir = dir};
  auto record = read_launch_record(dir);
  if (!record) {
    info.problem = record.error().message;
    return info;
  }
  info.record = *record;
  if (record->keep) {  // its status is the newest started generation's
    inspect_chain(info, slurm);
    return info;
  }
  if (auto s = read_status(dir)) info.status = *s;
  Observation obs;
  obs.on_this_host = record->host == ctx.hostname;
  obs.process_running = obs.on_this_host && record->pid && runs_command(*record->pid, record->command);
  if (record->mode == "slurm") obs.slurm_state = slurm_state_of(slurm, record->slurm_job_id);
  info.state = classify(*record, obs);
  if (info.state == LaunchState::unknown) {
    if (!obs.on_this_host && record->mode == "local") info.problem = "started on host " + record->host;
    else if (record->mode == "slurm" && !record->slurm_job_id.empty()) info.problem = "squeue failed";
    else info.problem = "no pid or job id recorded (interrupted install?)";
  }
  return info;
}

std::vector<fs::path> launch_dirs(const ManageContext& ctx) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ctx.state_dir / "launches", ec)) {
    if (is_canonical_ulid(e.path().filename().native()) && e.is_directory(ec)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

bool needs_slurm(const std::vector<fs::path>& dirs) {
  for (const auto& d : dirs)
    if (auto r = read_launch_record(d); r && r->mode == "slurm" && !r->slurm_job_id.empty()) return true;
  return false;
}

// Polls `done` until it returns true or the deadline passes. The interval grows from 20 ms to 500 ms.
template <class F>
bool wait_for(F done, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto step = std::chrono::milliseconds(20);
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(step, deadline - Clock::now()));
    step = std::min(step * 2, std::chrono::milliseconds(500));
  }
  return true;
}

Result<bool> kill_local(const LaunchInfo& info, const ManageContext& ctx, std::chrono::milliseconds timeout) {
  const auto& r = *info.record;
  if (r.host != ctx.hostname)
    return fail("launch " + r.launch_id + " runs on host " + r.host + "; run `nymph kill` there");
  pid_t pid = *r.pid;
  if (::kill(pid, SIGTERM) != 0 && errno != ESRCH)
    return fail("cannot signal pid " + std::to_string(pid) + ": " + std::strerror(errno));
  return wait_for([&] { return !runs_command(pid, r.command); }, timeout);
}

Result<bool> kill_slurm(const LaunchInfo& info, const ManageContext& ctx, std::chrono::milliseconds timeout) {
  const auto& id = info.record->slurm_job_id;
  std::vector<std::string> ids{id};
  auto r = run_bounded(slurm::scancel_argv(ctx.scancel, ids), {}, ctx.command_timeout);
  if (!r) return fail("scancel: " + r.error().message);
  if (r->exit_code != 0) return fail("scancel " + id + " failed: " + r->err);
  return wait_for(
      [&] {
        auto states = slurm_states(ctx);
        if (!states) return false;
        auto it = states->find(id);
        return it == states->end() || it->second == "CANCELLED" || it->second == "COMPLETED";
      },
      timeout);
}

// The jobs of a kept launch still in squeue (any state but a final one), by its job name; nullopt when squeue
// failed.
std::optional<int> chain_jobs_left(const LaunchInfo& info, const ManageContext& ctx) {
  auto chain = agent::read_chain_record(info.dir);
  auto states = slurm_states(ctx);
  if (!states || !chain || !*chain) return std::nullopt;
  int left = 0;
  for (const auto& g : (*chain)->generations) {
    auto it = g.slurm_job_id.empty() ? states->end() : states->find(g.slurm_job_id);
    if (it != states->end() && slurm::phase_of(it->second) != slurm::SlurmPhase::finished) ++left;
  }
  return left;
}

// A kept launch: stop request first (no generation submits a successor after it reads it), scancel by job name
// (every generation, queued or running), wait, and scancel by name again for a successor whose sbatch was in
// flight when the stop was requested (its generation cancels it too, once it sees the request).
Result<bool> kill_chain(const LaunchInfo& info, const ManageContext& ctx, std::chrono::milliseconds timeout) {
  auto stopped = agent::update_chain_record(info.dir, [](agent::ChainRecord& c) {
    c.stop_requested = true;
    if (c.state == "renewing") {
      c.state = "ended";
      c.reason = "stopped by nymph kill";
    }
  });
  if (!stopped) return fail("cannot record the stop of the chain: " + stopped.error().message);
  const std::vector<std::string> by_name{ctx.scancel, "--name=lakeshore-nymph-" + info.launch_id};
  auto r = run_bounded(by_name, {}, ctx.command_timeout);
  if (!r) return fail("scancel: " + r.error().message);
  if (r->exit_code != 0) return fail("scancel --name=lakeshore-nymph-" + info.launch_id + " failed: " + r->err);
  bool gone = wait_for([&] { return chain_jobs_left(info, ctx) == 0; }, timeout);
  auto again = run_bounded(by_name, {}, ctx.command_timeout);
  if (!again || again->exit_code != 0) return fail("scancel (second pass) failed");
  return gone;
}

// The log of a launch, when its record names the expected file for that launch (never anything else).
std::optional<fs::path> own_log(const LaunchInfo& info) {
  if (!info.record) return std::nullopt;
  const auto& log = info.record->log_path;
  if (!log.is_absolute() || log.filename() != "nymph-" + info.launch_id + ".log") return std::nullopt;
  return log;
}

void prune_temporaries(const ManageContext& ctx, PruneOutcome& out) {
  std::error_code ec;
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& e : fs::directory_iterator(ctx.state_dir / "launches", ec)) {
    auto name = e.path().filename().native();
    if (!name.starts_with(".tmp-") || name.size() < 5 + 26) continue;
    auto id = parse_ulid(name.substr(5, 26));
    if (!id || now_ms - static_cast<std::int64_t>(id->time_ms()) < 3'600'000) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (rm) out.errors.push_back(e.path().string() + ": " + rm.message());
  }
}

std::string pid_or_job(const LaunchInfo& l) {
  if (!l.record) return "-";
  if (l.record->mode == "slurm") return l.record->slurm_job_id.empty() ? "-" : "job " + l.record->slurm_job_id;
  return l.record->pid ? "pid " + std::to_string(*l.record->pid) : "-";
}

// The job directories of Slurm jobs that may still be queued or running: every entry not marked done in a
// journal that a launch directory may be used by — the journal inside each launch directory (the layout before
// manager identities: launch_dir was the launch's own directory; a kept launch's generation N >= 2 keeps its own in
// <launch>/generation-N) and the journals of the manager identities
// under <state-dir>/managers/*/slurm. An unreadable journal protects the directory it lives in.
std::vector<fs::path> slurm_dirs_in_use(const ManageContext& ctx, const std::vector<fs::path>& launches) {
  std::vector<fs::path> journals;
  journals.reserve(launches.size());
  std::error_code ec;
  for (const auto& d : launches) {
    journals.push_back(d / runners::slurm::kJournalFile);
    for (const auto& g : fs::directory_iterator(d, ec))  // a kept launch's generations 2, 3...
      if (g.path().filename().native().starts_with("generation-"))
        journals.push_back(g.path() / runners::slurm::kJournalFile);
  }
  for (const auto& m : fs::directory_iterator(ctx.state_dir / "managers", ec))
    journals.push_back(m.path() / "slurm" / runners::slurm::kJournalFile);
  std::vector<fs::path> in_use;
  for (const auto& j : journals) {
    std::error_code e;
    if (!fs::exists(j, e)) continue;
    auto entries = runners::slurm::read_journal(j);
    if (!entries) {
      in_use.push_back(j.parent_path());
      continue;
    }
    for (const auto& entry : *entries) in_use.push_back(entry.dir.empty() ? j.parent_path() : fs::path(entry.dir));
  }
  return in_use;
}

// True when `dir` is `launch` or inside it.
bool inside(const fs::path& dir, const fs::path& launch) {
  auto d = dir.lexically_normal(), l = launch.lexically_normal();
  auto [end, _] = std::mismatch(l.begin(), l.end(), d.begin(), d.end());
  return end == l.end();
}

// "chain": chain.json with each generation's state, the next generation (queued) and what the serving generation
// says about its successor (its status.json "chain").
json::object chain_json(const ChainView& v, const std::optional<StatusSnapshot>& status) {
  json::object o = agent::to_json(v.record).as_object();
  auto& gens = o["generations"].as_array();
  for (std::size_t i = 0; i < gens.size() && i < v.states.size(); ++i)
    gens[i].as_object()["state"] = to_string(v.states[i]);
  o["next"] = v.next ? json::value{{"generation", v.next->generation}, {"slurmJobId", v.next->slurm_job_id}}
                     : json::value(nullptr);
  o["serving"] = status ? status->chain : json::value(nullptr);
  return o;
}

// One line under a kept launch's row: the chain's state, its generations and the next one.
std::string chain_text(const ChainView& v) {
  std::string s = "    chain " + v.record.state + ":";
  for (std::size_t i = 0; i < v.record.generations.size() && i < v.states.size(); ++i) {
    const auto& g = v.record.generations[i];
    s += " g" + std::to_string(g.generation) + " " + (g.slurm_job_id.empty() ? "-" : "job " + g.slurm_job_id) +
         " " + to_string(v.states[i]) + (g.exit_reason.empty() ? "" : " (" + g.exit_reason + ")") + ";";
  }
  if (v.next) s += " next: g" + std::to_string(v.next->generation) + " job " + v.next->slurm_job_id + ";";
  if (!v.record.reason.empty()) s += " " + v.record.reason;
  return s + "\n";
}

}  // namespace

std::vector<LaunchInfo> list_launches(const ManageContext& ctx) {
  auto dirs = launch_dirs(ctx);
  std::optional<std::map<std::string, std::string>> slurm;
  if (needs_slurm(dirs)) slurm = slurm_states(ctx);
  std::vector<LaunchInfo> out;
  out.reserve(dirs.size());
  for (const auto& d : dirs) out.push_back(inspect(d, ctx, slurm));
  return out;
}

json::object launch_json(const LaunchInfo& l) {
  json::object o;
  o["launchId"] = l.launch_id;
  o["state"] = to_string(l.state);
  o["launchDir"] = l.dir.native();
  if (l.record) {
    o["workerLabel"] = l.record->worker_label;
    o["mode"] = l.record->mode;
    o["host"] = l.record->host;
    o["pid"] = l.record->pid ? json::value(*l.record->pid) : json::value(nullptr);
    o["slurmJobId"] = l.record->slurm_job_id.empty() ? json::value(nullptr) : json::value(l.record->slurm_job_id);
    o["logPath"] = l.record->log_path.native();
    o["createdAtMs"] = l.record->created_at_ms;
    if (!l.record->start_error.empty()) o["startError"] = l.record->start_error;
  }
  o["exitReason"] = l.status && l.status->exit_reason ? json::value(*l.status->exit_reason) : json::value(nullptr);
  o["daemonState"] = l.status ? json::value(l.status->state) : json::value(nullptr);
  o["workerId"] = l.status && !l.status->worker_id.empty() ? json::value(l.status->worker_id) : json::value(nullptr);
  if (l.status && !l.status->runner_trouble.empty()) o["runnerTrouble"] = json::value_from(l.status->runner_trouble);
  if (l.chain) o["chain"] = chain_json(*l.chain, l.status);
  if (!l.problem.empty()) o["problem"] = l.problem;
  return o;
}

json::object launches_json(const std::vector<LaunchInfo>& launches) {
  json::array a;
  for (const auto& l : launches) a.push_back(launch_json(l));
  return {{"launches", std::move(a)}};
}

std::string launches_text(const std::vector<LaunchInfo>& launches) {
  if (launches.empty()) return "no launches\n";
  std::ostringstream s;
  char line[512];
  std::snprintf(line, sizeof line, "%-26s  %-7s  %-12s  %-40s  %-11s  %s\n", "LAUNCH ID", "STATE", "PID/JOB",
                "WORKER LABEL", "EXIT REASON", "LOG");
  s << line;
  for (const auto& l : launches) {
    std::string reason = l.status && l.status->exit_reason ? *l.status->exit_reason : "-";
    std::string label = l.record ? l.record->worker_label : "-";
    std::string log = l.record ? l.record->log_path.native() : ("(" + l.problem + ")");
    std::snprintf(line, sizeof line, "%-26s  %-7s  %-12s  %-40s  %-11s  %s\n", l.launch_id.c_str(),
                  to_string(l.state), pid_or_job(l).c_str(), label.c_str(), reason.c_str(), log.c_str());
    s << line;
    if (l.chain) s << chain_text(*l.chain);
  }
  return s.str();
}

namespace {

// The launch directory `target` names: a launch ID (any case), a worker label (launch.json), or the worker ID
// the control plane gave the daemon (status.json; a kept launch: any generation's status file). nullopt when none
// does. Reads files only.
std::optional<fs::path> launch_dir_of(const ManageContext& ctx, const std::string& target) {
  std::string id = target;
  if (auto u = parse_ulid(target)) id = u->str();
  auto dirs = launch_dirs(ctx);
  for (const auto& d : dirs)
    if (d.filename() == id) return d;
  for (const auto& d : dirs)
    if (auto r = read_launch_record(d); r && r->worker_label == target) return d;
  if (target.starts_with("wrk_"))
    for (const auto& d : dirs) {
      if (auto s = read_status(d); s && s->worker_id == target) return d;
      if (auto chain = agent::read_chain_record(d); chain && *chain)  // a kept launch: each generation's worker
        for (const auto& g : (*chain)->generations)
          if (auto s = read_status(d, agent::status_file_name(g.generation)); s && s->worker_id == target) return d;
    }
  return std::nullopt;
}

}  // namespace

bool launch_exists(const ManageContext& ctx, const std::string& target) {
  return launch_dir_of(ctx, target).has_value();
}

Result<LaunchInfo> find_launch(const ManageContext& ctx, const std::string& target) {
  if (auto found = launch_dir_of(ctx, target)) {
    const fs::path& d = *found;
    std::optional<std::map<std::string, std::string>> slurm;
    if (needs_slurm({d})) slurm = slurm_states(ctx);
    return inspect(d, ctx, slurm);
  }
  return fail("no launch with ID, worker label or worker ID '" + target + "' in " + (ctx.state_dir / "launches").string() +
              " (see `nymph launches`)");
}

Result<KillOutcome> kill_launch(const ManageContext& ctx, const std::string& target,
                                std::chrono::milliseconds timeout) {
  auto info = find_launch(ctx, target);
  if (!info) return info.error();
  KillOutcome out{.launch = *info};
  if (!info->record) return fail("launch " + info->launch_id + " cannot be stopped: " + info->problem);
  if (info->state == LaunchState::exited) {
    out.stopped = true;
  } else if (info->state == LaunchState::unknown && info->record->mode == "local") {
    return fail("launch " + info->launch_id + " cannot be stopped from here: " + info->problem);
  } else {
    out.was_running = true;
    auto stopped = info->record->keep             ? kill_chain(*info, ctx, timeout)
                   : info->record->mode == "slurm" ? kill_slurm(*info, ctx, timeout)
                                                   : kill_local(*info, ctx, timeout);
    if (!stopped) return stopped.error();
    out.stopped = *stopped;
  }
  if (auto s = read_status(info->dir)) out.exit_reason = s->exit_reason;
  if (info->chain)  // the generation that ran last says why it exited
    for (const auto& g : info->chain->record.generations)
      if (auto s = read_status(info->dir, agent::status_file_name(g.generation)); s && s->exit_reason)
        out.exit_reason = s->exit_reason;
  return out;
}

PruneOutcome prune_launches(const ManageContext& ctx) {
  PruneOutcome out;
  const auto in_use = slurm_dirs_in_use(ctx, launch_dirs(ctx));
  for (const auto& l : list_launches(ctx)) {
    if (l.state != LaunchState::exited) {
      out.kept.push_back(l.launch_id + ": " + to_string(l.state) + (l.problem.empty() ? "" : " (" + l.problem + ")"));
      continue;
    }
    auto used = std::count_if(in_use.begin(), in_use.end(), [&](const fs::path& d) { return inside(d, l.dir); });
    if (used > 0) {
      out.kept.push_back(l.launch_id + ": exited, but " + std::to_string(used) +
                         " Slurm job(s) of a journal may still use its directory");
      continue;
    }
    std::error_code ec;
    if (auto log = own_log(l)) fs::remove(*log, ec);
    if (ec) out.errors.push_back(own_log(l)->string() + ": " + ec.message());
    fs::remove_all(l.dir, ec);
    if (ec) out.errors.push_back(l.dir.string() + ": " + ec.message());
    else out.removed.push_back(l.launch_id);
  }
  prune_temporaries(ctx, out);
  return out;
}

}  // namespace nymph::installer
