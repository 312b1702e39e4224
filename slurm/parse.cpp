#include "slurm/parse.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <map>

#include "slurm/text.hpp"

namespace nymph::slurm {
namespace {

// Calls on_line with each non-blank line of `text`, trimmed, in order, until it returns false; holds no list.
template <class OnLine>
void each_line(std::string_view text, OnLine&& on_line) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = trim(text.substr(0, nl));
    if (!line.empty() && !on_line(line)) return;
    if (nl == std::string_view::npos) return;
    text.remove_prefix(nl + 1);
  }
}

// The non-blank lines of `text`, trimmed.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  each_line(text, [&](std::string_view line) {
    lines.push_back(line);
    return true;
  });
  return lines;
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> to_epoch(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// Up to N fields of a line, without the heap (a cycle splits ten thousand lines).
template <std::size_t N>
struct Fields {
  std::array<std::string_view, N> field{};
  std::size_t count = 0;
  std::size_t size() const { return count; }
  std::string_view operator[](std::size_t i) const { return field.at(i); }
};

// The fields of `line` split at '|', at most N, the last one taking the rest of the line (it may contain '|').
template <std::size_t N>
Fields<N> split_fields(std::string_view line) {
  Fields<N> f;
  while (f.count + 1 < N) {
    auto bar = line.find('|');
    if (bar == std::string_view::npos) break;
    f.field[f.count++] = line.substr(0, bar);
    line.remove_prefix(bar + 1);
  }
  f.field[f.count++] = line;
  return f;
}

std::string_view first_word(std::string_view s) { return s.substr(0, s.find(' ')); }

bool contains_ci(std::string_view hay, std::string_view needle) {
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != hay.end();
}

}  // namespace

bool is_job_id(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

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

std::string parse_sbatch_cluster(std::string_view out) {
  auto lines = lines_of(out);
  if (lines.empty()) return {};
  auto semi = lines.back().find(';');
  return semi == std::string_view::npos ? std::string() : std::string(trim(lines.back().substr(semi + 1)));
}

Result<std::vector<SqueueRow>> parse_squeue(std::string_view out) {
  std::vector<SqueueRow> rows;
  for (auto line : lines_of(out)) {
    auto f = split(line, '|');
    if (f.size() != 3 || !is_job_id(f[0]) || f[1].empty())
      return fail("cannot read squeue line " + printable(line) + " (expected id|state|reason)");
    rows.push_back({std::string(f[0]), std::string(f[1]), std::string(f[2])});
  }
  return rows;
}

namespace {

// `line` as a row in kSqueueJobFormat, or nullopt when it is not one.
std::optional<SqueueJob> squeue_job_of(std::string_view line) {
  auto f = split_fields<8>(line);
  if (f.size() != 8 || !is_job_id(trim(f[0])) || trim(f[1]).empty()) return std::nullopt;
  return SqueueJob{.job_id = trim(f[0]),
                   .state = trim(f[1]),
                   .reason = trim(f[2]),
                   .wait_status = to_int(trim(f[3])),
                   .submit_time = to_epoch(trim(f[4])),
                   .start_time = to_epoch(trim(f[5])),
                   .cluster = trim(f[6]),
                   .name = f[7]};
}

// How many rows `out` holds, or the Error quoting its first line that is not one.
Result<std::size_t> count_squeue_jobs(std::string_view out) {
  std::size_t rows = 0;
  std::optional<std::string_view> bad;
  each_line(out, [&](std::string_view line) {
    if (!squeue_job_of(line)) {
      bad = line;
      return false;
    }
    ++rows;
    return true;
  });
  if (bad)
    return fail("cannot read squeue line " + printable(*bad) +
                " (expected id|state|reason|exit_code|submit|start|cluster|name)");
  return rows;
}

}  // namespace

Result<std::size_t> for_each_squeue_job(std::string_view out, const std::function<void(const SqueueJob&)>& on_row) {
  auto rows = count_squeue_jobs(out);
  if (!rows) return rows.error();
  each_line(out, [&](std::string_view line) {
    on_row(*squeue_job_of(line));
    return true;
  });
  return *rows;
}

Result<std::vector<SqueueJob>> parse_squeue_jobs(std::string_view out) {
  auto count = count_squeue_jobs(out);
  if (!count) return count.error();
  std::vector<SqueueJob> rows;
  rows.reserve(*count);  // at its size: a doubling vector of ten thousand rows would hold two at once
  each_line(out, [&](std::string_view line) {
    rows.push_back(*squeue_job_of(line));
    return true;
  });
  return rows;
}

std::pair<int, int> decode_wait_status(int status) {
  if ((status & 0x7f) != 0) return {0, status & 0x7f};
  return {(status >> 8) & 0xff, 0};
}

Result<std::vector<SacctJob>> parse_sacct_jobs(std::string_view out) {
  std::vector<SacctJob> rows;
  for (auto line : lines_of(out)) {
    auto f = split_fields<6>(line);
    if (f.size() != 6 || !is_job_id(f[0]) || f[1].empty())
      return fail("cannot read sacct line " + printable(line) + " (expected JobID|State|ExitCode|Submit|Cluster|JobName)");
    if (f[0].find('.') != std::string_view::npos) continue;
    auto codes = split(f[2], ':');
    auto code = to_int(codes[0]);
    auto sig = codes.size() == 2 ? to_int(codes[1]) : std::optional<int>();
    if (codes.size() != 2 || !code || !sig) return fail("cannot read sacct exit code in " + printable(line));
    rows.push_back({std::string(f[0]), std::string(first_word(f[1])), std::string(f[1]), *code, *sig,
                    to_epoch(f[3]), std::string(f[4]), std::string(f[5])});
  }
  return rows;
}

bool squeue_says_invalid_job(std::string_view err) { return contains_ci(err, "Invalid job id specified"); }

Result<std::vector<SacctRow>> parse_sacct(std::string_view out) {
  std::vector<SacctRow> rows;
  std::map<std::string, std::size_t, std::less<>> index;
  for (auto line : lines_of(out)) {
    auto f = split(line, '|');
    if (f.size() != 3 || !is_job_id(f[0]) || f[1].empty())
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

namespace {
// The value of `KEY = VALUE` in `scontrol show config` output, or nullopt.
std::optional<std::string_view> config_value(std::string_view out, std::string_view key) {
  for (auto line : lines_of(out)) {
    auto eq = line.find('=');
    if (eq == std::string_view::npos || trim(line.substr(0, eq)) != key) continue;
    return trim(line.substr(eq + 1));
  }
  return std::nullopt;
}
}  // namespace

std::string parse_cluster_name(std::string_view out) { return std::string(config_value(out, "ClusterName").value_or("")); }

std::optional<std::size_t> parse_max_array_size(std::string_view out) {
  auto v = config_value(out, "MaxArraySize");
  if (!v || !is_digits(*v, 9)) return std::nullopt;
  return static_cast<std::size_t>(std::stoul(std::string(*v)));
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
