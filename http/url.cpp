#include "http/url.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/url/parse.hpp>

#include "common/text.hpp"

namespace nymph::http {

namespace {

// The URL for a message, in quotes: control characters escaped (it may come from anywhere), bounded.
std::string shown(std::string_view url) { return "'" + printable_excerpt(url, 256) + "'"; }

Error bad_url(std::string_view url, std::string_view why) {
  return fail("invalid URL " + shown(url) + ": " + std::string(why));
}

// The port, checked as written: Boost.URL's port_number() keeps only the low 16 bits (99999 gives 34463).
Result<std::uint16_t> port_of(const boost::urls::url_view& u, bool tls) {
  if (!u.has_port()) return static_cast<std::uint16_t>(tls ? 443 : 80);
  auto text = u.port();
  unsigned long value = 0;
  for (char c : text) {
    value = value * 10 + static_cast<unsigned long>(c - '0');  // the grammar allows digits only
    if (value > 65535) break;
  }
  if (text.empty() || value == 0 || value > 65535) return fail("the port must be between 1 and 65535");
  return static_cast<std::uint16_t>(value);
}

bool is_loopback(const boost::urls::url_view& u) {
  switch (u.host_type()) {
    case boost::urls::host_type::ipv4: return (u.host_ipv4_address().to_uint() >> 24) == 127;
    case boost::urls::host_type::ipv6: return u.host_ipv6_address().is_loopback();
    case boost::urls::host_type::name: return u.encoded_host() == "localhost";
    default: return false;
  }
}

}  // namespace

Result<Endpoint> parse_endpoint(std::string_view url) {
  auto u = boost::urls::parse_uri(url);
  if (!u) return bad_url(url, u.error().message());
  Endpoint ep;
  if (u->scheme() == "https") ep.tls = true;
  else if (u->scheme() != "http") return bad_url(url, "the scheme must be https:// (or http:// to a loopback address)");
  if (u->has_userinfo()) return bad_url(url, "credentials do not belong in the URL");
  if (u->has_query() || u->has_fragment()) return bad_url(url, "a query or fragment is not allowed");
  // Boost.URL 1.81 reads "http://127.0.0.1.example.com:8470" as host 127.0.0.1 and path ".example.com:8470".
  auto path = u->encoded_path();
  if (!path.empty() && path.front() != '/') return bad_url(url, "the host is not followed by ':port' or '/'");
  // A host name is what DNS and TLS (SNI, certificate names) take: no percent-encoding ("cp.%CC" would decode
  // to a byte no resolver or certificate has, and re-rendering it gives another URL).
  if (u->host_type() == boost::urls::host_type::name && u->encoded_host().find('%') != std::string_view::npos)
    return bad_url(url, "the host name must not be percent-encoded");
  ep.host = u->encoded_host_address().decode();
  if (ep.host.size() >= 2 && ep.host.front() == '[') ep.host = ep.host.substr(1, ep.host.size() - 2);
  if (ep.host.empty()) return bad_url(url, "no host");
  auto port = port_of(*u, ep.tls);
  if (!port) return bad_url(url, port.error().message);
  ep.port = *port;
  ep.loopback = is_loopback(*u);
  ep.base_path = std::string(path);
  while (!ep.base_path.empty() && ep.base_path.back() == '/') ep.base_path.pop_back();
  return ep;
}

Result<Endpoint> parse_server_url(std::string_view url, PlainHttp plain) {
  auto ep = parse_endpoint(url);
  if (!ep) return ep;
  if (!ep->tls && !ep->loopback && plain == PlainHttp::loopback_only)
    return fail("URL " + shown(url) +
                ": plain http:// is only allowed to a loopback address (127.0.0.0/8, [::1], localhost); the token "
                "would cross the network in clear text; use https://");
  return ep;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(std::string(host), ec);
  return !ec && addr.is_loopback();
}

}  // namespace nymph::http
