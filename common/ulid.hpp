#pragma once
// ULIDs (https://github.com/ulid/spec): 128-bit identifiers that sort by creation time. 48 bits of Unix time in
// milliseconds followed by 80 random bits, written as 26 characters of Crockford base32 (0-9, A-Z without I, L,
// O, U). Used as launch IDs: one per `nymph install`.
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph {

// A ULID as its 16 big-endian bytes: bytes 0-5 hold the time, bytes 6-15 the random part.
// Comparison orders ULIDs the way their strings sort.
struct Ulid {
  std::array<std::uint8_t, 16> bytes{};

  // The 48-bit millisecond timestamp.
  std::uint64_t time_ms() const;

  // The canonical 26-character upper-case text.
  std::string str() const;

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 false positive on a defaulted operator<=>
  friend auto operator<=>(const Ulid&, const Ulid&) = default;
};

// Largest time a ULID can hold (2^48 - 1 ms, in the year 10889).
inline constexpr std::uint64_t kUlidMaxTimeMs = (std::uint64_t{1} << 48) - 1;

// Parses 26 characters of Crockford base32. Lower case is accepted (the spec's decoding is case-insensitive);
// I, L, O, U and anything else outside the alphabet are rejected, as is a value above 2^128 - 1 (a first
// character above '7'). Returns an Error naming the problem; never throws.
Result<Ulid> parse_ulid(std::string_view text);

// True when `text` is a ULID in canonical form (26 upper-case characters that parse_ulid accepts).
bool is_canonical_ulid(std::string_view text);

// Builds a ULID from a time and the 10 random bytes. Returns an Error when `time_ms` exceeds kUlidMaxTimeMs.
Result<Ulid> make_ulid(std::uint64_t time_ms, std::span<const std::uint8_t, 10> random);

// Fills `out` with random bytes from the kernel: getrandom(2), or /dev/urandom where getrandom does not exist
// (ENOSYS on Linux < 3.17, e.g. RHEL 7's kernel 3.10). Returns an Error when neither works; never throws.
Result<void> os_random_bytes(std::span<std::uint8_t> out);

// Fills `out` from /dev/urandom only (the fallback of os_random_bytes, exposed so it can be tested).
Result<void> urandom_bytes(std::span<std::uint8_t> out);

// Generates ULIDs that are strictly increasing within one generator: when the clock has not advanced past the
// previous ULID's millisecond (same millisecond, or the clock went back), the previous random part plus one is
// used with the previous time. Not thread-safe; one per thread or per command.
class UlidGenerator {
 public:
  using Clock = std::function<std::uint64_t()>;                           // Unix time in milliseconds
  using Random = std::function<Result<void>(std::span<std::uint8_t>)>;    // fills a buffer with random bytes

  // The system clock and os_random_bytes.
  UlidGenerator();
  // Injected clock and randomness (tests).
  UlidGenerator(Clock clock, Random random);

  // The next ULID. Errors: the random source failed, the time is beyond kUlidMaxTimeMs, or the random part
  // would overflow within one millisecond (2^80 ULIDs in the same millisecond). Never throws.
  Result<Ulid> next();

 private:
  Clock clock_;
  Random random_;
  bool have_last_ = false;
  Ulid last_{};
};

}  // namespace nymph
