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

std::string printable_excerpt(std::string_view s, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::string_view shown = s.substr(0, max_bytes);
  out.reserve(shown.size() + 16);
  for (char ch : shown) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  if (shown.size() < s.size()) out += "…(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace nymph
