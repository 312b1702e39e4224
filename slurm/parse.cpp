#include "slurm/parse.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "slurm/text.hpp"

namespace nymph::slurm {
namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = trim(text.substr(0, nl));
    if (!line.empty()) lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string_view first_word(std::string_view s) { return s.substr(0, s.find(' ')); }

bool contains_ci(std::string_view hay, std::string_view needle) {
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != hay.end();
}

}  // namespace

Result<std::string> parse_sbatch_output(std::string_view out) {
  auto lines = lines_of(out);
  if (lines.empty()) return fail("sbatch printed no job id");
  std::string_view line = lines.back();
  constexpr std::string_view prefix = "Submitted batch job ";
  if (line.starts_with(prefix)) {
    auto id = first_word(line.substr(prefix.size()));
    if (is_digits(id, std::string_view::npos)) return std::string(id);
  } else if (auto id = line.substr(0, line.find(';')); is_digits(id, std::string_view::npos)) {
    return std::string(id);
  }
  return fail("cannot read a job id from sbatch's output " + printable(out));
}

Result<std::vector<SqueueRow>> parse_squeue(std::string_view out) {
  std::vector<SqueueRow> rows;
  for (auto line : lines_of(out)) {
    auto f = split(line, '|');
    if (f.size() != 3 || f[0].empty() || f[1].empty())
      return fail("cannot read squeue line " + printable(line) + " (expected id|state|reason)");
    rows.push_back({std::string(f[0]), std::string(f[1]), std::string(f[2])});
  }
  return rows;
}

bool squeue_says_invalid_job(std::string_view err) { return contains_ci(err, "Invalid job id specified"); }

Result<std::vector<SacctRow>> parse_sacct(std::string_view out) {
  std::vector<SacctRow> rows;
  std::map<std::string, std::size_t, std::less<>> index;
  for (auto line : lines_of(out)) {
    auto f = split(line, '|');
    if (f.size() != 3 || f[0].empty() || f[1].empty())
      return fail("cannot read sacct line " + printable(line) + " (expected JobID|State|ExitCode)");
    if (f[0].find('.') != std::string_view::npos) continue;
    auto codes = split(f[2], ':');
    auto code = to_int(codes[0]);
    auto sig = codes.size() == 2 ? to_int(codes[1]) : std::optional<int>();
    if (codes.size() != 2 || !code || !sig) return fail("cannot read sacct exit code in " + printable(line));
    SacctRow row{std::string(f[0]), std::string(first_word(f[1])), std::string(f[1]), *code, *sig};
    if (auto it = index.find(row.job_id); it != index.end()) rows[it->second] = std::move(row);
    else {
      index.emplace(row.job_id, rows.size());
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

bool sacct_says_accounting_disabled(std::string_view err) {
  return contains_ci(err, "accounting storage is disabled");
}

std::string parse_default_account(std::string_view out) {
  auto lines = lines_of(out);
  return lines.empty() ? std::string() : std::string(lines.front());
}

SlurmPhase phase_of(std::string_view state) {
  static const std::map<std::string_view, SlurmPhase> table{
      {"PENDING", SlurmPhase::pending},      {"CONFIGURING", SlurmPhase::pending},
      {"REQUEUED", SlurmPhase::pending},     {"REQUEUE_HOLD", SlurmPhase::pending},
      {"REQUEUE_FED", SlurmPhase::pending},  {"RESV_DEL_HOLD", SlurmPhase::pending},
      {"RUNNING", SlurmPhase::running},      {"COMPLETING", SlurmPhase::running},
      {"SUSPENDED", SlurmPhase::running},    {"STOPPED", SlurmPhase::running},
      {"SIGNALING", SlurmPhase::running},    {"STAGE_OUT", SlurmPhase::running},
      {"RESIZING", SlurmPhase::running},     {"COMPLETED", SlurmPhase::finished},
      {"FAILED", SlurmPhase::finished},      {"CANCELLED", SlurmPhase::finished},
      {"TIMEOUT", SlurmPhase::finished},     {"OUT_OF_MEMORY", SlurmPhase::finished},
      {"NODE_FAIL", SlurmPhase::finished},   {"PREEMPTED", SlurmPhase::finished},
      {"BOOT_FAIL", SlurmPhase::finished},   {"DEADLINE", SlurmPhase::finished},
      {"REVOKED", SlurmPhase::finished},     {"SPECIAL_EXIT", SlurmPhase::finished},
  };
  auto it = table.find(first_word(state));
  return it == table.end() ? SlurmPhase::unknown : it->second;
}

}  // namespace nymph::slurm
