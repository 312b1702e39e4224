// Fuzz target: what nymph reads from Slurm's commands (slurm/parse.hpp, slurm/listing.hpp, slurm/allocation.hpp)
// and the Slurm and systemd configuration the probe and doctor read (agent/probe.hpp, agent/doctor.hpp,
// agent/manager_lease.hpp). The first byte picks the parser, the rest is the output. Properties: nothing throws or
// crashes; every row a parser accepts has a job id that is non-empty and holds no whitespace or control
// character (the id is passed to scancel/squeue as an argument and compared as a key), and a state when the
// format has one; sacct rows are never steps; times left are not negative; listings render.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/doctor.hpp"
#include "agent/manager_lease.hpp"
#include "agent/probe.hpp"
#include "fuzz/check.hpp"
#include "slurm/allocation.hpp"
#include "slurm/listing.hpp"
#include "slurm/parse.hpp"

namespace {

using namespace nymph;

bool is_job_id(std::string_view id) {
  if (id.empty()) return false;
  for (unsigned char c : id)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

void check_sbatch(std::string_view out) {
  if (auto id = slurm::parse_sbatch_output(out)) NYMPH_FUZZ_CHECK(is_job_id(*id));
  (void)slurm::parse_sbatch_cluster(out);
}

void check_squeue(std::string_view out) {
  if (auto rows = slurm::parse_squeue(out))
    for (const auto& r : *rows) NYMPH_FUZZ_CHECK(is_job_id(r.job_id));
  if (auto jobs = slurm::parse_squeue_jobs(out))
    for (const auto& j : *jobs) NYMPH_FUZZ_CHECK(is_job_id(j.job_id) && !j.state.empty());
  (void)slurm::squeue_says_invalid_job(out);
}

void check_sacct(std::string_view out) {
  if (auto rows = slurm::parse_sacct(out))
    for (const auto& r : *rows) NYMPH_FUZZ_CHECK(is_job_id(r.job_id) && r.job_id.find('.') == std::string::npos);
  if (auto jobs = slurm::parse_sacct_jobs(out))
    for (const auto& j : *jobs) {
      NYMPH_FUZZ_CHECK(is_job_id(j.job_id) && j.job_id.find('.') == std::string::npos);
      (void)slurm::phase_of(j.state);
    }
  (void)slurm::sacct_says_accounting_disabled(out);
}

void check_listing(std::string_view out, bool json) {
  auto rows = json ? slurm::parse_squeue_json_jobs(out, "u") : slurm::parse_squeue_list(out);
  if (!rows) return;
  for (const auto& r : *rows) NYMPH_FUZZ_CHECK(is_job_id(r.id));
  (void)slurm::listing_to_json(*rows);
  (void)slurm::listing_to_table(*rows);
}

void check_allocation(std::string_view out) {
  auto a = slurm::parse_allocation("42", out);
  if (a && a->time_left) NYMPH_FUZZ_CHECK(a->time_left->count() >= 0);
}

void check_config_texts(std::string_view text) {
  if (auto w = agent::parse_kill_wait(text)) NYMPH_FUZZ_CHECK(w->count() >= 0);
  (void)agent::doctor::parse_kill_user_processes(text);
  (void)agent::parse_cluster_name(text);
  (void)slurm::parse_cluster_name(text);
  (void)slurm::parse_default_account(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto out = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 7) {
    case 0: check_sbatch(out); break;
    case 1: check_squeue(out); break;
    case 2: check_sacct(out); break;
    case 3: check_listing(out, true); break;
    case 4: check_listing(out, false); break;
    case 5: check_allocation(out); break;
    default: check_config_texts(out); break;
  }
  return 0;
}
