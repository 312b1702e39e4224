#pragma once
// The fuzz targets' property check: a violated property prints what was expected and aborts, which libFuzzer
// reports as a crash (keeping the input) and the corpus replay as a failed test.
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace nymph::fuzz {

// Aborts with `what` and the location when `ok` is false.
inline void check(bool ok, const char* what, const char* file, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: property violated: %s\n", file, line, what);
  std::abort();
}

// The fuzz input as text.
inline std::string_view as_text(const unsigned char* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace nymph::fuzz

#define NYMPH_FUZZ_CHECK(cond) ::nymph::fuzz::check(static_cast<bool>(cond), #cond, __FILE__, __LINE__)
