#include "common/time.hpp"

#include <time.h>

#include <cctype>
#include <charconv>
#include <cstdio>

namespace nymph {

std::string format_time(std::chrono::system_clock::time_point t) {
  auto ms_total = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  auto secs = static_cast<time_t>(ms_total / 1000);
  auto ms = static_cast<int>(ms_total % 1000);
  if (ms < 0) {
    ms += 1000;
    --secs;
  }
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

Result<std::chrono::system_clock::time_point> parse_time(std::string_view text) {
  auto bad = [&] { return fail("invalid time '" + std::string(text) + "' (expected RFC 3339 UTC, e.g. 2026-01-02T03:04:05.678Z)"); };
  auto num = [&](std::size_t pos, std::size_t len, int& out) {
    if (pos + len > text.size()) return false;
    auto [p, ec] = std::from_chars(text.data() + pos, text.data() + pos + len, out);
    return ec == std::errc{} && p == text.data() + pos + len;
  };
  struct tm tm {};
  int year = 0, mon = 0;
  if (text.size() < 20 || !num(0, 4, year) || text[4] != '-' || !num(5, 2, mon) || text[7] != '-' ||
      !num(8, 2, tm.tm_mday) || (text[10] != 'T' && text[10] != 't') || !num(11, 2, tm.tm_hour) || text[13] != ':' ||
      !num(14, 2, tm.tm_min) || text[16] != ':' || !num(17, 2, tm.tm_sec))
    return bad();
  std::size_t pos = 19;
  int ms = 0;
  if (text[pos] == '.') {
    std::size_t start = ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == start) return bad();
    std::string digits(text.substr(start, std::min<std::size_t>(pos - start, 3)));
    digits.resize(3, '0');
    ms = std::stoi(digits);
  }
  std::string_view zone = text.substr(pos);
  if (zone != "Z" && zone != "z" && zone != "+00:00") return bad();
  if (mon < 1 || mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60)
    return bad();
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  time_t secs = timegm(&tm);  // years have 4 digits: secs * 1000 cannot overflow
  auto t = time_from_ms(static_cast<std::int64_t>(secs) * 1000 + ms);
  if (!t) return bad();
  return *t;
}

std::optional<std::chrono::system_clock::time_point> time_from_ms(std::int64_t ms) {
  using std::chrono::milliseconds;
  constexpr auto kMaxMs = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::duration::max()).count();
  if (ms < -kMaxMs || ms > kMaxMs) return std::nullopt;
  return std::chrono::system_clock::time_point(milliseconds(ms));
}

}  // namespace nymph
