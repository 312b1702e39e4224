#pragma once
// The round-trip property shared by protocol_requests and protocol_replies.
#include <string>
#include <string_view>

#include "fuzz/check.hpp"
#include "protocol/json.hpp"

namespace nymph::fuzz {

// Decodes `text` as T the way a peer does (parse_as under kLimits); when that succeeds, the encoding decodes
// again and encodes to the same text (decode -> encode -> decode is the identity on what was accepted).
// Returns the decoded value, when there is one, for further checks.
template <class T>
std::optional<T> check_round_trip(std::string_view text) {
  auto first = protocol::parse_as<T>(text);
  if (!first) return std::nullopt;
  std::string encoded = protocol::to_json_text(*first);
  auto second = protocol::parse_as<T>(encoded);
  NYMPH_FUZZ_CHECK(second.has_value());
  NYMPH_FUZZ_CHECK(protocol::to_json_text(*second) == encoded);
  return std::move(*first);
}

}  // namespace nymph::fuzz
