#include "agent/managed_chains.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agent/chain_keeper.hpp"
#include "agent/chain_record.hpp"
#include "agent/config.hpp"
#include "common/coroutine_warning.hpp"

namespace nymph::agent {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The steady-clock moment of a unix-ms wall-clock time.
Clock::time_point steady_at(std::int64_t unix_ms_value) {
  auto wall = std::chrono::system_clock::time_point(std::chrono::milliseconds(unix_ms_value));
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(wall - std::chrono::system_clock::now());
}

// The running generation of a chain handed to the manager whose successor is not recorded yet, or nullptr.
const ChainGeneration* awaiting_successor(const ChainRecord& r) {
  if (r.submitter != "manager" || r.state != "renewing" || r.stop_requested || r.generations.empty()) return nullptr;
  const ChainGeneration& newest = r.generations.back();
  bool serving = newest.started_at_ms && newest.serving_end_ms && !newest.ended_at_ms;
  return serving ? &newest : nullptr;
}

SuccessorConfig successor_config(const ChainSection& c) {
  return {.min_generations = c.min_generations,
          .max_generations = c.max_generations,
          .idle_end = c.idle_end,
          .floor = c.successor_floor,
          .ceiling = c.successor_ceiling,
          .backoff = c.submit_backoff,
          .pause_after = c.pause_after};
}

}  // namespace

ManagedChains::ManagedChains(asio::any_io_executor ex, ManagedChainsSettings settings, slurm::CommandRunner& commands,
                             std::shared_ptr<spdlog::logger> log)
    : settings_(std::move(settings)), commands_(commands), log_(std::move(log)), wake_(ex) {}

void ManagedChains::finish() {
  finished_ = true;
  wake_.cancel();
}

asio::awaitable<void> ManagedChains::run() {
  while (!finished_) {
    co_await scan();
    if (finished_) break;
    // The next pass: after the interval, or when a tracked successor is due (or its retry), if that is sooner.
    auto next = Clock::now() + settings_.interval;
    for (const auto& [name, t] : chains_)
      if (auto due = t.policy ? t.policy->next_deadline() : std::nullopt) next = std::min(next, *due);
    wake_.expires_at(next);
    co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<void> ManagedChains::scan() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(settings_.launches_dir, ec)) {
    const fs::path& dir = entry.path();
    auto record = read_chain_record(dir);
    if (!record || !*record) continue;
    const ChainGeneration* running = awaiting_successor(**record);
    const std::string name = dir.filename().native();
    if (!running) {
      chains_.erase(name);
      continue;
    }
    auto config = load_config(dir / "config.toml");
    if (!config || !config->chain.keep) {
      log_->warn("kept launch {}: chain handed to the manager but its config is unusable: {}", name,
                 config ? "no [chain]" : config.error().message);
      continue;
    }
    Tracked& t = chains_[name];
    if (t.generation != running->generation) {
      t.generation = running->generation;
      t.policy = std::make_unique<SuccessorPolicy>(successor_config(config->chain), running->generation,
                                                   steady_at(*running->started_at_ms),
                                                   steady_at(*running->serving_end_ms), (*record)->queue_waits());
    }
    auto phase = t.policy->advance(Clock::now(), std::nullopt, false);
    if (phase == ChainPhase::due) {
      const fs::path script = config->chain.script.is_absolute() ? config->chain.script : dir / config->chain.script;
      co_await submit(dir, script, running->generation + 1, t);
    } else if (phase == ChainPhase::ended) {  // max_generations: recorded once (the chain then no longer renews)
      auto why = t.policy->reason();
      if (auto r = update_chain_record(dir,
                                       [&](ChainRecord& c) {
                                         if (c.state == "renewing") c.state = "ended", c.reason = why;
                                       });
          !r)
        log_->warn("kept launch {}: cannot record the end of the chain: {}", name, r.error().message);
    }
  }
}
NYMPH_GCC_PR109224_END

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<void> ManagedChains::submit(const fs::path& dir, const fs::path& script, int next, Tracked& t) {
  const std::string name = dir.filename().native();
  std::vector<std::string> argv{settings_.sbatch, "--parsable", script.native(), std::to_string(next)};
  log_->info("kept launch {}: submitting generation {} for it (its compute node has no sbatch)", name, next);
  auto ran = co_await commands_.run(argv, slurm::scrubbed_environment(), settings_.command_timeout);
  auto submitted = submitted_job_id(ran);
  if (!submitted) {
    t.policy->submission_failed(Clock::now(), submitted.error().message);
    log_->warn("kept launch {}: generation {} could not be submitted: {}", name, next, submitted.error().message);
    bool paused = t.policy->phase() == ChainPhase::paused;
    if (auto r = update_chain_record(dir,
                                     [&](ChainRecord& c) {
                                       c.failures = t.policy->failures();
                                       c.reason = t.policy->reason();
                                       if (paused) c.state = "paused";
                                     });
        !r)
      log_->warn("kept launch {}: cannot record the failure: {}", name, r.error().message);
    co_return;
  }
  t.policy->submission_succeeded();
  const std::string job_id = *submitted;
  const auto now = std::chrono::system_clock::now();
  bool take_back = false;
  auto r = update_chain_record(dir, [&](ChainRecord& c) {
    take_back = c.stop_requested || c.find(next) != nullptr;  // stopped meanwhile, or someone else submitted it
    if (take_back) return;
    auto& g = c.at(next);
    g.slurm_job_id = job_id;
    g.submitted_at_ms = unix_ms(now);
    g.submitted_by = "manager";
    c.failures = 0;
  });
  if (!r) log_->warn("kept launch {}: cannot record generation {} (job {}): {}", name, next, job_id, r.error().message);
  log_->info("kept launch {}: generation {} submitted as job {}", name, next, job_id);
  if (take_back) {
    std::vector<std::string> scancel{settings_.scancel, job_id};  // not a braced list: GCC 12 coroutine bug
    auto c = co_await commands_.run(std::move(scancel), slurm::scrubbed_environment(), settings_.command_timeout);
    if (!c || c->exit_code != 0) log_->warn("kept launch {}: scancel {} failed", name, job_id);
  }
}
NYMPH_GCC_PR109224_END

}  // namespace nymph::agent
