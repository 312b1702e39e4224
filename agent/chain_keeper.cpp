#include "agent/chain_keeper.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agent/chain_record.hpp"
#include "common/coroutine_warning.hpp"
#include "slurm/parse.hpp"

namespace nymph::agent {

namespace asio = boost::asio;

namespace {

// The first line of a command's complaint, for a record and a log line.
std::string first_line(std::string text) {
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  if (text.size() > 300) text.resize(300);
  return text;
}

bool stops_the_chain(std::optional<ExitReason> r) {
  return r == ExitReason::sigterm || r == ExitReason::sigint || r == ExitReason::killed;
}

// The job id a `sbatch --parsable` printed, or why there is none, as one line (for chain.json and the log).
Result<std::string> submitted_job_id(const Result<slurm::CommandResult>& sbatch) {
  if (!sbatch) return sbatch.error();
  if (sbatch->exit_code != 0)
    return fail("sbatch exited " + std::to_string(sbatch->exit_code) + ": " +
                first_line(sbatch->err.empty() ? sbatch->out : sbatch->err));
  auto id = slurm::parse_sbatch_output(sbatch->out);
  if (!id) return fail("sbatch: " + first_line(id.error().message));
  return id;
}

}  // namespace

SuccessorConfig successor_config(const ChainSection& c) {
  return {.min_generations = c.min_generations,
          .max_generations = c.max_generations,
          .idle_end = c.idle_end,
          .floor = c.successor_floor,
          .ceiling = c.successor_ceiling,
          .backoff = c.submit_backoff,
          .pause_after = c.pause_after};
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<std::string> submit_successor(SuccessorSubmission s, SuccessorPolicy& policy,
                                              slurm::CommandRunner& commands, std::shared_ptr<spdlog::logger> log) {
  std::vector<std::string> argv{s.sbatch, "--parsable", s.script.native(), std::to_string(s.next)};
  log->info("{}: submitting generation {}", s.log_prefix, s.next);
  auto ran = co_await commands.run(argv, slurm::scrubbed_environment(), s.command_timeout);
  auto submitted = submitted_job_id(ran);
  if (!submitted) {
    const std::string& error = submitted.error().message;
    policy.submission_failed(Clock::now(), error);
    log->warn("{}: generation {} could not be submitted: {}", s.log_prefix, s.next, error);
    const bool paused = policy.phase() == ChainPhase::paused;
    auto rec = update_chain_record(s.dir, [&](ChainRecord& c) {
      c.failures = policy.failures();
      c.reason = policy.reason();
      if (paused) c.state = "paused";
    });
    if (!rec) log->warn("{}: cannot record the failure: {}", s.log_prefix, rec.error().message);
    if (paused) log->error("{}: chain paused: {}", s.log_prefix, policy.reason());
    co_return std::string();
  }
  policy.submission_succeeded();
  const std::string job_id = *submitted;
  const auto now = std::chrono::system_clock::now();
  bool take_back = false;
  auto rec = update_chain_record(s.dir, [&](ChainRecord& c) {
    // Stopped meanwhile, or another job recorded for this generation (the successor's own start record carries
    // its own job id, which is ours).
    const ChainGeneration* there = c.find(s.next);
    take_back = c.stop_requested || (there && !there->slurm_job_id.empty() && there->slurm_job_id != job_id);
    if (take_back) return;
    auto& g = c.at(s.next);
    g.slurm_job_id = job_id;
    g.submitted_at_ms = unix_ms(now);
    g.submitted_by = s.submitted_by;
    c.failures = 0;
    c.reason.clear();
  });
  if (!rec)
    log->warn("{}: cannot record generation {} (job {}): {}", s.log_prefix, s.next, job_id, rec.error().message);
  log->info("{}: generation {} submitted as job {}", s.log_prefix, s.next, job_id);
  if (!take_back) co_return job_id;
  log->info("{}: the launch is being stopped, or generation {} has a job already: cancelling job {}", s.log_prefix,
            s.next, job_id);
  std::vector<std::string> scancel{s.scancel, job_id};  // not a braced list: GCC 12 coroutine bug
  auto c = co_await commands.run(std::move(scancel), slurm::scrubbed_environment(), s.command_timeout);
  if (!c || c->exit_code != 0)
    log->warn("{}: scancel {} failed: {}", s.log_prefix, job_id, !c ? c.error().message : first_line(c->err));
  co_return std::string();
}
NYMPH_GCC_PR109224_END

ChainKeeper::ChainKeeper(asio::any_io_executor ex, ChainKeeperSettings settings, slurm::CommandRunner& commands,
                         Daemon& daemon, std::shared_ptr<spdlog::logger> log)
    : settings_(std::move(settings)), commands_(commands), daemon_(daemon), log_(std::move(log)), wake_(ex) {}

void ChainKeeper::finish() {
  finished_ = true;
  wake_.cancel();
}

void ChainKeeper::record_start() {
  const auto now = std::chrono::system_clock::now();
  const auto serving_end =
      now + std::chrono::duration_cast<std::chrono::system_clock::duration>(settings_.serving_end - Clock::now());
  const bool can_submit = !settings_.sbatch.empty();
  auto r = update_chain_record(settings_.launch_dir, [&](ChainRecord& c) {
    auto& g = c.at(settings_.generation);
    g.slurm_job_id = settings_.slurm_job_id;
    g.started_at_ms = unix_ms(now);
    g.serving_end_ms = unix_ms(serving_end);
    if (!can_submit && c.submitter != "manager") {
      c.submitter = "manager";
      c.reason = "generation " + std::to_string(settings_.generation) +
                 " found no sbatch on its compute node: " + "the login-node manager submits the successors";
    }
  });
  std::vector<std::chrono::seconds> waits;
  bool stop = false, managed = !can_submit;
  if (r) {
    waits = r->queue_waits();
    stop = r->stop_requested;
    managed = managed || r->submitter == "manager";
  } else {
    log_->warn("kept launch: cannot record generation {} in {}: {}", settings_.generation, kChainFile,
               r.error().message);
  }
  policy_ = std::make_unique<SuccessorPolicy>(settings_.policy, settings_.generation, Clock::now(),
                                              settings_.serving_end, waits);
  if (managed) {
    policy_->hand_over(r ? r->reason : "no sbatch on this compute node");
    log_->info("kept launch: generation {} (job {}); its successor is submitted by the login-node manager ({})",
               settings_.generation, settings_.slurm_job_id, policy_->reason());
  } else {
    log_->info("kept launch: generation {} (job {}); its successor is due {} s before the serving end",
               settings_.generation, settings_.slurm_job_id,
               std::chrono::duration_cast<std::chrono::seconds>(policy_->submission_lead()).count());
  }
  if (stop) {
    log_->info("kept launch: the launch is being stopped (nymph kill): draining");
    daemon_.on_signal(Signal::term);
  }
}

void ChainKeeper::publish() {
  daemon_.set_chain_status(std::string(to_string(policy_->phase())), policy_->reason(), successor_job_id_);
}

asio::awaitable<void> ChainKeeper::run() {
  record_start();
  publish();
  for (;;) {
    auto reason = daemon_.stop_reason();
    const bool draining_for_walltime = reason == ExitReason::walltime;
    auto before = policy_->phase();
    auto phase = policy_->advance(Clock::now(), daemon_.idle_since(), stops_the_chain(reason), draining_for_walltime);
    // After the daemon exited, a successor still due is submitted only when the walltime ended it (the last chance).
    if (phase == ChainPhase::due && (!finished_ || draining_for_walltime)) co_await submit();
    if (policy_->phase() != before) publish();
    if (finished_) break;
    auto next = policy_->next_deadline();
    wake_.expires_at(next ? std::min(*next, Clock::now() + settings_.recheck) : Clock::now() + settings_.recheck);
    co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  record_end();
}

asio::awaitable<void> ChainKeeper::submit() {
  auto before = read_chain_record(settings_.launch_dir);
  if (before && *before && (*before)->stop_requested) {
    policy_->advance(Clock::now(), std::nullopt, /*stop_requested=*/true);
    co_return;
  }
  SuccessorSubmission successor{.dir = settings_.launch_dir,
                                .script = settings_.script,
                                .next = settings_.generation + 1,
                                .submitted_by = "allocation",
                                .sbatch = settings_.sbatch,
                                .scancel = settings_.scancel,
                                .command_timeout = settings_.command_timeout};
  successor_job_id_ = co_await submit_successor(std::move(successor), *policy_, commands_, log_);
}

void ChainKeeper::record_end() {
  const auto reason = daemon_.stop_reason();
  const auto now = std::chrono::system_clock::now();
  std::string state, why;
  switch (policy_->phase()) {
    case ChainPhase::submitted:
    case ChainPhase::manager:
      break;
    case ChainPhase::paused:
      state = "paused", why = policy_->reason();
      break;
    case ChainPhase::ended:
      state = "ended", why = policy_->reason();
      break;
    default:
      state = "ended";
      why = "generation " + std::to_string(settings_.generation) + " exited (" +
            std::string(reason ? to_string(*reason) : "error") + ") before its successor was submitted" +
            (policy_->reason().empty() ? "" : ": " + policy_->reason());
  }
  auto r = update_chain_record(settings_.launch_dir, [&](ChainRecord& c) {
    auto& g = c.at(settings_.generation);
    g.ended_at_ms = unix_ms(now);
    g.exit_reason = reason ? std::string(to_string(*reason)) : "error";
    if (!state.empty() && c.state == "renewing") {
      c.state = state;
      c.reason = why;
    }
  });
  if (!r)
    log_->warn("kept launch: cannot record the end of generation {}: {}", settings_.generation, r.error().message);
  if (!state.empty()) log_->info("kept launch: the chain {}: {}", state, why);
}

}  // namespace nymph::agent
