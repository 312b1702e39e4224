// How the agent classifies a control plane's error replies: outages are retried, bugs and refusals are not.
#include <gtest/gtest.h>

#include "agent/control_plane.hpp"

using nymph::agent::CallFailure;
using nymph::agent::classify;

namespace {

std::string error_body(const std::string& code, const std::string& extra = "") {
  return R"({"error":{"code":")" + code + R"(","message":"m")" + extra + "}}";
}

}  // namespace

TEST(ControlPlaneClassify, OutagesAreTransient) {
  EXPECT_EQ(classify(503, error_body("unavailable"), "event").kind, CallFailure::transient);
  EXPECT_EQ(classify(502, "<html>bad gateway</html>", "poll").kind, CallFailure::transient);
  EXPECT_EQ(classify(504, "", "poll").kind, CallFailure::transient);
  EXPECT_EQ(classify(429, "", "log upload").kind, CallFailure::transient);
}

TEST(ControlPlaneClassify, AServerBugIsNotRetriedAsAnOutage) {
  auto e = classify(500, error_body("internal"), "event");
  EXPECT_EQ(e.kind, CallFailure::rejected);
  EXPECT_EQ(e.message, "event: HTTP 500: m");
}

TEST(ControlPlaneClassify, ProtocolErrorsByStatusAndCode) {
  EXPECT_EQ(classify(401, error_body("unauthorized"), "poll").kind, CallFailure::unauthorized);
  EXPECT_EQ(classify(403, error_body("forbidden"), "poll").kind, CallFailure::unauthorized);
  EXPECT_EQ(classify(404, error_body("unknownWorker"), "poll").kind, CallFailure::worker_unknown);
  EXPECT_EQ(classify(404, error_body("unknownJob"), "event").kind, CallFailure::rejected);
  EXPECT_EQ(classify(409, error_body("leaseLost"), "event").kind, CallFailure::fenced);
  auto gap = classify(409, error_body("logGap", R"(,"expectedOffset":42)"), "log upload");
  EXPECT_EQ(gap.kind, CallFailure::log_gap);
  EXPECT_EQ(gap.expected_offset, 42u);
  EXPECT_EQ(classify(400, error_body("invalidField"), "event").kind, CallFailure::rejected);
}

TEST(ControlPlaneClassify, NothingMoreAfterTheFinalEventOrPastTheLogCap) {
  EXPECT_EQ(classify(413, error_body("logCapReached"), "log upload").kind, CallFailure::closed);
  EXPECT_EQ(classify(409, error_body("attemptFinished"), "log upload").kind, CallFailure::closed);
  EXPECT_EQ(classify(409, error_body("attemptFinished"), "event").kind, CallFailure::closed);
  EXPECT_EQ(classify(413, error_body("bodyTooLarge"), "log upload").kind, CallFailure::rejected);
}
