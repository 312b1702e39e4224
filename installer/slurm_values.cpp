#include "installer/slurm_values.hpp"

#include <charconv>
#include <string>
#include <vector>

namespace nymph::installer {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

bool is_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

std::string quoted(std::string_view flag, std::string_view value) {
  std::string v;
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      v += "\\x";
      v += hex[u >> 4];
      v += hex[u & 15];
    } else {
      v += c;
    }
  }
  return std::string(flag) + " '" + v + "'";
}

// Splits "a:b:c" into its parts; each must be a non-empty run of digits (at most 9 of them).
std::optional<std::vector<long>> numbers(std::string_view s, char sep) {
  std::vector<long> out;
  std::size_t start = 0;
  while (true) {
    auto end = s.find(sep, start);
    auto part = s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    long v = 0;
    if (part.empty() || part.size() > 9) return std::nullopt;
    for (char c : part)
      if (c < '0' || c > '9') return std::nullopt;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc{} || p != part.data() + part.size()) return std::nullopt;
    out.push_back(v);
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

Result<void> check_slurm_partition(std::string_view flag, std::string_view value) {
  if (value.size() > 128) return fail(quoted(flag, value.substr(0, 32)) + "...: longer than 128 characters");
  std::size_t start = 0;
  while (true) {
    auto end = value.find(',', start);
    auto name = value.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!is_name(name))
      return fail(quoted(flag, value) +
                  ": a partition name uses only letters, digits, '_', '.', '-' (several: separated by commas)");
    if (end == std::string_view::npos) return {};
    start = end + 1;
  }
}

Result<void> check_slurm_name(std::string_view flag, std::string_view value) {
  if (value.size() > 64) return fail(quoted(flag, value.substr(0, 32)) + "...: longer than 64 characters");
  if (!is_name(value)) return fail(quoted(flag, value) + ": use only letters, digits, '_', '.', '-'");
  return {};
}

Result<std::optional<std::chrono::seconds>> parse_slurm_time(std::string_view flag, std::string_view value) {
  if (value == "INFINITE" || value == "UNLIMITED" || value == "infinite" || value == "unlimited")
    return std::optional<std::chrono::seconds>{};
  auto bad = [&] {
    return fail(quoted(flag, value) +
                ": expected a Slurm time limit: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or INFINITE");
  };
  long days = 0, h = 0, m = 0, s = 0;
  std::string_view rest = value;
  if (auto dash = value.find('-'); dash != std::string_view::npos) {
    auto d = numbers(value.substr(0, dash), ':');
    if (!d || d->size() != 1) return bad();
    days = (*d)[0];
    auto t = numbers(value.substr(dash + 1), ':');
    if (!t || t->size() > 3) return bad();
    h = (*t)[0];
    if (t->size() > 1) m = (*t)[1];
    if (t->size() > 2) s = (*t)[2];
  } else {
    auto t = numbers(rest, ':');
    if (!t || t->size() > 3) return bad();
    if (t->size() == 1) m = (*t)[0];
    if (t->size() == 2) m = (*t)[0], s = (*t)[1];
    if (t->size() == 3) h = (*t)[0], m = (*t)[1], s = (*t)[2];
  }
  long long total = ((days * 24LL + h) * 60 + m) * 60 + s;
  if (total <= 0) return fail(quoted(flag, value) + ": the time limit must be positive");
  return std::optional<std::chrono::seconds>{std::chrono::seconds{total}};
}

}  // namespace nymph::installer
