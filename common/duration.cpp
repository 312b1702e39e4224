#include "common/duration.hpp"

#include <charconv>
#include <cmath>

namespace nymph {

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&] {
    return fail(std::string("invalid duration '") + std::string(text) +
           "' (expected a number with an optional unit ms, s, m, h or d, e.g. 30s)");
  };
  std::size_t unit_at = 0;
  while (unit_at < text.size() && (std::isdigit(static_cast<unsigned char>(text[unit_at])) || text[unit_at] == '.'))
    ++unit_at;
  if (unit_at == 0) return bad();
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + unit_at, value);
  if (ec != std::errc{} || end != text.data() + unit_at || !std::isfinite(value) || value < 0) return bad();
  std::string_view unit = text.substr(unit_at);
  double factor_ms = 0;
  if (unit.empty() || unit == "s") factor_ms = 1000;
  else if (unit == "ms") factor_ms = 1;
  else if (unit == "m") factor_ms = 60'000;
  else if (unit == "h") factor_ms = 3'600'000;
  else if (unit == "d") factor_ms = 86'400'000;
  else return bad();
  double ms = value * factor_ms;
  if (ms > static_cast<double>(kMaxDuration.count()))
    return fail("invalid duration '" + std::string(text) + "' (at most " + format_duration(kMaxDuration) + ")");
  return std::chrono::milliseconds(static_cast<long long>(std::llround(ms)));
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 86'400'000 == 0 && ms != 0) return std::to_string(ms / 86'400'000) + "d";
  if (ms % 3'600'000 == 0 && ms != 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms != 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace nymph
