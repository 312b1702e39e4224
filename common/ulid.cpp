#include "common/ulid.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace nymph {
namespace {

constexpr std::string_view kAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// Value of one Crockford base32 character, or -1 when it is not in the alphabet (I, L, O, U included).
int decode_char(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  auto pos = kAlphabet.find(c);
  return pos == std::string_view::npos ? -1 : static_cast<int>(pos);
}

// 26 characters x 5 bits = 130 bits: the text encodes the 128-bit value with two leading zero bits.
constexpr int kPadBits = 2;

// Bit `pos` of the 128-bit value, counted from the most significant bit; positions before 0 are padding (0).
unsigned get_bit(const Ulid& u, int pos) {
  if (pos < 0) return 0;
  return (u.bytes[static_cast<std::size_t>(pos / 8)] >> (7 - pos % 8)) & 1u;
}

// Sets bit `pos` (as in get_bit) to `bit`; padding positions are ignored (the caller checks they are 0).
void set_bit(Ulid& u, int pos, int bit) {
  if (pos < 0 || !bit) return;
  u.bytes[static_cast<std::size_t>(pos / 8)] |= static_cast<std::uint8_t>(1u << (7 - pos % 8));
}

// Adds one to the 80-bit random part (bytes 6-15). Returns false when it was already all ones.
bool increment_random(Ulid& u) {
  for (int i = 15; i >= 6; --i) {
    if (++u.bytes[static_cast<std::size_t>(i)] != 0) return true;
  }
  return false;
}

std::uint64_t system_now_ms() {
  using namespace std::chrono;
  return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

}  // namespace

std::uint64_t Ulid::time_ms() const {
  std::uint64_t t = 0;
  for (std::size_t i = 0; i < 6; ++i) t = (t << 8) | bytes[i];
  return t;
}

std::string Ulid::str() const {
  std::string out(26, '0');
  for (int i = 0; i < 26; ++i) {
    unsigned v = 0;
    for (int j = 0; j < 5; ++j) v = (v << 1) | get_bit(*this, i * 5 + j - kPadBits);
    out[static_cast<std::size_t>(i)] = kAlphabet[v];
  }
  return out;
}

Result<Ulid> parse_ulid(std::string_view text) {
  if (text.size() != 26)
    return fail("a ULID has 26 characters, got " + std::to_string(text.size()));
  Ulid u;
  for (int i = 0; i < 26; ++i) {
    int d = decode_char(text[static_cast<std::size_t>(i)]);
    if (d < 0) return fail("invalid character at position " + std::to_string(i + 1) + " of a ULID");
    if (i == 0 && d > 7) return fail("ULID out of range: the first character must be 0-7");
    for (int j = 0; j < 5; ++j) set_bit(u, i * 5 + j - kPadBits, (d >> (4 - j)) & 1);
  }
  return u;
}

bool is_canonical_ulid(std::string_view text) {
  auto u = parse_ulid(text);
  return u && u->str() == text;
}

Result<Ulid> make_ulid(std::uint64_t time_ms, std::span<const std::uint8_t, 10> random) {
  if (time_ms > kUlidMaxTimeMs) return fail("time " + std::to_string(time_ms) + " ms does not fit in a ULID");
  Ulid u;
  for (int i = 5; i >= 0; --i) {
    u.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(time_ms & 0xff);
    time_ms >>= 8;
  }
  std::memcpy(u.bytes.data() + 6, random.data(), random.size());
  return u;
}

Result<void> urandom_bytes(std::span<std::uint8_t> out) {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open /dev/urandom: ") + std::strerror(errno));
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return fail(std::string("cannot read /dev/urandom: ") + std::strerror(err));
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return {};
}

Result<void> os_random_bytes(std::span<std::uint8_t> out) {
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSYS) return urandom_bytes(out);
    if (n < 0) return fail(std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  return {};
}

UlidGenerator::UlidGenerator() : UlidGenerator(system_now_ms, os_random_bytes) {}

UlidGenerator::UlidGenerator(Clock clock, Random random) : clock_(std::move(clock)), random_(std::move(random)) {}

Result<Ulid> UlidGenerator::next() {
  std::uint64_t now = clock_();
  if (have_last_ && now <= last_.time_ms()) {
    Ulid u = last_;
    if (!increment_random(u)) return fail("ULID random part overflow within one millisecond");
    last_ = u;
    return u;
  }
  std::array<std::uint8_t, 10> random{};
  if (auto r = random_(random); !r) return r.error();
  auto u = make_ulid(now, random);
  if (!u) return u.error();
  last_ = *u;
  have_last_ = true;
  return *u;
}

}  // namespace nymph
