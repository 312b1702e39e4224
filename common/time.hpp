#pragma once
// Wall-clock times as text: RFC 3339 UTC with milliseconds, the one format nymph writes (wire, database,
// status files) and reads.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph {

// The time `ms` milliseconds after the Unix epoch, or nullopt when system_clock cannot hold it (it counts
// nanoseconds in 64 bits: 1677-09-22 to 2262-04-11). For times read from files and peers. Never throws.
std::optional<std::chrono::system_clock::time_point> time_from_ms(std::int64_t ms);

// "2026-11-29T20:43:55.123Z".
std::string format_time(std::chrono::system_clock::time_point t);

// Parses what format_time produces (and whole seconds, and "+00:00"). Returns an Error naming the text on
// anything else, and on a time system_clock cannot hold (nanoseconds: before 1677-09-22 or after 2262-04-11).
Result<std::chrono::system_clock::time_point> parse_time(std::string_view text);

}  // namespace nymph
