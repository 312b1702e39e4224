#include "control/tokens.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <stdexcept>

namespace nymph::control {

std::string_view to_string(Role r) { return r == Role::admin ? "admin" : "agent"; }

std::optional<Role> parse_role(std::string_view s) {
  if (s == "admin") return Role::admin;
  if (s == "agent") return Role::agent;
  return std::nullopt;
}

std::string new_token() {
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
  return "nym_" + t;
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

}  // namespace nymph::control
