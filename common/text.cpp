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

namespace {

// Length of the valid UTF-8 sequence at the start of `s` (2-4 bytes; 1 for ASCII), or 0 when it is not one.
std::size_t utf8_sequence(std::string_view s) {
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b = at(0);
  if (b < 0x80) return 1;
  std::size_t n = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
  if (n == 0 || s.size() < n) return 0;
  // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
  unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
  unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
  if (at(1) < lo || at(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (at(i) < 0x80 || at(i) > 0xBF) return 0;
  return n;
}

void append_hex_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

}  // namespace

std::string printable_excerpt(std::string_view s, std::size_t max_bytes) {
  std::string out;
  std::string_view shown = s.substr(0, max_bytes);
  out.reserve(shown.size() + 16);
  while (!shown.empty()) {
    auto c = static_cast<unsigned char>(shown.front());
    std::size_t n = utf8_sequence(shown);
    bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(shown[1]) < 0xA0;  // U+0080..U+009F
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f || n == 0) append_hex_escape(out, c);
    else if (c1) {
      append_hex_escape(out, c);
      append_hex_escape(out, static_cast<unsigned char>(shown[1]));
    } else {
      out.append(shown.substr(0, n));
    }
    shown.remove_prefix(n == 0 ? 1 : n);
  }
  if (max_bytes < s.size()) out += "…(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace nymph
