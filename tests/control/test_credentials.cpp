// Credentials against a real server (docs/protocol.md section 2): an agent token only registers; each worker
// acts with the credential its registration issued, for itself only; scoped tokens register only inside
// their scope; a revoked token and its workers are refused from the next request on.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
using nymph::test::ControlServer;
using nymph::test::run_coro;
using namespace std::chrono_literals;

namespace {

// One worker as an agent sees it: its id and credential.
struct Worker {
  std::string id, credential;
};

class Credentials : public ::testing::Test {
 protected:
  Credentials() : client_(http::Client::create(ioc_.get_executor(), cp_.url()).value()) {}

  http::Response send(http::Method m, std::string target, const std::string& token, std::string body = {}) {
    http::Request r{m, std::move(target), std::move(body), "application/json", token, 60s};
    return run_coro(ioc_, client_.request(std::move(r))).value();
  }

  // "STATUS code" of a reply, e.g. "403 forbidden" (just "200" for a success).
  static std::string outcome(const http::Response& r) {
    auto e = p::parse_error_document(r.body);
    return std::to_string(r.status) + (e ? " " + e->code : "");
  }

  static p::RegisterRequest registration(const std::string& launch, std::map<std::string, std::string> tags = {},
                                         std::vector<std::string> runners = {"process"}) {
    p::RegisterRequest reg;
    reg.launch_id = launch;
    reg.hostname = "h";
    reg.label = "label-" + launch.substr(0, 6);
    reg.runners = std::move(runners);
    reg.tags = std::move(tags);
    return reg;
  }

  Worker register_with(const std::string& agent_token, const p::RegisterRequest& reg) {
    auto r = send(http::Method::post, p::workers_path(), agent_token, p::to_json_text(reg));
    if (r.status != 201 && r.status != 200) throw std::runtime_error("register: " + r.body);
    auto reply = p::parse_as<p::RegisterResponse>(r.body).value();
    EXPECT_EQ(reply.worker_token.rfind("nyw_", 0), 0u);
    return {reply.worker_id, reply.worker_token};
  }

  // Submits /bin/true and has `w` take it; returns {job id, lease id}.
  std::pair<std::string, std::string> running_job(const Worker& w) {
    p::JobSubmission s;
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    auto job = p::parse_as<p::JobInfo>(send(http::Method::post, p::jobs_path(), cp_.admin_token(), p::to_json_text(s)).body)
                   .value()
                   .id;
    p::PollRequest poll;
    poll.free = {{"process", 1}};
    auto r = send(http::Method::post, p::poll_path(w.id), w.credential, p::to_json_text(poll));
    auto lease = p::parse_as<p::PollResponse>(r.body).value().jobs.at(0).lease_id;
    return {job, lease};
  }

  p::WorkerInfo worker_info(const std::string& id) {
    auto list = p::parse_as<p::WorkerList>(send(http::Method::get, p::workers_path(), cp_.admin_token()).body).value();
    for (auto& w : list.workers)
      if (w.id == id) return w;
    throw std::runtime_error("no worker " + id);
  }

  p::JobInfo job_info(const std::string& id) {
    return p::parse_as<p::JobInfo>(send(http::Method::get, p::job_path(id), cp_.admin_token()).body).value();
  }

  static std::string event_body(const std::string& lease, std::int64_t seq, p::EventState st) {
    p::EventRequest e;
    e.lease_id = lease;
    e.seq = seq;
    e.state = st;
    e.exit_code = 0;
    return p::to_json_text(e);
  }

  static std::string poll_body() { return R"({"free":{"process":1}})"; }

  ControlServer cp_{{.poll_timeout = "200ms"}};
  asio::io_context ioc_;
  http::Client client_;
};

}  // namespace

TEST_F(Credentials, AnotherAgentsCredentialCannotReadChangeOrEndAWorker) {
  std::string token_b = cp_.create_token("agent", {"--name", "b"});
  std::string launch_a = nymph::test::fresh_ulid();
  Worker a = register_with(cp_.agent_token(), registration(launch_a));
  Worker b = register_with(token_b, registration(nymph::test::fresh_ulid()));
  auto [job, lease] = running_job(a);

  // B's worker credential on A's worker and A's job: refused, nothing changes.
  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(a.id), b.credential, poll_body())), "403 forbidden");
  EXPECT_EQ(outcome(send(http::Method::post, p::events_path(job), b.credential,
                         event_body(lease, 1, p::EventState::succeeded))),
            "403 forbidden");
  auto log = send(http::Method::put, p::log_put_target(job, p::LogStream::out, 0, lease), b.credential, "forged");
  EXPECT_EQ(outcome(log), "403 forbidden");
  EXPECT_EQ(outcome(send(http::Method::post, p::exit_path(a.id), b.credential, R"({"exitReason":"killed"})")),
            "403 forbidden");
  // Agent tokens (B's, and A's own) only register: the worker endpoints need the worker credential.
  for (const std::string& token : {token_b, cp_.agent_token()})
    EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(a.id), token, poll_body())), "403 forbidden");
  // B cannot take over A's launch by re-registering it.
  auto hijack = registration(launch_a);
  hijack.label = "hijacked";
  EXPECT_EQ(outcome(send(http::Method::post, p::workers_path(), token_b, p::to_json_text(hijack))), "403 forbidden");

  auto info = worker_info(a.id);
  EXPECT_EQ(info.status, p::WorkerStatus::active);
  EXPECT_EQ(info.label, registration(launch_a).label);
  EXPECT_EQ(job_info(job).state, p::JobState::running);
  auto stored = send(http::Method::get, p::log_get_target(job, p::LogStream::out, 0), cp_.admin_token());
  EXPECT_EQ(stored.body, "");
  // A itself still works.
  EXPECT_EQ(outcome(send(http::Method::post, p::events_path(job), a.credential,
                         event_body(lease, 1, p::EventState::succeeded))),
            "200");
}

TEST_F(Credentials, ReRegistrationReplacesTheWorkersCredential) {
  auto reg = registration(nymph::test::fresh_ulid());
  Worker first = register_with(cp_.agent_token(), reg);
  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(first.id), first.credential, poll_body())), "200");
  Worker second = register_with(cp_.agent_token(), reg);
  EXPECT_EQ(second.id, first.id);
  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(first.id), first.credential, poll_body())), "401 unauthorized");
  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(second.id), second.credential, poll_body())), "200");
}

TEST_F(Credentials, AScopedTokenRegistersOnlyInsideItsScope) {
  std::string scoped = cp_.create_token("agent", {"--name", "cluster-a", "--tag", "cluster=a", "--runner", "process"});
  auto refused = [&](std::map<std::string, std::string> tags, std::vector<std::string> runners) {
    auto reg = registration(nymph::test::fresh_ulid(), std::move(tags), std::move(runners));
    return outcome(send(http::Method::post, p::workers_path(), scoped, p::to_json_text(reg)));
  };
  EXPECT_EQ(refused({{"cluster", "b"}}, {"process"}), "403 outOfScope");
  EXPECT_EQ(refused({}, {"process"}), "403 outOfScope");
  EXPECT_EQ(refused({{"cluster", "a"}}, {"process", "slurm"}), "403 outOfScope");
  Worker ok = register_with(scoped, registration(nymph::test::fresh_ulid(), {{"cluster", "a"}, {"gpu", "1"}}));
  EXPECT_EQ(worker_info(ok.id).tags.at("cluster"), "a");
}

TEST_F(Credentials, RevocationTakesEffectAtOnceAndEndsTheTokensWorkers) {
  std::string doomed = cp_.create_token("agent", {"--name", "doomed"});
  Worker w = register_with(doomed, registration(nymph::test::fresh_ulid()));
  Worker other = register_with(cp_.agent_token(), registration(nymph::test::fresh_ulid()));
  // Both credentials are cached by the server now; revocation must reach the cache.
  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(w.id), w.credential, poll_body())), "200");

  auto list = cp_.admin({"token", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find(doomed), std::string::npos) << "a secret in token list";
  EXPECT_NE(list.out.find(R"("name":"doomed")"), std::string::npos) << list.out;

  auto revoked = cp_.admin({"token", "revoke", "doomed"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_NE(revoked.out.find(w.id), std::string::npos) << revoked.out;

  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(w.id), w.credential, poll_body())), "401 revoked");
  auto again = registration(nymph::test::fresh_ulid());
  EXPECT_EQ(outcome(send(http::Method::post, p::workers_path(), doomed, p::to_json_text(again))), "401 revoked");
  auto ended = worker_info(w.id);
  EXPECT_EQ(ended.status, p::WorkerStatus::gone);
  EXPECT_EQ(ended.exit_reason, p::ExitReason::error);
  EXPECT_NE(ended.exit_message.find("revoked"), std::string::npos) << ended.exit_message;
  // Other tokens and their workers carry on.
  EXPECT_EQ(outcome(send(http::Method::post, p::poll_path(other.id), other.credential, poll_body())), "200");
  EXPECT_EQ(worker_info(other.id).status, p::WorkerStatus::active);

  auto after = p::parse_as<p::TokenList>(cp_.admin({"token", "list", "--json"}).out).value();
  int revoked_rows = 0;
  for (const auto& t : after.tokens) {
    if (t.name != "doomed") continue;
    ++revoked_rows;
    EXPECT_TRUE(t.revoked_at);
    EXPECT_TRUE(t.last_used_at);
  }
  EXPECT_EQ(revoked_rows, 1);
  EXPECT_NE(cp_.admin({"token", "revoke", "nobody"}).exit_code, 0);
}
