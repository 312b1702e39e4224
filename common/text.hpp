#pragma once
// Small text helpers every component uses: trimming, errno messages, text from others made safe to log.
#include <string>
#include <string_view>

namespace nymph {

// `s` without leading and trailing spaces, tabs, CRs and LFs.
std::string_view trim(std::string_view s);

// The C library's message for an errno value ("No such file or directory"); thread-safe.
std::string errno_message(int err);

// `s` made safe for one log line: control characters, DEL and backslashes escaped (\n, \t, \\, \xHH), at most
// `max_bytes` of `s` shown, then "…(N bytes)" giving the full size. For text a peer sent (hostnames,
// messages, paths), which must not forge log lines or fill the log.
std::string printable_excerpt(std::string_view s, std::size_t max_bytes);

}  // namespace nymph
