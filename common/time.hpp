#pragma once
// Wall-clock times as text: RFC 3339 UTC with milliseconds, the one format nymph writes (wire, database,
// status files) and reads.
#include <chrono>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph {

// "2026-11-29T20:43:55.123Z".
std::string format_time(std::chrono::system_clock::time_point t);

// Parses what format_time produces (and whole seconds, and "+00:00"). Returns an Error naming the text on
// anything else, and on a time system_clock cannot hold (nanoseconds: before 1677-09-22 or after 2262-04-11).
Result<std::chrono::system_clock::time_point> parse_time(std::string_view text);

}  // namespace nymph
