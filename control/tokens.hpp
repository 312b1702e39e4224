#pragma once
// API credentials of the control plane (docs/protocol.md section 2): token roles and scopes, the secret text
// handed out once, and the hash the database keeps. The store (control/store.hpp) records and looks them up.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nymph::control {

enum class Role { agent, admin };

// "agent" or "admin".
std::string_view to_string(Role r);
// The role named `s`, or nullopt for anything else.
std::optional<Role> parse_role(std::string_view s);

// A new secret: `prefix` + 43 base64url characters of 256 random bits (OpenSSL RAND_bytes). API tokens use
// "nym_", worker credentials "nyw_". Throws std::runtime_error when no randomness is available.
std::string new_token(std::string_view prefix = "nym_");

// The lowercase hex SHA-256 of `token`: the only form in which a secret is stored.
std::string token_hash(std::string_view token);

// What workers an agent token may register. Empty members do not restrict.
struct TokenScope {
  std::map<std::string, std::string> tags;  // every one must be among the worker's tags, with this value
  std::vector<std::string> runners;         // the worker may advertise only these runners

  bool operator==(const TokenScope&) const = default;
};

// Why a worker with `tags` and `runners` is outside `scope` (a sentence for the 403 reply), or nullopt when it
// is inside.
std::optional<std::string> scope_violation(const TokenScope& scope, const std::map<std::string, std::string>& tags,
                                           const std::vector<std::string>& runners);

// The scope as stored: {"tags":{...},"runners":[...]} (members omitted when empty; "{}" for no scope).
std::string scope_to_json(const TokenScope& scope);
// The stored text back; anything unreadable is the empty scope's opposite: nullopt (callers refuse it).
std::optional<TokenScope> scope_from_json(std::string_view text);

}  // namespace nymph::control
