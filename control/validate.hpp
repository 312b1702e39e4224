#pragma once
// Semantic checks of decoded requests (types are checked by protocol::from_json). Each returns an Error whose
// message names the field and the rule ("field 'env': 'A-B' is not a valid environment variable name").
#include "common/error.hpp"
#include "protocol/protocol.hpp"

namespace nymph::control {

Result<void> validate(const protocol::RegisterRequest& r, const protocol::Limits& limits = protocol::kLimits);
Result<void> validate(const protocol::PollRequest& r, const protocol::Limits& limits = protocol::kLimits);
Result<void> validate(const protocol::EventRequest& r, const protocol::Limits& limits = protocol::kLimits);
Result<void> validate(const protocol::JobSubmission& s, const protocol::Limits& limits = protocol::kLimits);
Result<void> validate(const protocol::PurgeRequest& r, const protocol::Limits& limits = protocol::kLimits);

// True for a valid environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool is_env_name(std::string_view name);

}  // namespace nymph::control
