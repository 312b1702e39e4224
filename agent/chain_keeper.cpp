#include "agent/chain_keeper.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agent/chain_record.hpp"
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

}  // namespace

Result<std::string> submitted_job_id(const Result<slurm::CommandResult>& sbatch) {
  if (!sbatch) return sbatch.error();
  if (sbatch->exit_code != 0)
    return fail("sbatch exited " + std::to_string(sbatch->exit_code) + ": " +
                first_line(sbatch->err.empty() ? sbatch->out : sbatch->err));
  auto id = slurm::parse_sbatch_output(sbatch->out);
  if (!id) return fail("sbatch: " + first_line(id.error().message));
  return id;
}

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
  const int next = settings_.generation + 1;
  auto before = read_chain_record(settings_.launch_dir);
  if (before && *before && (*before)->stop_requested) {
    policy_->advance(Clock::now(), std::nullopt, /*stop_requested=*/true);
    co_return;
  }
  std::vector<std::string> argv{settings_.sbatch, "--parsable", settings_.script.native(), std::to_string(next)};
  log_->info("kept launch: submitting generation {}", next);
  auto ran = co_await commands_.run(argv, slurm::scrubbed_environment(), settings_.command_timeout);
  auto submitted = submitted_job_id(ran);
  if (!submitted) {
    const std::string& error = submitted.error().message;
    policy_->submission_failed(Clock::now(), error);
    log_->warn("kept launch: generation {} could not be submitted: {}", next, error);
    auto rec = update_chain_record(settings_.launch_dir, [&](ChainRecord& c) {
      c.failures = policy_->failures();
      c.reason = policy_->reason();
      if (policy_->phase() == ChainPhase::paused) c.state = "paused";
    });
    if (!rec) log_->warn("kept launch: cannot record the failure: {}", rec.error().message);
    if (policy_->phase() == ChainPhase::paused) log_->error("kept launch: chain paused: {}", policy_->reason());
    co_return;
  }
  policy_->submission_succeeded();
  const std::string job_id = *submitted;
  successor_job_id_ = job_id;
  const auto now = std::chrono::system_clock::now();
  bool stop = false;
  auto rec = update_chain_record(settings_.launch_dir, [&](ChainRecord& c) {
    auto& g = c.at(next);
    g.slurm_job_id = job_id;
    g.submitted_at_ms = unix_ms(now);
    g.submitted_by = "allocation";
    c.failures = 0;
    c.reason.clear();
    stop = c.stop_requested;
  });
  if (!rec) log_->warn("kept launch: cannot record generation {} (job {}): {}", next, job_id, rec.error().message);
  log_->info("kept launch: generation {} submitted as job {}", next, job_id);
  if (stop) {  // nymph kill ran while sbatch did: take the successor back
    log_->info("kept launch: the launch is being stopped: cancelling job {}", job_id);
    std::vector<std::string> scancel{settings_.scancel, job_id};  // not a braced list: GCC 12 coroutine bug
    auto c = co_await commands_.run(std::move(scancel), slurm::scrubbed_environment(), settings_.command_timeout);
    if (!c || c->exit_code != 0)
      log_->warn("kept launch: scancel {} failed: {}", job_id, !c ? c.error().message : first_line(c->err));
  }
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
