#pragma once
// Small text helpers every component uses: trimming, errno messages, and showing untrusted text on one line.
#include <string>
#include <string_view>

namespace nymph {

// `s` without leading and trailing spaces, tabs, CRs and LFs.
std::string_view trim(std::string_view s);

// The C library's message for an errno value ("No such file or directory"); thread-safe.
std::string errno_message(int err);

// `s` made safe for one line of a log or an error message: control characters and bytes >= 0x7f become
// \xNN, and at most `max_bytes` of the input are shown (then "..." and the full length).
std::string one_line(std::string_view s, std::size_t max_bytes = 256);

}  // namespace nymph
