#pragma once
// Slurm's time formats: time limits (sbatch --time, #SBATCH --time) and the time left squeue prints (%L).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace nymph::slurm {

// A duration in Slurm's notation: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S. The first component is unbounded
// (at most 8 digits; a leading hour count at most 6; a day count at most 6), hours after a day count are
// below 24, minutes and seconds after the first component below 60. Returns the length (zero included), or
// nullopt for anything else (no sign, no spaces, no units, no "UNLIMITED"). Never throws.
std::optional<std::chrono::seconds> parse_duration(std::string_view s);

// The longest time limit Slurm reads as written: it computes a --time value's length in seconds in a 32-bit int
// and adds 59 to round up to minutes (time_str2mins), so anything longer overflows into another limit or an error.
// The whole minutes below (2^31 - 1 - 59) seconds: 35 791 393 minutes, about 68 years.
inline constexpr std::chrono::seconds kMaxTimeLimit = std::chrono::minutes(35'791'393);

// A time limit Slurm accepts as a finite limit: parse_duration succeeds and the length is positive (0 means
// "no limit" to Slurm) and at most kMaxTimeLimit.
bool is_time_limit(std::string_view text);

// The time left squeue's %L prints for a job that has a limit ("59:40", "1:00:00", "2-03:04:05", "1-12": always
// with ':' or '-'). nullopt for UNLIMITED, NOT_SET, INVALID or anything else.
std::optional<std::chrono::seconds> parse_time_left(std::string_view text);

// `t` as a time Slurm's commands accept for -S/-E: "YYYY-MM-DDTHH:MM:SS" in this process's local time zone
// (the zone the command, started with this environment, reads it in). Seconds are truncated.
std::string format_slurm_time(std::chrono::system_clock::time_point t);

// `d` as a --time value: whole minutes, rounded up, at least 1 and at most kMaxTimeLimit's (a longer `d` gives
// that), so the value is always is_time_limit.
std::string minutes_for(std::chrono::seconds d);

}  // namespace nymph::slurm
