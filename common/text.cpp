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

}  // namespace nymph
