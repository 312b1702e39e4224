// Fuzz target: raw bytes read as one HTTP request the way the control plane reads it (control/http_server.cpp and
// Service::check_head), without sockets: a Beast request_parser with the server's header and body limits, the
// origin-form target split into decoded segments, the route lookup, the path-parameter checks, the endpoint's
// body limit and, for a JSON endpoint, the body parsed under the protocol limits. Properties: nothing throws or
// crashes; a body never exceeds the limit in force; a found route with valid parameters is found again, with the
// same parameters, from the path route_path builds for it; a 405 lists the method's alternatives.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/url/parse.hpp>

#include "fuzz/check.hpp"
#include "protocol/json.hpp"
#include "protocol/routes.hpp"

namespace {

using namespace nymph;
namespace bhttp = boost::beast::http;
using protocol::RouteMatch;

constexpr protocol::Limits kServerLimits{};

// The decoded path segments of an origin-form target, as the server's parse_target splits it.
std::optional<std::vector<std::string>> segments_of(std::string_view target) {
  auto u = boost::urls::parse_origin_form(target);
  if (!u) return std::nullopt;
  std::vector<std::string> out;
  for (auto seg : u->segments()) out.emplace_back(seg);
  return out;
}

bool params_valid(const protocol::PathParams& p) {
  return (p.worker.empty() || protocol::is_valid_id(p.worker)) && (p.job.empty() || protocol::is_valid_id(p.job)) &&
         (p.stream.empty() || protocol::parse_log_stream(p.stream));
}

void check_route_path(const RouteMatch& m, std::string_view method) {
  if (!params_valid(m.params)) return;
  auto path = protocol::route_path(m.route->endpoint, m.params);
  auto again = protocol::match_route(method, *segments_of(path));
  NYMPH_FUZZ_CHECK(again.outcome == RouteMatch::Outcome::found);
  NYMPH_FUZZ_CHECK(again.route == m.route);
  NYMPH_FUZZ_CHECK(again.params.worker == m.params.worker && again.params.job == m.params.job &&
                   again.params.stream == m.params.stream);
}

// Feeds `bytes` to `parser` until it finishes the header (`header_only`) or the message, fails, or needs more
// than there is (the peer would be waited for). Consumed bytes are removed from `bytes`. Returns the parse
// error, if any (not need_more).
boost::beast::error_code feed(bhttp::request_parser<bhttp::string_body>& parser, std::string_view& bytes,
                              bool header_only) {
  boost::beast::error_code ec;
  while (!(header_only ? parser.is_header_done() : parser.is_done())) {
    std::size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (ec == bhttp::error::need_more) {
      ec = {};
      if (used == 0) break;  // nothing more to give it
      continue;
    }
    if (ec || (used == 0 && bytes.empty())) break;
  }
  if (!ec && !header_only && !parser.is_done() && bytes.empty()) parser.put_eof(ec);  // the peer closed
  return ec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes = fuzz::as_text(data, size);
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(kServerLimits.max_header_bytes));
  parser.body_limit(std::max(kServerLimits.max_json_body, kServerLimits.max_log_chunk));
  if (feed(parser, bytes, true) || !parser.is_header_done()) return 0;

  const auto& head = parser.get();
  auto segments = segments_of(head.target());
  if (!segments) return 0;
  std::string method(head.method_string());
  auto m = protocol::match_route(method, *segments);
  if (m.outcome == RouteMatch::Outcome::method_not_allowed) NYMPH_FUZZ_CHECK(!m.allowed.empty());
  if (m.outcome != RouteMatch::Outcome::found) return 0;
  NYMPH_FUZZ_CHECK(m.route != nullptr && protocol::to_string(m.route->method) == method);
  check_route_path(m, method);

  bool log_bytes = m.route->body == protocol::BodyKind::log_bytes;
  std::size_t limit = log_bytes ? kServerLimits.max_log_chunk : kServerLimits.max_json_body;
  parser.body_limit(limit);
  parser.eager(true);  // as http::async_read does for the body
  if (feed(parser, bytes, false) || !parser.is_done()) return 0;
  const std::string& body = parser.get().body();
  NYMPH_FUZZ_CHECK(body.size() <= limit);
  if (m.route->body == protocol::BodyKind::json) (void)protocol::parse_json(body, kServerLimits);
  return 0;
}
