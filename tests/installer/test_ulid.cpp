// ULID: the spec's vectors, the alphabet, overflow, randomness sources and monotonic generation.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <set>

#include "common/ulid.hpp"

using nymph::make_ulid;
using nymph::parse_ulid;
using nymph::Ulid;
using nymph::UlidGenerator;

namespace {

Ulid with_time(std::uint64_t ms, std::uint8_t fill) {
  std::array<std::uint8_t, 10> r;
  r.fill(fill);
  return make_ulid(ms, r).value();
}

// A generator with a settable clock and a random source that returns fixed bytes.
struct FakeSource {
  std::uint64_t now = 0;
  std::array<std::uint8_t, 10> random{};
  int calls = 0;
  UlidGenerator generator() {
    return UlidGenerator([this] { return now; },
                         [this](std::span<std::uint8_t> out) -> nymph::Result<void> {
                           ++calls;
                           std::copy(random.begin(), random.end(), out.begin());
                           return {};
                         });
  }
};

}  // namespace

TEST(Ulid, SpecTimeVector) {
  // The spec: a ULID made at 1469918176385 ms starts with 01ARYZ6S41.
  auto u = with_time(1469918176385, 0);
  EXPECT_EQ(u.str().substr(0, 10), "01ARYZ6S41");
  EXPECT_EQ(u.str(), "01ARYZ6S410000000000000000");
  EXPECT_EQ(u.time_ms(), 1469918176385u);
}

TEST(Ulid, SpecExampleRoundTrips) {
  auto u = parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAV");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->str(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(u->time_ms(), 1469922850259u);
}

TEST(Ulid, MaxAndMin) {
  auto max = with_time(nymph::kUlidMaxTimeMs, 0xff);
  EXPECT_EQ(max.str(), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
  EXPECT_EQ(parse_ulid("7ZZZZZZZZZZZZZZZZZZZZZZZZZ").value(), max);
  EXPECT_EQ(with_time(0, 0).str(), "00000000000000000000000000");
}

TEST(Ulid, OverflowRejected) {
  EXPECT_FALSE(parse_ulid("80000000000000000000000000"));
  EXPECT_FALSE(parse_ulid("ZZZZZZZZZZZZZZZZZZZZZZZZZZ"));
  std::array<std::uint8_t, 10> r{};
  EXPECT_FALSE(make_ulid(nymph::kUlidMaxTimeMs + 1, r));
}

TEST(Ulid, ExcludedLettersAndBadLengthRejected) {
  for (char c : {'I', 'L', 'O', 'U', 'i', 'l', 'o', 'u', '-', ' ', '\n'}) {
    std::string s = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    s[12] = c;
    auto u = parse_ulid(s);
    EXPECT_FALSE(u) << s;
    if (!u) {
      EXPECT_NE(u.error().message.find("position 13"), std::string::npos) << u.error().message;
    }
  }
  EXPECT_FALSE(parse_ulid(""));
  EXPECT_FALSE(parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FA"));
  EXPECT_FALSE(parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAVV"));
}

TEST(Ulid, LowerCaseParsesButIsNotCanonical) {
  auto u = parse_ulid("01arz3ndektsv4rrffq69g5fav");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->str(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_FALSE(nymph::is_canonical_ulid("01arz3ndektsv4rrffq69g5fav"));
  EXPECT_TRUE(nymph::is_canonical_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAV"));
}

TEST(Ulid, EveryAlphabetCharacterRoundTrips) {
  const std::string alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  for (char c : alphabet) {
    std::string s = "0" + std::string(25, c);
    EXPECT_EQ(parse_ulid(s).value().str(), s);
  }
}

TEST(Ulid, OrderFollowsText) {
  auto a = with_time(1000, 0xff), b = with_time(1001, 0);
  EXPECT_LT(a, b);
  EXPECT_LT(a.str(), b.str());
}

TEST(Ulid, SameMillisecondIncrementsRandomPart) {
  // The spec's monotonic example: ...VRY, ...VRZ, ...VS0 within one millisecond.
  auto seed = parse_ulid("01BX5ZZKBKACTAV9WEVGEMMVRY").value();
  FakeSource src;
  src.now = seed.time_ms();
  std::copy(seed.bytes.begin() + 6, seed.bytes.end(), src.random.begin());
  auto gen = src.generator();
  EXPECT_EQ(gen.next().value().str(), "01BX5ZZKBKACTAV9WEVGEMMVRY");
  EXPECT_EQ(gen.next().value().str(), "01BX5ZZKBKACTAV9WEVGEMMVRZ");
  EXPECT_EQ(gen.next().value().str(), "01BX5ZZKBKACTAV9WEVGEMMVS0");
  EXPECT_EQ(src.calls, 1);
}

TEST(Ulid, ClockGoingBackStaysMonotonic) {
  FakeSource src;
  src.now = 5000;
  auto gen = src.generator();
  auto a = gen.next().value();
  src.now = 4000;
  auto b = gen.next().value();
  EXPECT_LT(a, b);
  EXPECT_EQ(b.time_ms(), 5000u);
  src.now = 6000;
  auto c = gen.next().value();
  EXPECT_EQ(c.time_ms(), 6000u);
  EXPECT_EQ(src.calls, 2);
}

TEST(Ulid, RandomOverflowWithinMillisecondIsAnError) {
  FakeSource src;
  src.now = 42;
  src.random.fill(0xff);
  auto gen = src.generator();
  EXPECT_TRUE(gen.next());
  auto r = gen.next();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("overflow"), std::string::npos);
  src.now = 43;
  EXPECT_TRUE(gen.next());
}

TEST(Ulid, RandomSourceFailureIsReported) {
  UlidGenerator gen([] { return std::uint64_t{1}; },
                    [](std::span<std::uint8_t>) -> nymph::Result<void> { return nymph::fail("no entropy"); });
  auto r = gen.next();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "no entropy");
}

TEST(Ulid, OsRandomnessAndUrandomFallbackFillBuffers) {
  std::array<std::uint8_t, 64> a{}, b{};
  ASSERT_TRUE(nymph::os_random_bytes(a));
  ASSERT_TRUE(nymph::urandom_bytes(b));
  EXPECT_NE(a, (std::array<std::uint8_t, 64>{}));
  EXPECT_NE(b, (std::array<std::uint8_t, 64>{}));
  EXPECT_NE(a, b);
}

TEST(Ulid, SystemGeneratorIsStrictlyIncreasingAndUnique) {
  UlidGenerator gen;
  std::set<std::string> seen;
  Ulid last{};
  for (int i = 0; i < 10000; ++i) {
    auto u = gen.next().value();
    EXPECT_LT(last, u);
    last = u;
    seen.insert(u.str());
  }
  EXPECT_EQ(seen.size(), 10000u);
}
