#include "installer/slurm_values.hpp"

#include <string>
#include <vector>

#include "runners/slurm/options.hpp"

namespace nymph::installer {
namespace {

// Splits on `sep`; each part must be 1-9 decimal digits.
bool numbers(std::string_view s, char sep, std::vector<long long>& out) {
  while (true) {
    auto end = s.find(sep);
    auto part = s.substr(0, end);
    if (part.empty() || part.size() > 9) return false;
    long long v = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    out.push_back(v);
    if (end == std::string_view::npos) return true;
    s.remove_prefix(end + 1);
  }
}

}  // namespace

Result<void> check_slurm_value(std::string_view flag, std::string_view key, std::string_view value) {
  auto checked = runners::slurm::check_option(key, value);
  if (checked) return {};
  // The runner names the job field ("runConfig.slurm.<key>: ..."); name the command-line flag instead.
  std::string message = checked.error().message;
  std::string prefix = "runConfig.slurm." + std::string(key);
  if (message.starts_with(prefix)) message.erase(0, prefix.size());
  else message = ": " + message;
  return fail(std::string(flag) + message);
}

Result<std::chrono::seconds> parse_slurm_time(std::string_view flag, std::string_view value) {
  if (auto r = check_slurm_value(flag, "time", value); !r) return r.error();
  long long days = 0;
  std::string_view clock = value;
  if (auto dash = value.find('-'); dash != std::string_view::npos) {
    std::vector<long long> d;
    if (!numbers(value.substr(0, dash), ':', d) || d.size() != 1) return fail(std::string(flag) + ": bad day count");
    days = d[0];
    clock = value.substr(dash + 1);
  }
  std::vector<long long> t;
  if (!numbers(clock, ':', t) || t.size() > 3) return fail(std::string(flag) + ": bad time");
  long long h = 0, m = 0, s = 0;
  if (days > 0 || value.find('-') != std::string_view::npos) {
    h = t[0];  // D-H, D-H:M, D-H:M:S
    if (t.size() > 1) m = t[1];
    if (t.size() > 2) s = t[2];
  } else if (t.size() == 1) {
    m = t[0];  // M
  } else if (t.size() == 2) {
    m = t[0], s = t[1];  // M:S
  } else {
    h = t[0], m = t[1], s = t[2];  // H:M:S
  }
  return std::chrono::seconds{((days * 24 + h) * 60 + m) * 60 + s};
}

}  // namespace nymph::installer
