#pragma once
// Text helpers shared by slurm/'s parsers and grammars.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.hpp"

namespace nymph::slurm {

// The part of `s` without leading/trailing whitespace (space, tab, CR, LF): the ground floor's trim.
using nymph::trim;

// The parts of `s` between the separators: "a,,b" gives {"a", "", "b"}, "" gives {""}.
std::vector<std::string_view> split(std::string_view s, char sep);

// True when `s` is 1 to `max_digits` decimal digits.
bool is_digits(std::string_view s, std::size_t max_digits);

// `text` with control characters, backslashes, quotes and non-ASCII bytes escaped (\n, \xNN), quoted in
// double quotes: safe to put into a message or a log line.
std::string printable(std::string_view text);

}  // namespace nymph::slurm
