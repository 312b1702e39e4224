// A guard every TOML reader in nymph runs before toml++: toml++ parses and frees tables recursively, so the depth
// of a text bounds the stack and memory it can make a parser use.
#pragma once

#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph {

// The most a TOML text nymph reads may nest: brackets and braces open at once, and dots in the keys of one line
// ("[a.b.c]", "a.b.c = 1"; a float's point counts too). Enough for every config nymph reads.
inline constexpr int kMaxTomlNesting = 32;

// Refuses TOML `text` (named `source` in messages) that nests deeper than kMaxTomlNesting, with an Error naming the
// line; strings and comments do not count. Call it before toml::parse: toml++ parses and frees tables recursively,
// and nymph walks them recursively, so this bounds the stack and memory any text can make them use. Never throws.
Result<void> check_toml_nesting(std::string_view text, const std::string& source);

}  // namespace nymph
