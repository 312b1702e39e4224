// Fuzz target: every /v1 request body the control plane decodes (register, poll, events, exit, job submission,
// token revoke, purge). The first byte picks the type, the rest is the body. Properties: decode -> encode ->
// decode round-trips (check_round_trip), and validation (control/validate.hpp, which the server runs after
// decoding) never throws and accepts the re-decoded value exactly when it accepted the first.
#include <cstddef>
#include <cstdint>

#include "control/validate.hpp"
#include "fuzz/protocol_wire.hpp"

namespace {

using namespace nymph;

template <class T>
void check_request(std::string_view body) {
  auto decoded = fuzz::check_round_trip<T>(body);
  if (!decoded) return;
  if constexpr (requires { control::validate(*decoded); }) {
    bool valid = control::validate(*decoded).has_value();
    auto again = protocol::parse_as<T>(protocol::to_json_text(*decoded));
    NYMPH_FUZZ_CHECK(control::validate(*again).has_value() == valid);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto body = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 7) {
    case 0: check_request<protocol::RegisterRequest>(body); break;
    case 1: check_request<protocol::PollRequest>(body); break;
    case 2: check_request<protocol::EventRequest>(body); break;
    case 3: check_request<protocol::ExitRequest>(body); break;
    case 4: check_request<protocol::JobSubmission>(body); break;
    case 5: check_request<protocol::RevokeRequest>(body); break;
    default: check_request<protocol::PurgeRequest>(body); break;
  }
  return 0;
}
