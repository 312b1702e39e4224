// Wire types: JSON round trips, readable decode errors, limits, times and ids.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "protocol/protocol.hpp"
#include "tests/support/ids.hpp"

namespace p = nymph::protocol;
namespace json = boost::json;

TEST(Protocol, RegisterRequestRoundTrip) {
  p::RegisterRequest r;
  r.launch_id = nymph::test::fresh_ulid();
  r.hostname = "login1";
  r.pid = 42;
  r.runners = {"process", "slurm"};
  r.tags = {{"host", "slurm"}};
  r.capacity = {{"process", 4}};
  r.profiles = {"smoke"};
  r.slurm = p::SlurmAllocation{"123", "debug", std::string("2026-01-01T00:00:00.000Z")};
  r.running = {{"job_1", "lse_1"}};
  auto back = p::parse_as<p::RegisterRequest>(p::to_json_text(r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->launch_id, r.launch_id);
  EXPECT_EQ(back->runners, r.runners);
  EXPECT_EQ(back->tags, r.tags);
  EXPECT_EQ(back->capacity, r.capacity);
  ASSERT_TRUE(back->slurm);
  EXPECT_EQ(back->slurm->partition, "debug");
  ASSERT_EQ(back->running.size(), 1u);
  EXPECT_EQ(back->running[0].lease_id, "lse_1");
}

TEST(Protocol, PollResponseUsesCamelCaseAndExplicitNullDirective) {
  p::PollResponse r;
  p::JobAssignment a;
  a.job_id = "job_1";
  a.lease_id = "lse_1";
  a.runner = "process";
  a.spec.argv = std::vector<std::string>{"/bin/echo", "hi"};
  a.spec.timeout_s = 30;
  r.jobs.push_back(a);
  r.cancel.push_back({"job_2", "lse_2", p::CancelReason::lease_lost});
  std::string text = p::to_json_text(r);
  EXPECT_NE(text.find("\"jobId\":\"job_1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"timeoutS\":30"), std::string::npos) << text;  // whole numbers as integers
  EXPECT_NE(text.find("\"reason\":\"leaseLost\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"directive\":null"), std::string::npos) << text;
  auto back = p::parse_as<p::PollResponse>(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->cancel[0].reason, p::CancelReason::lease_lost);
  EXPECT_FALSE(back->directive);
  EXPECT_EQ(*back->jobs[0].spec.argv, (std::vector<std::string>{"/bin/echo", "hi"}));
}

TEST(Protocol, SubmissionFlattensSpec) {
  auto s = p::parse_as<p::JobSubmission>(
      R"({"runner":"slurm","kind":"training","payload":{"profile":"smoke","parameters":{"m":"x"}},)"
      R"("runConfig":{"slurm":{"partition":"debug"}},"requiredTags":{"host":"slurm"},"maxAttempts":3})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->runner, "slurm");
  ASSERT_TRUE(s->spec.payload);
  EXPECT_EQ(s->spec.payload->profile, "smoke");
  EXPECT_EQ(s->max_attempts, 3);
  EXPECT_TRUE(s->spec.run_config.contains("slurm"));
  std::string text = p::to_json_text(*s);
  EXPECT_EQ(text.find("\"spec\""), std::string::npos) << text;
}

TEST(Protocol, UnknownKeysIgnoredNullIsAbsent) {
  auto e = p::parse_as<p::EventRequest>(R"({"leaseId":"l","seq":1,"state":"running","exitCode":null,"future":[1]})");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_FALSE(e->exit_code);
}

TEST(Protocol, DecodeErrorsNameTheField) {
  auto a = p::parse_as<p::JobSubmission>(R"({"argv":["ok", 3]})");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "field 'argv[1]': expected a string");
  auto b = p::parse_as<p::EventRequest>(R"({"leaseId":"l","state":"running"})");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message, "field 'seq': is required");
  auto c = p::parse_as<p::EventRequest>(R"({"leaseId":"l","seq":1.5,"state":"running"})");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "field 'seq': expected an integer");
  auto d = p::parse_as<p::EventRequest>(R"({"leaseId":"l","seq":1,"state":"exploded"})");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("unknown value 'exploded'"), std::string::npos);
  auto e = p::parse_as<p::PollRequest>(R"([1,2])");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message, "body: expected an object");
  auto f = p::parse_as<p::PollRequest>(R"({"free":{"process":99999999999}})");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message, "field 'free.process': integer out of range");
}

TEST(Protocol, TryValueToWorks) {
  auto v = json::parse(R"({"jobId":"j","leaseId":"l"})");
  auto r = json::try_value_to<p::AttemptRef>(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->job_id, "j");
  EXPECT_FALSE(json::try_value_to<p::AttemptRef>(json::parse("{}")));
}

TEST(Protocol, LimitsAreEnforced) {
  std::string deep(40, '[');
  deep += std::string(40, ']');
  auto a = p::parse_json(deep);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("deeper than 32"), std::string::npos);
  p::Limits small;
  small.max_string = 8;
  small.max_array = 3;
  EXPECT_FALSE(p::parse_json(R"(["123456789"])", small));
  EXPECT_FALSE(p::parse_json(R"([1,2,3,4])", small));
  EXPECT_TRUE(p::parse_json(R"([1,2,3])", small));
  EXPECT_FALSE(p::parse_json("{\"a\":1,}"));  // no trailing commas
  EXPECT_FALSE(p::parse_json("\"\xff\""));    // invalid UTF-8
}

TEST(Protocol, ErrorDocument) {
  std::string doc = p::error_document({"logGap", "gap", 12});
  EXPECT_EQ(doc, R"({"error":{"code":"logGap","message":"gap","expectedOffset":12}})");
  auto e = p::parse_error_document(doc);
  ASSERT_TRUE(e);
  EXPECT_EQ(*e->expected_offset, 12u);
  EXPECT_FALSE(p::parse_error_document("not json"));
}

TEST(Protocol, IdsAndUlids) {
  std::string u = nymph::test::fresh_ulid();
  EXPECT_EQ(u.size(), 26u);
  EXPECT_TRUE(p::is_valid_id(u));
  EXPECT_NE(u, nymph::test::fresh_ulid());
  EXPECT_FALSE(p::is_valid_id(""));
  EXPECT_FALSE(p::is_valid_id("a/b"));
  EXPECT_FALSE(p::is_valid_id(std::string(129, 'a')));
  EXPECT_EQ(p::log_put_target("job_1", p::LogStream::out, 5, "lse_1"), "/v1/jobs/job_1/logs/stdout?offset=5&lease=lse_1");
}

TEST(Protocol, CheckIdNamesTheFieldAndQuotesTheValueSafely) {
  EXPECT_TRUE(p::check_id("jobId", "job_1"));
  auto bad = p::check_id("jobId", "job\r\nX-Injected: yes");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            R"(field 'jobId': 'job\r\nX-Injected: yes' is not an id (1-128 characters of [0-9A-Za-z_-]))");
  EXPECT_NE(p::check_id("workerId", std::string(1000, 'a')).error().message.find("aaa…(1000 bytes)'"),
            std::string::npos);
}

namespace {

// Decodes `text` as T and encodes it again: a canonical document (keys in table order, optionals present)
// comes back byte for byte, which checks each struct's one field table in both directions.
template <class T>
std::string reencode(std::string_view text) {
  auto x = p::parse_as<T>(text);
  EXPECT_TRUE(x) << x.error().message;
  return x ? p::to_json_text(*x) : std::string();
}

}  // namespace

TEST(Protocol, CanonicalDocumentsSurviveDecodeThenEncode) {
  const std::string assignment =
      R"({"jobId":"job_1","attempt":2,"leaseId":"lse_1","runner":"slurm","kind":"training",)"
      R"("spec":{"env":{"A":"1"},"timeoutS":90,"runConfig":{"slurm":{"qos":"q"}},)"
      R"("payload":{"profile":"smoke","parameters":{"m":"x"}}}})";
  EXPECT_EQ(reencode<p::JobAssignment>(assignment), assignment);
  const std::string event =
      R"({"leaseId":"l","seq":3,"state":"failed","exitCode":3,"signal":9,"message":"m","slurmJobId":"7",)"
      R"("result":{"k":[1,2]},"at":"2026-01-01T00:00:00.000Z","takeNext":true})";
  EXPECT_EQ(reencode<p::EventRequest>(event), event);
  const std::string event_reply =
      R"({"duplicate":false,"jobState":"succeeded","jobs":[)" + assignment + R"(],"slotHeld":false})";
  EXPECT_EQ(reencode<p::EventResponse>(event_reply), event_reply);
  const std::string attempt =
      R"({"attempt":1,"leaseId":"l","workerId":"w","state":"lost","exitCode":1,"signal":2,"message":"m",)"
      R"("slurmJobId":"9","assignedAt":"a","finishedAt":"f"})";
  EXPECT_EQ(reencode<p::AttemptInfo>(attempt), attempt);
  const std::string job =
      R"({"id":"j","state":"succeeded","runner":"process","kind":"command","spec":{"argv":["x"],"env":{},)"
      R"("runConfig":{}},"requiredTags":{"t":"v"},"maxAttempts":2,"attempt":1,"workerId":"w",)"
      R"("cancelRequested":false,"exitCode":0,"message":"ok","result":null,"createdAt":"c","updatedAt":"u",)"
      R"("finishedAt":"f","attempts":[)" + attempt + "]}";
  // result:null decodes as "no result" and is then omitted.
  std::string job_out = job;
  job_out.replace(job_out.find(R"("result":null,)"), 14, "");
  EXPECT_EQ(reencode<p::JobInfo>(job), job_out);
  const std::string worker =
      R"({"id":"w","launchId":"L","label":"l","hostname":"h","pid":1,"version":"v","protocol":1,)"
      R"("backend":"slurm","runners":["slurm"],"tags":{},"capacity":{"slurm":2},"profiles":[],)"
      R"("slurm":{"jobId":"5","partition":"p","endTime":"e"},"generation":1,"status":"gone",)"
      R"("exitReason":"walltime","exitMessage":"","directive":null,"registeredAt":"r","lastSeen":"s","runningJobs":[]})";
  EXPECT_EQ(reencode<p::WorkerInfo>(worker), worker);
  const std::string registered =
      R"({"workerId":"w","pollTimeoutS":30,"leaseTtlS":90,"staleAfterS":60,"protocol":1,)"
      R"("cancel":[{"jobId":"j","leaseId":"l","reason":"user"}]})";
  EXPECT_EQ(reencode<p::RegisterResponse>(registered), registered);
}

TEST(Protocol, EmptyAttemptsAndEventsAreOmittedAndEnumErrorsListEveryName) {
  p::JobInfo j;
  j.id = "j";
  std::string text = p::to_json_text(j);
  EXPECT_EQ(text.find("attempts"), std::string::npos) << text;
  EXPECT_EQ(text.find("events"), std::string::npos) << text;
  auto bad = p::parse_as<p::ExitRequest>(R"({"exitReason":"bored"})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "field 'exitReason': unknown value 'bored' (expected sigterm, sigint, killed, walltime, idle or error)");
  auto missing = p::parse_as<p::JobAssignment>(R"({"jobId":"j","attempt":1,"leaseId":"l","runner":"r","kind":"k"})");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "field 'spec': is required");
}

TEST(Protocol, SeamFieldsOfIssue15AreOptionalAndRoundTrip) {
  // Absent in a v1 document of before: defaults.
  auto plain = p::parse_as<p::RegisterRequest>(R"({"launchId":"L1","hostname":"h","runners":["process"]})");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->identity);
  p::RegisterRequest r = *plain;
  r.identity = "alice@cluster-a";
  auto text = p::to_json_text(r);
  EXPECT_NE(text.find(R"("identity":"alice@cluster-a")"), std::string::npos) << text;
  EXPECT_EQ(p::parse_as<p::RegisterRequest>(text)->identity, "alice@cluster-a");

  p::ErrorBody e{"outOfOrder", "behind", std::nullopt, 5};
  EXPECT_EQ(p::error_document(e), R"({"error":{"code":"outOfOrder","message":"behind","lastSeq":5}})");
  EXPECT_EQ(p::parse_error_document(p::error_document(e))->last_seq, 5);

  p::RegisterResponse reg;
  reg.worker_id = "wrk_1";
  EXPECT_EQ(p::to_json_text(reg).find("runnerLeaseTtlS"), std::string::npos) << "omitted when empty";
  reg.runner_lease_ttl_s = {{"slurm", 1800}};
  auto reg_text = p::to_json_text(reg);
  EXPECT_NE(reg_text.find(R"("runnerLeaseTtlS":{"slurm":1800})"), std::string::npos) << reg_text;
  EXPECT_EQ(p::parse_as<p::RegisterResponse>(reg_text)->runner_lease_ttl_s, reg.runner_lease_ttl_s);

  auto a = p::parse_as<p::JobAssignment>(
      R"({"jobId":"j","attempt":1,"leaseId":"l","runner":"slurm","kind":"command","spec":{"argv":["x"]}})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_FALSE(a->lease_ttl_s);
  a->lease_ttl_s = 1800;
  EXPECT_NE(p::to_json_text(*a).find(R"("leaseTtlS":1800)"), std::string::npos);
}

TEST(Protocol, EventReasonsHaveCamelCaseWireNames) {
  p::EventRequest e;
  e.lease_id = "lse_1";
  e.seq = 1;
  e.state = p::EventState::lost;
  for (auto [r, name] : {std::pair{p::EventReason::worker_stopping, "workerStopping"},
                         std::pair{p::EventReason::lease_expired, "leaseExpired"},
                         std::pair{p::EventReason::over_capacity, "overCapacity"}}) {
    e.reason = r;
    auto text = p::to_json_text(e);
    EXPECT_NE(text.find(std::string(R"("reason":")") + name + "\""), std::string::npos) << text;
    EXPECT_EQ(p::parse_as<p::EventRequest>(text)->reason, r);
    EXPECT_EQ(p::parse_event_reason(name), r);
  }
  auto bad = p::parse_as<p::EventRequest>(R"({"leaseId":"l","seq":1,"state":"lost","reason":"tired"})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("workerStopping, leaseExpired or overCapacity"), std::string::npos)
      << bad.error().message;
}

// Found by fuzz/protocol_requests: {"olderThanS":255952555555204566} decoded to a double that was re-encoded as
// 2.5595255555520458E17, which Boost.JSON 1.81 does not read back as the same double. Whole numbers an integer
// type holds are written as integers, which it reads exactly.
TEST(Protocol, WholeDoublesRoundTripExactly) {
  for (double x : {255952555555204566.0, 9.3e15, 1.8e19, -9.2e18, 30.0}) {
    nymph::protocol::PurgeRequest r{x};
    auto text = nymph::protocol::to_json_text(r);
    auto back = nymph::protocol::parse_as<nymph::protocol::PurgeRequest>(text);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(back->older_than_s, x) << text;
    EXPECT_EQ(nymph::protocol::to_json_text(*back), text);
  }
  // Past the integer types a number would be re-sent as a double Boost.JSON 1.81 may read back differently
  // (found by fuzz_protocol_requests: {"olderThanS":1115901511111111111111132}): refused.
  for (const char* text : {R"({"olderThanS":1115901511111111111111132})", R"({"olderThanS":-1e19})",
                           R"({"olderThanS":1.8446744073709552e19})"})
    EXPECT_FALSE(nymph::protocol::parse_as<nymph::protocol::PurgeRequest>(text)) << text;
}
