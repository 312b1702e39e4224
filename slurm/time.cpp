#include "slurm/time.hpp"

#include <ctime>

#include <algorithm>
#include <vector>

#include "slurm/text.hpp"

namespace nymph::slurm {

std::string format_slurm_time(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[32];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf, n);
}
namespace {

long long to_number(std::string_view digits) {
  long long n = 0;
  for (char c : digits) n = n * 10 + (c - '0');
  return n;
}

// H, M and S of the clock part of a duration, by Slurm's reading of 1, 2 or 3 components.
std::chrono::seconds clock_part(const std::vector<long long>& v, bool after_days) {
  long long h = 0, m = 0, s = 0;
  if (after_days) {
    h = v[0];  // D-H, D-H:M, D-H:M:S
    if (v.size() > 1) m = v[1];
    if (v.size() > 2) s = v[2];
  } else if (v.size() == 1) {
    m = v[0];  // M
  } else if (v.size() == 2) {
    m = v[0], s = v[1];  // M:S
  } else {
    h = v[0], m = v[1], s = v[2];  // H:M:S
  }
  return std::chrono::seconds((h * 60 + m) * 60 + s);
}

}  // namespace

std::optional<std::chrono::seconds> parse_duration(std::string_view s) {
  std::optional<long long> days;
  if (auto dash = s.find('-'); dash != std::string_view::npos) {
    if (!is_digits(s.substr(0, dash), 6)) return std::nullopt;
    days = to_number(s.substr(0, dash));
    s.remove_prefix(dash + 1);
  }
  auto parts = split(s, ':');
  if (parts.size() > 3) return std::nullopt;
  if (!days && parts.size() == 3 && parts[0].size() > 6) return std::nullopt;
  std::vector<long long> values;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!is_digits(parts[i], 8)) return std::nullopt;
    long long n = to_number(parts[i]);
    bool leading = i == 0 && !days;
    bool hours = i == 0 && days;
    if (!leading && n >= (hours ? 24 : 60)) return std::nullopt;
    values.push_back(n);
  }
  return std::chrono::hours(24 * days.value_or(0)) + clock_part(values, days.has_value());
}

bool is_time_limit(std::string_view text) {
  auto d = parse_duration(text);
  return d && d->count() > 0 && *d <= kMaxTimeLimit;
}

std::optional<std::chrono::seconds> parse_time_left(std::string_view text) {
  if (text.find_first_of(":-") == std::string_view::npos) return std::nullopt;
  return parse_duration(text);
}

std::string minutes_for(std::chrono::seconds d) {
  auto minutes = (std::clamp<std::chrono::seconds::rep>(d.count(), 1, kMaxTimeLimit.count()) + 59) / 60;
  return std::to_string(minutes);
}

}  // namespace nymph::slurm
