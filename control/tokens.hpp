#pragma once
// API tokens of the control plane: roles, the token text handed out once, and the hash the database keeps
// (docs/protocol.md section 2). The store (control/store.hpp) records and looks them up.
#include <optional>
#include <string>
#include <string_view>

namespace nymph::control {

enum class Role { agent, admin };

// "agent" or "admin".
std::string_view to_string(Role r);
// The role named `s`, or nullopt for anything else.
std::optional<Role> parse_role(std::string_view s);

// A new token: "nym_" + 43 base64url characters of 256 random bits (OpenSSL RAND_bytes). Throws
// std::runtime_error when no randomness is available.
std::string new_token();

// The lowercase hex SHA-256 of `token`: the only form in which a token is stored.
std::string token_hash(std::string_view token);

}  // namespace nymph::control
