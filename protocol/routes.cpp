#include "protocol/routes.hpp"

#include <stdexcept>
#include <vector>

namespace nymph::protocol {

namespace {

// The segments of a path: "/v1/jobs/x" -> {"v1", "jobs", "x"}. Empty segments are kept, so "/v1//jobs" has an
// empty one and matches nothing.
std::vector<std::string_view> segments_of(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.starts_with('/')) path.remove_prefix(1);
  while (true) {
    auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

bool is_placeholder(std::string_view segment) { return segment.size() > 2 && segment.front() == '{'; }

// Fills `params` from `path` when it has the shape of `pattern`.
bool matches(std::string_view pattern, const std::vector<std::string_view>& path, PathParams& params) {
  auto want = segments_of(pattern);
  if (want.size() != path.size()) return false;
  PathParams p;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!is_placeholder(want[i])) {
      if (want[i] != path[i]) return false;
      continue;
    }
    std::string value(path[i]);
    if (want[i] == "{worker}") p.worker = std::move(value);
    else if (want[i] == "{job}") p.job = std::move(value);
    else p.stream = std::move(value);
  }
  params = std::move(p);
  return true;
}

std::string_view param_for(std::string_view placeholder, const PathParams& params) {
  if (placeholder == "{worker}") return params.worker;
  if (placeholder == "{job}") return params.job;
  return params.stream;
}

RouteMatch match_segments(std::string_view method, const std::vector<std::string_view>& segments) {
  auto wanted = parse_method(method);
  RouteMatch m;
  for (const auto& r : kRoutes) {
    PathParams params;
    if (!matches(r.pattern, segments, params)) continue;
    if (wanted && r.method == *wanted) {
      m.outcome = RouteMatch::Outcome::found;
      m.route = &r;
      m.params = std::move(params);
      m.allowed.clear();
      m.needs_token = r.caller != Caller::anyone;
      return m;
    }
    m.outcome = RouteMatch::Outcome::method_not_allowed;
    m.needs_token = m.needs_token || r.caller != Caller::anyone;
    m.allowed += m.allowed.empty() ? "" : ", ";
    m.allowed += to_string(r.method);
  }
  return m;
}

}  // namespace

std::string_view to_string(Method m) {
  switch (m) {
    case Method::get: return "GET";
    case Method::post: return "POST";
    case Method::put: return "PUT";
  }
  return "?";
}

std::optional<Method> parse_method(std::string_view m) {
  for (auto candidate : {Method::get, Method::post, Method::put})
    if (to_string(candidate) == m) return candidate;
  return std::nullopt;
}

const Route& route_of(Endpoint e) {
  for (const auto& r : kRoutes)
    if (r.endpoint == e) return r;
  throw std::logic_error("endpoint without a route");  // every Endpoint is in kRoutes (tested)
}

RouteMatch match_route(std::string_view method, const std::vector<std::string>& decoded) {
  return match_segments(method, std::vector<std::string_view>(decoded.begin(), decoded.end()));
}

RouteMatch match_route(std::string_view method, std::string_view path) {
  return match_segments(method, segments_of(path));
}

std::string route_path(Endpoint e, const PathParams& params) {
  std::string out;
  for (auto segment : segments_of(route_of(e).pattern)) {
    out += '/';
    out += is_placeholder(segment) ? param_for(segment, params) : segment;
  }
  return out;
}

std::string workers_path() { return route_path(Endpoint::list_workers); }
std::string poll_path(std::string_view id) { return route_path(Endpoint::poll, {.worker = std::string(id)}); }
std::string exit_path(std::string_view id) { return route_path(Endpoint::worker_exit, {.worker = std::string(id)}); }
std::string kill_path(std::string_view id) { return route_path(Endpoint::kill_worker, {.worker = std::string(id)}); }
std::string drain_path(std::string_view id) {
  return route_path(Endpoint::drain_worker, {.worker = std::string(id)});
}
std::string jobs_path() { return route_path(Endpoint::list_jobs); }
std::string job_path(std::string_view id) { return route_path(Endpoint::get_job, {.job = std::string(id)}); }
std::string events_path(std::string_view id) { return route_path(Endpoint::job_events, {.job = std::string(id)}); }
std::string cancel_path(std::string_view id) { return route_path(Endpoint::cancel_job, {.job = std::string(id)}); }
std::string tokens_path() { return route_path(Endpoint::list_tokens); }
std::string revoke_path() { return route_path(Endpoint::revoke_token); }

std::string purge_path() { return route_path(Endpoint::purge); }

std::string workers_page_target(int limit, const std::optional<std::string>& cursor) {
  std::string t = workers_path() + "?limit=" + std::to_string(limit);
  if (cursor) t += "&cursor=" + *cursor;
  return t;
}

std::string jobs_page_target(int limit, std::optional<JobState> state, const std::optional<std::string>& cursor) {
  std::string t = jobs_path() + "?limit=" + std::to_string(limit);
  if (state) t += "&state=" + std::string(to_string(*state));
  if (cursor) t += "&cursor=" + *cursor;
  return t;
}

std::string log_put_target(std::string_view job_id, LogStream stream, std::uint64_t offset,
                           std::string_view lease_id) {
  return route_path(Endpoint::put_log, {.job = std::string(job_id), .stream = std::string(to_string(stream))}) +
         "?offset=" + std::to_string(offset) + "&lease=" + std::string(lease_id);
}

std::string log_get_target(std::string_view job_id, LogStream stream, std::uint64_t offset,
                           std::optional<int> attempt) {
  std::string t = route_path(Endpoint::get_log, {.job = std::string(job_id), .stream = std::string(to_string(stream))}) +
                  "?offset=" + std::to_string(offset);
  if (attempt) t += "&attempt=" + std::to_string(*attempt);
  return t;
}

}  // namespace nymph::protocol
