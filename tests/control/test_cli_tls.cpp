// The admin CLI against a real server (with a scripted fake agent), HTTPS with certificate verification, and
// start-up refusals.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
using nymph::test::ControlServer;
using nymph::test::run_command;
using nymph::test::run_coro;
using namespace std::chrono_literals;

namespace {

// A scripted agent on its own thread: registers, takes one job, prints `out`, reports `final` with `code`.
class FakeAgent {
 public:
  FakeAgent(const ControlServer& cp, std::string out, p::EventState final_state, std::optional<int> code)
      : thread_([this, &cp, out, final_state, code] { run(cp, out, final_state, code); }) {}
  ~FakeAgent() { thread_.join(); }
  std::string error;  // set when the script failed (read after the destructor joined)

 private:
  void run(const ControlServer& cp, std::string out, p::EventState final_state, std::optional<int> code) {
    try {
      asio::io_context ioc;
      auto client = http::Client::create(ioc.get_executor(), cp.url()).value();
      std::string credential = cp.agent_token();  // then the worker credential of the registration
      auto call = [&](http::Method m, std::string target, std::string body) {
        http::Request r{m, std::move(target), std::move(body), "application/json", credential, 60s};
        return run_coro(ioc, client.request(std::move(r)), 60s).value();
      };
      p::RegisterRequest reg;
      reg.launch_id = nymph::test::fresh_ulid();
      reg.hostname = "fake";
      reg.runners = {"process"};
      auto registered =
          p::parse_as<p::RegisterResponse>(call(http::Method::post, p::workers_path(), p::to_json_text(reg)).body).value();
      auto w = registered.worker_id;
      credential = registered.worker_token;
      p::PollRequest poll;
      poll.free = {{"process", 1}};
      p::JobAssignment job;
      for (;;) {  // held polls: returns as soon as the CLI submits
        auto r = p::parse_as<p::PollResponse>(call(http::Method::post, p::poll_path(w), p::to_json_text(poll)).body).value();
        if (!r.jobs.empty()) {
          job = r.jobs[0];
          break;
        }
      }
      auto event = [&](std::int64_t seq, p::EventState st, std::optional<int> c) {
        p::EventRequest e;
        e.lease_id = job.lease_id;
        e.seq = seq;
        e.state = st;
        e.exit_code = c;
        call(http::Method::post, p::events_path(job.job_id), p::to_json_text(e));
      };
      event(1, p::EventState::running, {});
      call(http::Method::put, p::log_put_target(job.job_id, p::LogStream::out, 0, job.lease_id), out);
      event(2, final_state, code);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  std::thread thread_;
};

std::string make_cert(const std::string& dir) {
  auto r = run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", dir + "/key.pem", "-out",
                        dir + "/cert.pem"});
  if (r.exit_code != 0) throw std::runtime_error("openssl failed: " + r.err);
  return dir + "/cert.pem";
}

}  // namespace

TEST(ControlCli, TokenCreatePrintsOnlyTheToken) {
  ControlServer cp;
  auto r = run_command({NYMPH_CONTROL_BINARY, "token", "create", "--db", cp.db_path(), "--role", "agent"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("nym_", 0), 0u);
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1);
  EXPECT_NE(run_command({NYMPH_CONTROL_BINARY, "token", "create", "--db", cp.db_path(), "--role", "root"}).exit_code, 0);
}

TEST(ControlCli, SubmitFollowStreamsLogsAndExitsWithTheJobStatus) {
  ControlServer cp({.poll_timeout = "10s"});
  std::string error;
  nymph::test::CommandOutput r;
  {
    FakeAgent agent(cp, "hello from the job\n", p::EventState::failed, 3);
    r = cp.admin({"submit", "--follow", "--env", "A=1", "--timeout", "1m", "--", "/bin/sh", "-c", "exit 3"});
  }
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "hello from the job\n");
  EXPECT_EQ(r.err.rfind("job_", 0), 0u) << r.err;  // the id goes to stderr under --follow
}

TEST(ControlCli, SubmitWaitSucceedsThenListShowLogsCancel) {
  ControlServer cp({.poll_timeout = "10s"});
  nymph::test::CommandOutput r;
  {
    FakeAgent agent(cp, std::string("bin\0ary\xff", 8), p::EventState::succeeded, 0);
    r = cp.admin({"submit", "--wait", "--max-attempts", "1", "--", "/bin/true"});
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_EQ(id.rfind("job_", 0), 0u) << r.out;

  auto jobs = cp.admin({"jobs", "--json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  auto list = p::parse_as<p::JobList>(jobs.out).value();
  ASSERT_EQ(list.jobs.size(), 1u);
  EXPECT_EQ(list.jobs[0].state, p::JobState::succeeded);
  auto table = cp.admin({"jobs", "--state", "succeeded"});
  EXPECT_NE(table.out.find(id), std::string::npos) << table.out;
  EXPECT_EQ(table.out.rfind("ID ", 0), 0u);

  auto show = cp.admin({"job", id});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("state:     succeeded"), std::string::npos) << show.out;
  auto logs = cp.admin({"logs", id});
  EXPECT_EQ(logs.out, std::string("bin\0ary\xff", 8));  // raw bytes
  auto workers = cp.admin({"workers"});
  EXPECT_NE(workers.out.find("fake"), std::string::npos) << workers.out;

  auto queued = cp.admin({"submit", "--command", "sleep 100"});
  std::string qid = queued.out.substr(0, queued.out.find('\n'));
  auto cancel = cp.admin({"cancel", qid});
  EXPECT_EQ(cancel.out, "job " + qid + " cancelled\n");
  EXPECT_EQ(cp.admin({"cancel", id}).exit_code, 1);  // finished: 409 jobFinished
  auto bad = cp.admin({"submit", "--env", "NOEQUALS", "--", "/bin/true"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--env expects KEY=VALUE"), std::string::npos) << bad.err;
  auto missing = cp.admin({"job", "job_nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("404 unknownJob"), std::string::npos) << missing.err;
}

TEST(ControlCli, RepeatableOptionsRightBeforeTheArgvSeparator) {
  ControlServer cp;
  auto r = cp.admin({"submit", "--runner", "slurm", "--env", "A=1", "--require-tag", "site=x", "--slurm-option",
                     "partition=debug", "--slurm-option", "time=5", "--", "/bin/sh", "-c", "echo hi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto show = cp.admin({"job", r.out.substr(0, r.out.find('\n')), "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  auto job = p::parse_as<p::JobInfo>(show.out).value();
  EXPECT_EQ(job.spec.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(job.spec.env.at("A"), "1");
  EXPECT_EQ(boost::json::serialize(job.spec.run_config), R"({"slurm":{"partition":"debug","time":"5"}})");
}

TEST(ControlCli, TargetFromEnvironmentAndConfigFileNeverFromArgv) {
  ControlServer cp;
  // No --token option exists: a token value cannot be passed on the command line.
  auto r = run_command({NYMPH_CONTROL_BINARY, "jobs", "--token", cp.admin_token()});
  EXPECT_NE(r.exit_code, 0);
  std::string config = cp.dir() + "/control.toml";
  std::ofstream(config) << "url = \"" << cp.url() << "\"\ntoken_file = \"" << cp.admin_token_file() << "\"\n";
  auto via_config = run_command({NYMPH_CONTROL_BINARY, "jobs", "--json", "--config", config});
  EXPECT_EQ(via_config.exit_code, 0) << via_config.err;
  EXPECT_EQ(via_config.out, "{\"jobs\":[]}\n");
  auto via_env = run_command({"env", "NYMPH_CONTROL_URL=" + cp.url(), "NYMPH_CONTROL_TOKEN_FILE=" + cp.admin_token_file(),
                              NYMPH_CONTROL_BINARY, "workers", "--json"});
  EXPECT_EQ(via_env.exit_code, 0) << via_env.err;
  auto none = run_command({"env", "-u", "NYMPH_CONTROL_TOKEN_FILE", "HOME=" + cp.dir(), NYMPH_CONTROL_BINARY, "jobs"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("no admin token"), std::string::npos) << none.err;
}

TEST(ControlTls, HttpsVerifiesTheServer) {
  ControlServer plain;  // only for a temporary directory
  std::string cert = make_cert(plain.dir());
  ControlServer cp({.extra_args = {"--tls-cert", cert, "--tls-key", plain.dir() + "/key.pem"}});
  ASSERT_EQ(cp.url().rfind("https://127.0.0.1:", 0), 0u) << cp.url();
  asio::io_context ioc;
  http::ClientConfig trusted;
  trusted.ca_file = cert;
  auto ok = http::Client::create(ioc.get_executor(), cp.url(), trusted).value();
  auto health = run_coro(ioc, ok.request({http::Method::get, "/healthz", "", "", "", 10s}));
  ASSERT_TRUE(health) << health.error().message;
  EXPECT_EQ(health->status, 200u);
  // A host name goes through the DNS pool, SNI and host-name verification.
  auto by_name = http::Client::create(ioc.get_executor(), "https://localhost:" + std::to_string(cp.port()), trusted).value();
  auto named = run_coro(ioc, by_name.request({http::Method::get, "/healthz", "", "", "", 10s}));
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(named->status, 200u);
  auto untrusted = http::Client::create(ioc.get_executor(), cp.url()).value();
  auto refused = run_coro(ioc, untrusted.request({http::Method::get, "/healthz", "", "", "", 10s}));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("TLS handshake"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("certificate"), std::string::npos) << refused.error().message;
  auto cli = run_command({NYMPH_CONTROL_BINARY, "jobs", "--server", cp.url(), "--token-file", cp.admin_token_file(),
                          "--ca-file", cert});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
}

TEST(ControlStartup, RefusesPlainHttpOffLoopbackAndBadOptions) {
  ControlServer cp;
  auto r = run_command({NYMPH_CONTROL_BINARY, "serve", "--listen", "0.0.0.0:0", "--db", cp.dir() + "/x.db"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--allow-insecure-remote"), std::string::npos) << r.err;
  auto bad = run_command({NYMPH_CONTROL_BINARY, "serve", "--listen", "127.0.0.1:0", "--db", cp.dir() + "/x.db",
                          "--poll-timeout", "soon"});
  EXPECT_NE(bad.exit_code, 0);
  auto no_logs = run_command({NYMPH_CONTROL_BINARY, "serve", "--listen", "127.0.0.1:0", "--db", cp.dir() + "/x.db",
                              "--max-log-bytes-per-job", "0"});
  EXPECT_NE(no_logs.exit_code, 0);
  EXPECT_NE(no_logs.err.find("--max-log-bytes-per-job must be > 0"), std::string::npos) << no_logs.err;
  auto cert = run_command({NYMPH_CONTROL_BINARY, "serve", "--listen", "127.0.0.1:0", "--db", cp.dir() + "/x.db",
                           "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"});
  EXPECT_NE(cert.exit_code, 0);
  EXPECT_NE(cert.err.find("cannot load TLS certificate"), std::string::npos) << cert.err;
  auto in_use = run_command({NYMPH_CONTROL_BINARY, "serve", "--listen", "127.0.0.1:" + std::to_string(cp.port()), "--db",
                             cp.dir() + "/y.db"});
  EXPECT_NE(in_use.exit_code, 0);
  EXPECT_NE(in_use.err.find("cannot listen"), std::string::npos) << in_use.err;
}

TEST(ControlStartup, SigtermShutsDownCleanly) {
  ControlServer cp;
  EXPECT_EQ(cp.stop(), 0);
  EXPECT_NE(cp.log().find("shutting down"), std::string::npos) << cp.log();
}
