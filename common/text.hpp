#pragma once
// Small text helpers every component uses: trimming, errno messages, text from others made safe to log.
#include <string>
#include <string_view>

namespace nymph {

// `s` without leading and trailing spaces, tabs, CRs and LFs.
std::string_view trim(std::string_view s);

// The C library's message for an errno value ("No such file or directory"); thread-safe.
std::string errno_message(int err);

// `s` made safe for one log line: control characters (C0, DEL and the UTF-8 encoded C1 range) and backslashes
// escaped (\n, \t, \\, \xHH), bytes that are not valid UTF-8 as \xHH, at most `max_bytes` of `s` shown, then
// "…(N bytes)" giving the full size. For text a peer sent (hostnames, messages, paths), which must neither
// forge log lines, nor send terminal escape sequences, nor fill the log.
std::string printable_excerpt(std::string_view s, std::size_t max_bytes);

}  // namespace nymph
