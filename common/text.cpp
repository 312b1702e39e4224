#include "common/text.hpp"

#include <cstring>

namespace nymph {

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string errno_message(int err) {
  char buf[256];
  // GNU strerror_r returns the message (in buf or a static string).
  return ::strerror_r(err, buf, sizeof buf);
}

std::string one_line(std::string_view s, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u >= 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += s[i];
    }
  }
  if (s.size() > max_bytes) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace nymph
