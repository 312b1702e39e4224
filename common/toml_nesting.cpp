#include "common/toml_nesting.hpp"

#include <algorithm>

namespace nymph {

namespace {

// The index just past the string that starts at text[i] (a quote): basic ("..."), literal ('...') or their
// multi-line forms. An unterminated string runs to the end (toml++ reports it). `line` counts its newlines.
std::size_t skip_toml_string(std::string_view text, std::size_t i, int& line) {
  const char quote = text[i];
  const bool multi = text.substr(i, 3) == std::string(3, quote);
  std::size_t at = i + (multi ? 3 : 1);
  while (at < text.size()) {
    char c = text[at];
    if (c == '\\' && quote == '"') {
      at += 2;
      continue;
    }
    if (c == '\n') {
      if (!multi) return at;  // a single-line string cannot continue (toml++ reports it)
      ++line;
    }
    if (c == quote && (!multi || text.substr(at, 3) == std::string(3, quote))) return at + (multi ? 3 : 1);
    ++at;
  }
  return text.size();
}

}  // namespace

Result<void> check_toml_nesting(std::string_view text, const std::string& source) {
  int depth = 0, dots = 0, line = 1;
  auto too_deep = [&](const char* what) {
    return fail(source + ":" + std::to_string(line) + ": invalid TOML: " + what + " nested deeper than " +
                std::to_string(kMaxTomlNesting) + " levels");
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      dots = 0;
    } else if (c == '#') {
      i = std::min(text.find('\n', i), text.size()) - 1;
    } else if (c == '"' || c == '\'') {
      i = skip_toml_string(text, i, line) - 1;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxTomlNesting) return too_deep("arrays and tables");
    } else if (c == ']' || c == '}') {
      depth = std::max(depth - 1, 0);
    } else if (c == '.' && ++dots > kMaxTomlNesting) {
      return too_deep("dotted keys");
    }
  }
  return {};
}

}  // namespace nymph
