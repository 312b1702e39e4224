#include "control/tokens.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <stdexcept>

#include <boost/json.hpp>

namespace nymph::control {

namespace json = boost::json;

std::string_view to_string(Role r) { return r == Role::admin ? "admin" : "agent"; }

std::optional<Role> parse_role(std::string_view s) {
  if (s == "admin") return Role::admin;
  if (s == "agent") return Role::agent;
  return std::nullopt;
}

std::string new_token(std::string_view prefix) {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) throw std::runtime_error("cannot generate random bytes (OpenSSL RAND_bytes)");
  unsigned char b64[64];
  int n = EVP_EncodeBlock(b64, raw, sizeof raw);
  std::string t(reinterpret_cast<char*>(b64), static_cast<std::size_t>(n));
  for (char& c : t) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  while (!t.empty() && t.back() == '=') t.pop_back();
  return std::string(prefix) + t;
}

std::string token_hash(std::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::optional<std::string> scope_violation(const TokenScope& scope, const std::map<std::string, std::string>& tags,
                                           const std::vector<std::string>& runners) {
  for (const auto& [key, value] : scope.tags) {
    auto it = tags.find(key);
    if (it == tags.end() || it->second != value)
      return "this token may only register workers tagged " + key + "=" + value;
  }
  if (scope.runners.empty()) return std::nullopt;
  for (const auto& r : runners)
    if (std::find(scope.runners.begin(), scope.runners.end(), r) == scope.runners.end())
      return "this token may not register a worker with runner '" + r + "'";
  return std::nullopt;
}

std::string scope_to_json(const TokenScope& scope) {
  json::object o;
  if (!scope.tags.empty()) {
    json::object t;
    for (const auto& [k, v] : scope.tags) t[k] = v;
    o["tags"] = std::move(t);
  }
  if (!scope.runners.empty()) {
    json::array r;
    for (const auto& x : scope.runners) r.emplace_back(x);
    o["runners"] = std::move(r);
  }
  return json::serialize(o);
}

std::optional<TokenScope> scope_from_json(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  TokenScope s;
  const auto& o = v.get_object();
  if (auto* t = o.if_contains("tags")) {
    if (!t->is_object()) return std::nullopt;
    for (const auto& [k, val] : t->get_object()) {
      if (!val.is_string()) return std::nullopt;
      s.tags[std::string(k)] = std::string(val.get_string());
    }
  }
  if (auto* r = o.if_contains("runners")) {
    if (!r->is_array()) return std::nullopt;
    for (const auto& x : r->get_array()) {
      if (!x.is_string()) return std::nullopt;
      s.runners.emplace_back(x.get_string());
    }
  }
  return s;
}

}  // namespace nymph::control
