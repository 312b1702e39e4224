#pragma once
// Human durations used in config files and command lines ("250ms", "30s", "5m", "2h", "1d", or plain seconds).
#include <chrono>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph {

// The longest duration nymph reads: 100 years, so that any clock's time point plus it (nanoseconds in 64 bits)
// cannot overflow.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24 * 36'500);

// Parses `text` into milliseconds. Accepts an unsigned integer or decimal followed by ms, s, m, h or d
// (no unit means seconds), at most kMaxDuration. Returns an Error naming the bad text on failure; never throws.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// Formats a duration the way parse_duration reads it back ("1500ms", "30s", "5m", "30d").
std::string format_duration(std::chrono::milliseconds d);

}  // namespace nymph
