// The route table: every endpoint once, paths built by clients match back to the same endpoint and
// parameters, and the server's questions (who may call it, what body, may it be held) come from the table.
#include <gtest/gtest.h>

#include <set>

#include "protocol/protocol.hpp"

namespace p = nymph::protocol;
using Outcome = p::RouteMatch::Outcome;

namespace {

const p::PathParams kParams{.worker = "wrk_1", .job = "job_2", .stream = "stderr"};

}  // namespace

TEST(Routes, EveryEndpointHasExactlyOneRouteAndEveryPatternMethodPairIsUnique) {
  std::set<p::Endpoint> endpoints;
  std::set<std::pair<std::string_view, p::Method>> shapes;
  for (const auto& r : p::kRoutes) {
    EXPECT_TRUE(endpoints.insert(r.endpoint).second) << r.pattern;
    EXPECT_TRUE(shapes.insert({r.pattern, r.method}).second) << r.pattern;
    EXPECT_EQ(&p::route_of(r.endpoint), &r);
  }
  EXPECT_EQ(endpoints.size(), static_cast<std::size_t>(p::Endpoint::purge) + 1);
}

TEST(Routes, ClientPathsMatchBackToTheirEndpointAndParameters) {
  for (const auto& r : p::kRoutes) {
    auto path = p::route_path(r.endpoint, kParams);
    auto m = p::match_route(p::to_string(r.method), path);
    ASSERT_EQ(m.outcome, Outcome::found) << path;
    EXPECT_EQ(m.route->endpoint, r.endpoint) << path;
    auto has = [&](std::string_view placeholder) { return r.pattern.find(placeholder) != std::string_view::npos; };
    EXPECT_EQ(m.params.worker, has("{worker}") ? "wrk_1" : "");
    EXPECT_EQ(m.params.job, has("{job}") ? "job_2" : "");
    EXPECT_EQ(m.params.stream, has("{stream}") ? "stderr" : "");
  }
  EXPECT_EQ(p::poll_path("wrk_1"), "/v1/workers/wrk_1/poll");
  EXPECT_EQ(p::cancel_path("job_2"), "/v1/jobs/job_2/cancel");
  EXPECT_EQ(p::log_get_target("job_2", p::LogStream::out, 7, 2), "/v1/jobs/job_2/logs/stdout?offset=7&attempt=2");
}

TEST(Routes, WrongMethodListsTheAllowedOnesAndUnknownPathsAreNotFound) {
  auto m = p::match_route("DELETE", "/v1/jobs");
  EXPECT_EQ(m.outcome, Outcome::method_not_allowed);
  EXPECT_EQ(m.allowed, "GET, POST");
  EXPECT_TRUE(m.needs_token);
  auto h = p::match_route("POST", "/healthz");
  EXPECT_EQ(h.outcome, Outcome::method_not_allowed);
  EXPECT_FALSE(h.needs_token);  // a wrong method on an open endpoint is answered without a token
  for (auto path : {"/v1", "/v1/", "/v1/jobs/a/b", "/v1/workers/w/poll/x", "/v2/jobs", "/v1//jobs", "", "/"})
    EXPECT_EQ(p::match_route("GET", path).outcome == Outcome::not_found &&
                  p::match_route("POST", path).outcome == Outcome::not_found,
              true)
        << path;
}

TEST(Routes, CallerBodyAndHoldComeFromTheTable) {
  auto poll = p::match_route("POST", "/v1/workers/w/poll");
  EXPECT_EQ(poll.route->caller, p::Caller::worker);
  EXPECT_EQ(poll.route->hold, p::Hold::always);
  auto job = p::match_route("GET", "/v1/jobs/j");
  EXPECT_EQ(job.route->caller, p::Caller::admin);
  EXPECT_EQ(job.route->hold, p::Hold::with_wait_param);
  auto put = p::match_route("PUT", "/v1/jobs/j/logs/stdout");
  EXPECT_EQ(put.route->body, p::BodyKind::log_bytes);
  EXPECT_EQ(put.route->caller, p::Caller::worker);
  EXPECT_FALSE(p::match_route("GET", "/healthz").needs_token);
  EXPECT_TRUE(p::match_route("GET", "/v1/workers").needs_token);
}

TEST(Routes, DecodedSegmentsKeepAnEscapedSlashInsideTheId) {
  auto m = p::match_route("GET", std::vector<std::string>{"v1", "jobs", "a/b"});
  ASSERT_EQ(m.outcome, Outcome::found);
  EXPECT_EQ(m.params.job, "a/b");
  EXPECT_FALSE(p::is_valid_id(m.params.job));
}

TEST(Routes, LogStreamsAreProtocolNames) {
  EXPECT_EQ(p::to_string(p::LogStream::out), "stdout");
  EXPECT_EQ(p::to_string(p::LogStream::err), "stderr");
  EXPECT_EQ(p::parse_log_stream("stderr"), p::LogStream::err);
  EXPECT_FALSE(p::parse_log_stream("stdin"));
}
