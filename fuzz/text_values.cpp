// Fuzz target: the small text values nymph reads from configs, command lines, peers and Slurm. The first byte
// picks the parser, the rest is the text. Properties:
//   - durations (common/duration.hpp): a parsed duration formats to text that parses to the same value, and
//     it fits a clock's time_point offset (nanoseconds) without overflow;
//   - Slurm durations (slurm/time.hpp, installer/slurm_values.hpp): an accepted time limit is one Slurm's own
//     int arithmetic (seconds, rounded up to minutes) holds, its re-rendering as --time minutes is again a
//     time limit worth the rounded-up value, and the installer's reading agrees with the runner's;
//   - RFC 3339 times (common/time.hpp) and HTTP dates: a parsed time formats to text that parses back to it;
//   - URLs (http/url.hpp): an accepted endpoint re-renders to a URL that parses to the same endpoint;
//   - ULIDs (common/ulid.hpp): an accepted ULID's canonical text parses to the same ULID.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "agent/doctor.hpp"
#include "common/duration.hpp"
#include "common/time.hpp"
#include "common/ulid.hpp"
#include "fuzz/check.hpp"
#include "http/url.hpp"
#include "installer/slurm_values.hpp"
#include "slurm/time.hpp"

namespace {

using namespace nymph;
using namespace std::chrono;

void check_duration(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return;
  NYMPH_FUZZ_CHECK(d->count() >= 0);
  NYMPH_FUZZ_CHECK(d->count() <= duration_cast<milliseconds>(nanoseconds::max()).count() / 2);
  auto again = parse_duration(format_duration(*d));
  NYMPH_FUZZ_CHECK(again && *again == *d);
}

void check_slurm_duration(std::string_view text) {
  auto d = slurm::parse_duration(text);
  auto installer_d = installer::parse_slurm_time("--time", text);
  if (installer_d) NYMPH_FUZZ_CHECK(d && *d == *installer_d && slurm::is_time_limit(text));
  if (!d || !slurm::is_time_limit(text)) return;
  // Slurm (time_str2secs / time_str2mins) computes the length in seconds in an int, then adds 59.
  NYMPH_FUZZ_CHECK(d->count() > 0 && d->count() <= std::numeric_limits<std::int32_t>::max() - 59);
  std::string as_minutes = slurm::minutes_for(*d);
  auto again = slurm::parse_duration(as_minutes);
  NYMPH_FUZZ_CHECK(again && slurm::is_time_limit(as_minutes));
  NYMPH_FUZZ_CHECK(*again == minutes{(d->count() + 59) / 60});
  if (auto left = slurm::parse_time_left(text)) NYMPH_FUZZ_CHECK(*left == *d);
}

void check_time(std::string_view text) {
  auto t = parse_time(text);
  if (!t) return;
  auto again = parse_time(format_time(*t));
  NYMPH_FUZZ_CHECK(again && *again == *t);
}

void check_http_date(std::string_view text) {
  auto t = agent::doctor::parse_http_date(text);
  if (!t) return;
  NYMPH_FUZZ_CHECK(!format_time(*t).empty());
}

std::string render(const http::Endpoint& e) {
  bool v6 = e.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + e.host + "]" : e.host;
  return std::string(e.tls ? "https://" : "http://") + host + ":" + std::to_string(e.port) + e.base_path;
}

void check_url(std::string_view text) {
  auto e = http::parse_endpoint(text);
  if (!e) return;
  NYMPH_FUZZ_CHECK(e->port > 0 && !e->host.empty());
  auto again = http::parse_endpoint(render(*e));
  NYMPH_FUZZ_CHECK(again.has_value());
  NYMPH_FUZZ_CHECK(again->tls == e->tls && again->host == e->host && again->port == e->port &&
                   again->base_path == e->base_path && again->loopback == e->loopback);
  auto server = http::parse_server_url(text);
  if (server) NYMPH_FUZZ_CHECK(server->tls || server->loopback);
}

void check_ulid(std::string_view text) {
  auto u = parse_ulid(text);
  if (!u) return;
  std::string canonical = u->str();
  NYMPH_FUZZ_CHECK(is_canonical_ulid(canonical));
  auto again = parse_ulid(canonical);
  NYMPH_FUZZ_CHECK(again && *again == *u && again->time_ms() <= kUlidMaxTimeMs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0: check_duration(text); break;
    case 1: check_slurm_duration(text); break;
    case 2: check_time(text); break;
    case 3: check_http_date(text); break;
    case 4: check_url(text); break;
    default: check_ulid(text); break;
  }
  return 0;
}
