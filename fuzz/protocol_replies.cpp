// Fuzz target: every /v1 reply body the agent and the admin commands decode (register, poll, event and log
// replies, the error document, job/worker/token views and lists, revoke and purge replies). The first byte picks
// the type, the rest is the body. Property: decode -> encode -> decode round-trips (check_round_trip); an error
// document that parses re-renders (error_document) to one that parses to the same error.
#include <cstddef>
#include <cstdint>

#include "fuzz/protocol_wire.hpp"

namespace {

using namespace nymph;

void check_error_document(std::string_view body) {
  auto error = protocol::parse_error_document(body);
  if (!error) return;
  std::string rendered = protocol::error_document(*error);
  auto again = protocol::parse_error_document(rendered);
  NYMPH_FUZZ_CHECK(again.has_value());
  NYMPH_FUZZ_CHECK(protocol::error_document(*again) == rendered);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto body = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 12) {
    case 0: fuzz::check_round_trip<protocol::RegisterResponse>(body); break;
    case 1: fuzz::check_round_trip<protocol::PollResponse>(body); break;
    case 2: fuzz::check_round_trip<protocol::EventResponse>(body); break;
    case 3: fuzz::check_round_trip<protocol::LogAppendResponse>(body); break;
    case 4: check_error_document(body); break;
    case 5: fuzz::check_round_trip<protocol::JobInfo>(body); break;
    case 6: fuzz::check_round_trip<protocol::JobList>(body); break;
    case 7: fuzz::check_round_trip<protocol::WorkerList>(body); break;
    case 8: fuzz::check_round_trip<protocol::TokenList>(body); break;
    case 9: fuzz::check_round_trip<protocol::RevokeResponse>(body); break;
    case 10: fuzz::check_round_trip<protocol::PurgeResponse>(body); break;
    default: fuzz::check_round_trip<protocol::WorkerInfo>(body); break;
  }
  return 0;
}
