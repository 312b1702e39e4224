#pragma once
// The /v1 control-plane protocol in one include: wire types (protocol/types.hpp), their JSON conversions
// (protocol/json.hpp) and the URL space (protocol/routes.hpp). docs/protocol.md is the normative description.
#include "common/time.hpp"
#include "protocol/json.hpp"
#include "protocol/routes.hpp"
#include "protocol/types.hpp"

namespace nymph::protocol {

// Times on the wire are RFC 3339 UTC with milliseconds (common/time.hpp).
using nymph::format_time;
using nymph::parse_time;

}  // namespace nymph::protocol
