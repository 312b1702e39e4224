#pragma once
// Small text helpers every component uses: trimming and errno messages.
#include <string>
#include <string_view>

namespace nymph {

// `s` without leading and trailing spaces, tabs, CRs and LFs.
std::string_view trim(std::string_view s);

// The C library's message for an errno value ("No such file or directory"); thread-safe.
std::string errno_message(int err);

}  // namespace nymph
