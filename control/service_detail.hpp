#pragma once
// Reply and request helpers shared by the Service's handler files (service.cpp, service_jobs.cpp). Internal to
// nymph::control.
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/system/result.hpp>
#include <boost/url/parse.hpp>

#include "control/service.hpp"
#include "control/validate.hpp"

namespace nymph::control::detail {

inline constexpr std::size_t kMaxLogRead = 4 * 1024 * 1024;
inline constexpr std::uint64_t kMaxJobWaitS = 60;  // GET /v1/jobs/{id}?waitS=
// The `limit` of GET /v1/workers and GET /v1/jobs pages when the request has none (docs/protocol.md 8.7, 8.11;
// the largest are in protocol::Limits).
inline constexpr int kWorkersPageDefault = 500;
inline constexpr int kJobsPageDefault = 1000;

inline WallTime wall_now() { return std::chrono::system_clock::now(); }

template <class T>
HttpReply json_reply(unsigned status, const T& x) {
  return HttpReply{status, "application/json", boost::json::serialize(boost::json::value_from(x)), {}};
}

inline HttpReply reply_for(const ApiError& e) {
  protocol::ErrorBody b{e.code, e.message, e.expected_offset, e.last_seq};
  return HttpReply{e.status, "application/json", protocol::error_document(b), {}};
}

// Decodes a JSON body into T and validates it; the error is a ready 400 reply.
template <class T>
boost::system::result<T, HttpReply> decode(const std::string& body, const protocol::Limits& limits) {
  auto v = protocol::parse_json(body, limits);
  if (!v) return error_reply(400, "invalidJson", v.error().message);
  auto x = protocol::from_json<T>(*v);
  if (!x) return error_reply(400, "invalidField", x.error().message);
  if constexpr (requires { validate(*x, limits); }) {
    if (auto ok = validate(*x, limits); !ok) return error_reply(400, "invalidField", ok.error().message);
  }
  return std::move(*x);
}

inline std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parsed origin-form target: decoded path segments and query parameters.
struct Target {
  std::vector<std::string> segments;
  std::map<std::string, std::string> params;
};

inline std::optional<Target> parse_target(std::string_view target) {
  auto u = boost::urls::parse_origin_form(target);
  if (!u) return std::nullopt;
  Target t;
  for (auto seg : u->segments()) t.segments.emplace_back(seg);
  for (auto p : u->params()) t.params[std::string(p.key)] = std::string(p.value);
  return t;
}

// The page a list request asks for: its `limit` query parameter (`fallback` when absent, else 1..max) and
// `max_bytes`. The error is a ready 400 reply.
inline boost::system::result<PageSpec, HttpReply> page_of(const Target& t, int fallback, int max,
                                                          std::size_t max_bytes) {
  PageSpec page{fallback, max_bytes};
  auto it = t.params.find("limit");
  if (it == t.params.end()) return page;
  auto n = parse_u64(it->second);
  if (!n || *n < 1 || *n > static_cast<std::uint64_t>(max))
    return error_reply(400, "badRequest", "query parameter 'limit' must be 1.." + std::to_string(max));
  page.limit = static_cast<int>(*n);
  return page;
}

// The 400 reply for a `cursor` query parameter that no page of this list gave.
inline HttpReply bad_cursor() {
  return error_reply(400, "badRequest", "query parameter 'cursor' must be a nextCursor of this list");
}

}  // namespace nymph::control::detail
