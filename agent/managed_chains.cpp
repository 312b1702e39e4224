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
    asio::awaitable<void>
    ManagedChains::scan() {
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
    Tracked& t = chains_[name];
    if (t.generation != running->generation) {  // a new generation serves: its launch's rules, read once
      auto config = load_config(dir / "config.toml");
      if (!config || !config->chain.keep) {
        log_->warn("kept launch {}: chain handed to the manager but its config is unusable: {}", name,
                   config ? "no [chain]" : config.error().message);
        chains_.erase(name);
        continue;
      }
      t.generation = running->generation;
      t.script = config->chain.script.is_absolute() ? config->chain.script : dir / config->chain.script;
      t.policy = std::make_unique<SuccessorPolicy>(successor_config(config->chain), running->generation,
                                                   steady_at(*running->started_at_ms),
                                                   steady_at(*running->serving_end_ms), (*record)->queue_waits());
    }
    auto phase = t.policy->advance(Clock::now(), std::nullopt, false);
    if (phase == ChainPhase::due) {
      SuccessorSubmission successor{.dir = dir,
                                    .script = t.script,
                                    .next = running->generation + 1,
                                    .submitted_by = "manager",
                                    .sbatch = settings_.sbatch,
                                    .scancel = settings_.scancel,
                                    .command_timeout = settings_.command_timeout,
                                    .log_prefix = "kept launch " + name};
      co_await submit_successor(std::move(successor), *t.policy, commands_, log_);
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

}  // namespace nymph::agent
