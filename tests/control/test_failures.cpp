// What the real server answers when handling a request fails: a storage outage is 503 `unavailable` (clients
// retry), anything else is a bug, 500 `internal` (clients must not retry it as an outage), logged with the
// request. Both are provoked from outside, through the database and the log directory the server uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <boost/asio/io_context.hpp>

#include "control/sql.hpp"
#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
namespace sql = nymph::control::sql;
using nymph::test::ControlServer;
using nymph::test::run_coro;
using namespace std::chrono_literals;

namespace {

// A job running on a registered worker, and a client to make requests with.
class Failures : public ::testing::Test {
 protected:
  Failures() : client_(http::Client::create(ioc_.get_executor(), cp_.url()).value()) {
    p::RegisterRequest reg;
    reg.launch_id = nymph::test::fresh_ulid();
    reg.hostname = "h";
    reg.runners = {"process"};
    auto registered = send(http::Method::post, p::workers_path(), agent(), p::to_json_text(reg));
    auto reply = p::parse_as<p::RegisterResponse>(registered.body).value();
    worker_ = reply.worker_id;
    worker_token_ = reply.worker_token;
    p::JobSubmission sub;
    sub.spec.argv = std::vector<std::string>{"/bin/true"};
    auto submitted = send(http::Method::post, p::jobs_path(), admin(), p::to_json_text(sub));
    job_ = p::parse_as<p::JobInfo>(submitted.body).value().id;
    p::PollRequest poll;
    poll.free = {{"process", 1}};
    auto r = send(http::Method::post, p::poll_path(worker_), worker_token_, p::to_json_text(poll));
    lease_ = p::parse_as<p::PollResponse>(r.body).value().jobs.at(0).lease_id;
  }

  const std::string& agent() const { return cp_.agent_token(); }
  const std::string& admin() const { return cp_.admin_token(); }

  http::Response send(http::Method m, std::string target, const std::string& token, std::string body = {},
                      std::string content_type = "application/json") {
    http::Request r{m, std::move(target), std::move(body), std::move(content_type), token, 60s};
    return run_coro(ioc_, client_.request(std::move(r))).value();
  }

  http::Response event(std::int64_t seq) {
    p::EventRequest e;
    e.lease_id = lease_;
    e.seq = seq;
    e.state = p::EventState::running;
    return send(http::Method::post, p::events_path(job_), worker_token_, p::to_json_text(e));
  }

  http::Response put_log(std::string bytes) {
    return send(http::Method::put, p::log_put_target(job_, p::LogStream::out, 0, lease_), worker_token_, std::move(bytes),
                "application/octet-stream");
  }

  // The reply's status and error code, as "503 unavailable".
  static std::string outcome(const http::Response& r) {
    auto e = p::parse_error_document(r.body);
    return std::to_string(r.status) + " " + (e ? e->code : r.body.substr(0, 100));
  }

  ControlServer cp_;
  asio::io_context ioc_;
  http::Client client_;
  std::string worker_, worker_token_, job_, lease_;
};

}  // namespace

TEST_F(Failures, ABugIs500InternalLoggedWithTheRequestAndNotRetriedAsAnOutage) {
  // A row the server cannot read (edited by hand, or written by another version): handling the request
  // throws, and no retry will ever succeed.
  sql::Connection::open(cp_.db_path()).query("UPDATE jobs SET state='bogus' WHERE id=?").bind(job_).run();
  auto get = send(http::Method::get, p::job_path(job_), admin());
  EXPECT_EQ(outcome(get), "500 internal");
  EXPECT_EQ(get.body.find("bogus"), std::string::npos) << "no exception text for the client: " << get.body;
  EXPECT_EQ(outcome(event(1)), "500 internal");  // an agent's call: its classification is not transient
  std::string log = cp_.log();
  EXPECT_NE(log.find("GET " + p::job_path(job_) + ": internal error: corrupt job state 'bogus'"), std::string::npos)
      << log;
  EXPECT_NE(log.find("POST " + p::events_path(job_) + ": internal error: corrupt job state"), std::string::npos) << log;
  // The server carries on with everything else.
  EXPECT_EQ(send(http::Method::get, "/healthz", "").status, 200u);
  EXPECT_EQ(send(http::Method::get, p::jobs_path() + "?state=queued", admin()).status, 200u);
}

TEST_F(Failures, AnUnwritableLogDirectoryIs503UntilItIsFixed) {
  std::filesystem::path logs = cp_.db_path() + ".logs";
  std::ofstream(logs) << "a file where the log directory belongs";
  auto r = put_log("hello");
  EXPECT_EQ(outcome(r), "503 unavailable");
  std::string log = cp_.log();
  EXPECT_NE(log.find("PUT " + p::log_put_target(job_, p::LogStream::out, 0, lease_) + ": storage unavailable: log file"),
            std::string::npos)
      << log;
  std::filesystem::remove(logs);
  EXPECT_EQ(outcome(put_log("hello")).substr(0, 3), "200");
}

TEST_F(Failures, ALockedDatabaseIs503AfterTheBusyTimeoutThenServesAgain) {
  auto holder = sql::Connection::open(cp_.db_path());
  holder.exec("BEGIN IMMEDIATE");  // another process holds the write lock past the server's 5 s busy timeout
  EXPECT_EQ(outcome(event(1)), "503 unavailable");
  holder.exec("ROLLBACK");
  EXPECT_EQ(event(1).status, 200u);
  EXPECT_NE(cp_.log().find("POST " + p::events_path(job_) + ": storage unavailable: storage error: SQLite"),
            std::string::npos)
      << cp_.log();
}
