#pragma once
// nymph::http URLs: a control plane's base URL, parsed with Boost.URL, and the one transport rule that every
// client of a control plane applies before it sends a token (docs/protocol.md section 1): `nymph run`,
// `nymph install`, `nymph doctor` and the nymph-control client commands.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph::http {

// Parsed base URL.
struct Endpoint {
  bool tls = false;
  std::string host;       // without brackets for IPv6
  std::uint16_t port = 0;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  bool loopback = false;  // the host is an address in 127.0.0.0/8, [::1], or the name "localhost"
};

// Parses "http://host[:port][/prefix]" or "https://...". Returns an Error naming the URL for another scheme,
// user info, a query, a fragment, a missing or percent-encoded host, or a port outside 1-65535. Default ports
// 80 / 443.
// `loopback` is decided on the parsed host: an IPv4 address (four decimal parts) in 127.0.0.0/8, the IPv6
// address ::1 (in brackets) or exactly "localhost"; never a name that merely starts with "127.".
Result<Endpoint> parse_endpoint(std::string_view url);

// Where plain http:// may go.
enum class PlainHttp {
  loopback_only,  // the rule: the token never crosses a network in clear text
  anywhere,       // an explicit opt-out (the agent's allow_insecure_http = true)
};

// parse_endpoint plus the transport rule: https:// to any host; http:// only when the endpoint is loopback
// (unless `plain` is anywhere). The Error names the URL (control characters escaped) and says to use https://.
Result<Endpoint> parse_server_url(std::string_view url, PlainHttp plain = PlainHttp::loopback_only);

// True when `host` (an address to listen on, not a URL) is a loopback address (127.0.0.0/8, ::1) or
// "localhost".
bool is_loopback_host(std::string_view host);

}  // namespace nymph::http
