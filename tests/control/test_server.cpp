// The real nymph-control binary over loopback with the real nymph::http client and a real SQLite file.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
using nymph::test::ControlServer;
using nymph::test::ControlServerOptions;
using nymph::test::run_coro;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;

namespace {

// A client of one ControlServer with helpers for the protocol calls. Every call runs under run_coro.
class Api {
 public:
  explicit Api(const ControlServer& cp, http::ClientConfig cfg = {})
      : cp_(cp), client_(http::Client::create(ioc_.get_executor(), cp.url(), cfg).value()) {}

  asio::io_context& ioc() { return ioc_; }
  http::Client& client() { return client_; }
  const std::string& agent() const { return cp_.agent_token(); }
  const std::string& admin() const { return cp_.admin_token(); }
  // The worker credential issued to `worker` at its last registration here (the agent token for an unknown id).
  const std::string& credential(const std::string& worker) const {
    auto it = credentials_.workers.find(worker);
    return it == credentials_.workers.end() ? agent() : it->second;
  }
  // Keeps the credential a registration reply issued.
  void remember(const p::RegisterResponse& r) { credentials_.workers[r.worker_id] = r.worker_token; }
  // The worker credentials and leases this client saw, to carry over to another client (after a restart).
  struct Credentials {
    std::map<std::string, std::string> workers;  // worker id -> its credential
    std::map<std::string, std::string> leases;   // lease id -> the worker it was handed to
  };
  const Credentials& credentials() const { return credentials_; }
  void adopt(Credentials c) { credentials_ = std::move(c); }
  // The credential of the worker that received `lease` in a poll here.
  const std::string& lease_credential(const std::string& lease) const {
    auto it = credentials_.leases.find(lease);
    return it == credentials_.leases.end() ? agent() : credential(it->second);
  }

  static http::Request req(http::Method m, std::string target, std::string token, std::string body = {}) {
    http::Request r;
    r.method = m;
    r.target = std::move(target);
    r.bearer_token = std::move(token);
    r.body = std::move(body);
    r.timeout = 60s;
    return r;
  }

  http::Response call(http::Method m, std::string target, std::string token, std::string body = {}) {
    auto r = run_coro(ioc_, client_.request(req(m, std::move(target), std::move(token), std::move(body))));
    if (!r) throw std::runtime_error(r.error().message);
    return std::move(*r);
  }

  template <class T>
  T ok(unsigned status, http::Method m, std::string target, std::string token, std::string body = {}) {
    auto r = call(m, target, token, std::move(body));
    if (r.status != status)
      throw std::runtime_error(target + ": expected " + std::to_string(status) + ", got " + std::to_string(r.status) +
                               " " + r.body);
    return p::parse_as<T>(r.body).value();
  }

  std::string register_worker(const std::string& launch, std::vector<std::string> runners = {"process"}) {
    p::RegisterRequest r;
    r.launch_id = launch;
    r.hostname = "test-host";
    r.label = "test";
    r.runners = std::move(runners);
    r.capacity = {{"process", 4}};
    auto res = call(http::Method::post, p::workers_path(), agent(), p::to_json_text(r));
    auto reply = p::parse_as<p::RegisterResponse>(res.body).value();
    remember(reply);
    return reply.worker_id;
  }

  std::string submit(std::vector<std::string> argv = {"/bin/true"}, int max_attempts = 2) {
    p::JobSubmission s;
    s.spec.argv = std::move(argv);
    s.max_attempts = max_attempts;
    return ok<p::JobInfo>(201, http::Method::post, p::jobs_path(), admin(), p::to_json_text(s)).id;
  }

  static std::string poll_body(int free, std::vector<p::AttemptRef> running = {}, bool draining = false) {
    p::PollRequest r;
    r.free = {{"process", free}};
    r.running = std::move(running);
    r.draining = draining;
    return p::to_json_text(r);
  }

  p::PollResponse poll(const std::string& w, int free, std::vector<p::AttemptRef> running = {}, bool draining = false) {
    auto reply = ok<p::PollResponse>(200, http::Method::post, p::poll_path(w), credential(w),
                                     poll_body(free, running, draining));
    for (const auto& j : reply.jobs) credentials_.leases[j.lease_id] = w;
    return reply;
  }

  http::Response event(const std::string& job, const std::string& lease, std::int64_t seq, p::EventState st,
                       std::optional<int> code = {}) {
    p::EventRequest e;
    e.lease_id = lease;
    e.seq = seq;
    e.state = st;
    e.exit_code = code;
    e.at = p::format_time(std::chrono::system_clock::now());
    return call(http::Method::post, p::events_path(job), lease_credential(lease), p::to_json_text(e));
  }

  http::Response put_log(const std::string& job, const std::string& lease, std::uint64_t offset, std::string bytes,
                         p::LogStream stream = p::LogStream::out) {
    auto r = req(http::Method::put, p::log_put_target(job, stream, offset, lease), lease_credential(lease),
                 std::move(bytes));
    r.content_type = "application/octet-stream";
    auto res = run_coro(ioc_, client_.request(std::move(r)));
    return res.value();
  }

  p::JobInfo job(const std::string& id) { return ok<p::JobInfo>(200, http::Method::get, p::job_path(id), admin()); }

  p::WorkerInfo worker(const std::string& id) {
    for (auto& w : ok<p::WorkerList>(200, http::Method::get, p::workers_path(), admin()).workers)
      if (w.id == id) return w;
    throw std::runtime_error("no worker " + id);
  }

  int held_polls() {
    auto m = call(http::Method::get, "/metrics", "").body;
    auto at = m.find("\nnymph_held_polls ");
    return std::stoi(m.substr(at + 18));
  }

  // submit() from a coroutine: queues a /bin/true job and returns its id.
  asio::awaitable<std::string> submit_async() {
    p::JobSubmission s;
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    auto r = co_await client_.request(req(http::Method::post, p::jobs_path(), admin(), p::to_json_text(s)));
    co_return p::parse_as<p::JobInfo>(r.value().body).value().id;
  }

  // Reports, as the worker holding `credential`, that `job`'s attempt under `lease` succeeded (its first event),
  // from a coroutine; returns the HTTP status.
  asio::awaitable<unsigned> succeed_async(const std::string& job, const std::string& lease,
                                          const std::string& credential) {
    p::EventRequest e{.lease_id = lease, .seq = 1, .state = p::EventState::succeeded, .exit_code = 0};
    e.at = p::format_time(std::chrono::system_clock::now());
    auto r = co_await client_.request(
        req(http::Method::post, p::events_path(job), credential, p::to_json_text(e)));
    co_return r.value().status;
  }

  // Reports `job`'s attempt under `lease` succeeded (event `seq`) offering its slot (takeNext), as its worker,
  // from a coroutine; returns the reply (throws unless 200).
  asio::awaitable<p::EventResponse> succeed_taking_next_async(std::string job, std::string lease,
                                                              std::int64_t seq = 1) {
    p::EventRequest e{.lease_id = lease, .seq = seq, .state = p::EventState::succeeded, .exit_code = 0};
    e.take_next = true;
    auto r = co_await client_.request(
        req(http::Method::post, p::events_path(job), lease_credential(lease), p::to_json_text(e)));
    if (!r || r->status != 200) throw std::runtime_error("event: " + (r ? r->body : r.error().message));
    auto reply = p::parse_as<p::EventResponse>(r->body).value();
    for (const auto& j : reply.jobs) credentials_.leases[j.lease_id] = credentials_.leases[lease];
    co_return reply;
  }
  p::EventResponse succeed_taking_next(const std::string& job, const std::string& lease, std::int64_t seq = 1) {
    return run_coro(ioc_, succeed_taking_next_async(job, lease, seq));
  }

  // The value of the /metrics line `name` (e.g. nymph_db_commits_total), read with this client's executor.
  asio::awaitable<long> metric_async(std::string name) {
    auto m = co_await client_.request(req(http::Method::get, "/metrics", ""));
    auto at = m.value().body.find("\n" + name + " ");
    if (at == std::string::npos) throw std::runtime_error("no metric " + name);
    co_return std::stol(m.value().body.substr(at + name.size() + 2));
  }

  // A coroutine that resolves once the server holds `n` polls (checked every 5 ms), then runs `then`.
  template <class F>
  asio::awaitable<void> when_held(int n, F then) {
    return when_gauge("nymph_held_polls", n, std::move(then));
  }

  // A coroutine that resolves once the /metrics gauge `name` reads `n` (checked every 5 ms), then runs `then`.
  template <class F>
  asio::awaitable<void> when_gauge(std::string name, int n, F then) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 2000; ++i) {
      auto m = co_await client_.request(req(http::Method::get, "/metrics", ""));
      if (m && m->body.find("\n" + name + " " + std::to_string(n) + "\n") != std::string::npos) break;
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_await then();
  }

 private:
  const ControlServer& cp_;
  asio::io_context ioc_;
  http::Client client_;
  Credentials credentials_;
};

// Runs `main` and `side` concurrently; returns what `main` returned once both finished.
template <class A>
asio::awaitable<A> with_side(asio::awaitable<A> main, asio::awaitable<void> side) {
  co_return co_await (std::move(main) && std::move(side));
}

std::string all_bytes() {
  std::string s;
  for (int b = 0; b < 256; ++b) s += static_cast<char>(b);
  return s;
}

}  // namespace

TEST(ControlServer, HealthAndMetricsNeedNoToken) {
  ControlServer cp;
  Api api(cp);
  auto h = api.call(http::Method::get, "/healthz", "");
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(h.body, R"({"status":"ok"})");
  auto m = api.call(http::Method::get, "/metrics", "");
  EXPECT_EQ(m.status, 200u);
  EXPECT_NE(m.body.find("nymph_workers{status=\"active\"} 0"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("nymph_queue_depth 0"), std::string::npos);
  EXPECT_NE(m.body.find("nymph_held_polls 0"), std::string::npos);
}

TEST(ControlServer, RolesAreEnforced) {
  ControlServer cp;
  Api api(cp);
  auto none = api.call(http::Method::get, p::jobs_path(), "");
  EXPECT_EQ(none.status, 401u);
  EXPECT_EQ(p::parse_error_document(none.body)->code, "unauthorized");
  EXPECT_EQ(api.call(http::Method::get, p::jobs_path(), "nym_unknown").status, 401u);
  auto wrong = api.call(http::Method::get, p::jobs_path(), api.agent());
  EXPECT_EQ(wrong.status, 403u);
  EXPECT_EQ(p::parse_error_document(wrong.body)->code, "forbidden");
  EXPECT_EQ(api.call(http::Method::post, p::workers_path(), api.admin(), "{}").status, 403u);
  EXPECT_EQ(api.call(http::Method::post, p::events_path("job_x"), api.admin(), "{}").status, 403u);
  // Authentication comes first: an unknown id with a bad token is still 401.
  EXPECT_EQ(api.call(http::Method::get, p::job_path("job_nope"), "").status, 401u);
  EXPECT_EQ(api.call(http::Method::get, p::job_path("job_nope"), api.admin()).status, 404u);
  // A token created while the server runs works at once.
  std::string extra = cp.create_token("admin");
  EXPECT_EQ(api.call(http::Method::get, p::jobs_path(), extra).status, 200u);
}

TEST(ControlServer, EveryEndpointRoundTrip) {
  ControlServer cp({.poll_timeout = "300ms"});
  Api api(cp);
  std::string launch = nymph::test::fresh_ulid();
  p::RegisterRequest reg;
  reg.launch_id = launch;
  reg.hostname = "h1";
  reg.runners = {"process"};
  auto first = api.call(http::Method::post, p::workers_path(), api.agent(), p::to_json_text(reg));
  ASSERT_EQ(first.status, 201u) << first.body;
  auto r1 = p::parse_as<p::RegisterResponse>(first.body).value();
  EXPECT_DOUBLE_EQ(r1.poll_timeout_s, 0.3);
  EXPECT_DOUBLE_EQ(r1.stale_after_s, 60);
  auto again = api.call(http::Method::post, p::workers_path(), api.agent(), p::to_json_text(reg));
  ASSERT_EQ(again.status, 200u);
  auto r2 = p::parse_as<p::RegisterResponse>(again.body).value();
  EXPECT_EQ(r2.worker_id, r1.worker_id);
  EXPECT_NE(r2.worker_token, r1.worker_token);  // each registration issues a new worker credential
  api.remember(r2);
  std::string w = r1.worker_id;

  std::string j = api.submit({"/bin/echo", "hi"});
  auto queued = api.ok<p::JobList>(200, http::Method::get, p::jobs_path() + "?state=queued", api.admin());
  ASSERT_EQ(queued.jobs.size(), 1u);
  EXPECT_EQ(queued.jobs[0].id, j);
  EXPECT_EQ(api.job(j).state, p::JobState::queued);

  auto got = api.poll(w, 1);
  ASSERT_EQ(got.jobs.size(), 1u);
  const auto& a = got.jobs[0];
  EXPECT_EQ(a.job_id, j);
  EXPECT_EQ(*a.spec.argv, (std::vector<std::string>{"/bin/echo", "hi"}));
  EXPECT_EQ(api.event(j, a.lease_id, 1, p::EventState::running).status, 200u);
  EXPECT_EQ(api.put_log(j, a.lease_id, 0, "hi\n").status, 200u);
  EXPECT_EQ(api.worker(w).running_jobs, std::vector<std::string>{j});
  auto done = api.event(j, a.lease_id, 2, p::EventState::succeeded, 0);
  ASSERT_EQ(done.status, 200u);
  EXPECT_EQ(p::parse_as<p::EventResponse>(done.body)->job_state, p::JobState::succeeded);
  auto dup = api.event(j, a.lease_id, 2, p::EventState::succeeded, 0);
  EXPECT_TRUE(p::parse_as<p::EventResponse>(dup.body)->duplicate);

  auto info = api.job(j);
  EXPECT_EQ(info.state, p::JobState::succeeded);
  EXPECT_EQ(info.exit_code, 0);
  ASSERT_EQ(info.attempts.size(), 1u);
  EXPECT_EQ(info.attempts[0].worker_id, w);
  EXPECT_EQ(info.events.size(), 2u);
  auto log = api.call(http::Method::get, p::log_get_target(j, p::LogStream::out, 0), api.admin());
  EXPECT_EQ(log.body, "hi\n");
  EXPECT_EQ(log.header("X-Nymph-Log-Size"), "3");
  EXPECT_EQ(log.header("X-Nymph-Log-Complete"), "true");
  EXPECT_EQ(api.call(http::Method::post, p::cancel_path(j), api.admin(), "{}").status, 409u);

  auto drained = api.ok<p::WorkerInfo>(200, http::Method::post, p::drain_path(w), api.admin(), "{}");
  EXPECT_EQ(drained.directive, p::Directive::drain);
  auto killed = api.ok<p::WorkerInfo>(200, http::Method::post, p::kill_path(w), api.admin(), "{}");
  EXPECT_EQ(killed.directive, p::Directive::kill);
  EXPECT_EQ(api.poll(w, 1).directive, p::Directive::kill);

  p::ExitRequest ex{p::ExitReason::killed, "bye"};
  EXPECT_EQ(api.call(http::Method::post, p::exit_path(w), api.credential(w), p::to_json_text(ex)).status, 200u);
  auto gone = api.worker(w);
  EXPECT_EQ(gone.status, p::WorkerStatus::gone);
  EXPECT_EQ(gone.exit_reason, p::ExitReason::killed);
  EXPECT_EQ(api.call(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(1)).status, 404u);
  // Re-registering the same launch revives the worker and clears its directive.
  auto back = api.call(http::Method::post, p::workers_path(), api.agent(), p::to_json_text(reg));
  EXPECT_EQ(back.status, 200u);
  EXPECT_EQ(api.worker(w).status, p::WorkerStatus::active);
  EXPECT_FALSE(api.worker(w).directive);
}

TEST(ControlServer, HeldPollIsWokenBySubmit) {
  ControlServer cp;  // 30 s poll timeout: a reply within seconds proves the wake-up
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  auto start = Clock::now();
  std::string job_id;
  auto held = api.client().request(Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(1)));
  auto submit = api.when_held(1, [&]() -> asio::awaitable<void> {
    job_id = co_await api.submit_async();
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(held), std::move(submit)));
  ASSERT_TRUE(reply);
  auto got = p::parse_as<p::PollResponse>(reply->body).value();
  ASSERT_EQ(got.jobs.size(), 1u) << reply->body;
  EXPECT_EQ(got.jobs[0].job_id, job_id);
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_EQ(api.held_polls(), 0);
}

// Issue 17: a submission that finds an idle held poll leases the job in its own transaction, so the job's way
// from submitted to leased costs one commit (it took two: the submission's, then the woken poll's).
TEST(ControlServer, ASubmissionLeasesItsJobToAnIdleHeldPollInOneCommit) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  api.submit();  // the admin token's first use is recorded now, not inside the measured span
  api.poll(w, 1);
  long before = -1, after = -1;
  std::string job_id;
  auto held = api.client().request(Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(1)));
  auto submit = api.when_held(1, [&]() -> asio::awaitable<void> {
    before = co_await api.metric_async("nymph_db_commits_total");
    job_id = co_await api.submit_async();
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(held), std::move(submit)));
  after = run_coro(api.ioc(), api.metric_async("nymph_db_commits_total"));
  ASSERT_TRUE(reply);
  auto got = p::parse_as<p::PollResponse>(reply->body).value();
  ASSERT_EQ(got.jobs.size(), 1u) << reply->body;
  EXPECT_EQ(got.jobs[0].job_id, job_id);
  EXPECT_EQ(after - before, 1) << "commits from the submission to the held poll's reply";
  EXPECT_EQ(api.job(job_id).state, p::JobState::running);
  EXPECT_EQ(api.held_polls(), 0);
}

// Issue 17: a final event whose attempt frees a slot of the worker's held poll leases the next queued job in
// the event's own transaction ("done" and the next lease: one commit, not two); with nothing queued the poll
// goes on waiting and a later submission still reaches it.
TEST(ControlServer, AFinalEventLeasesTheNextQueuedJobToTheHeldPollInOneCommit) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string first = api.submit();
  auto lease1 = api.poll(w, 1).jobs.at(0).lease_id;
  std::string second = api.submit();  // queued: the worker's one slot is busy
  long before = -1;
  auto held = api.client().request(
      Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(0, {{first, lease1}})));
  auto finish = api.when_held(1, [&]() -> asio::awaitable<void> {
    before = co_await api.metric_async("nymph_db_commits_total");
    EXPECT_EQ(co_await api.succeed_async(first, lease1, api.credential(w)), 200u);
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(held), std::move(finish)));
  long after = run_coro(api.ioc(), api.metric_async("nymph_db_commits_total"));
  ASSERT_TRUE(reply);
  auto got = p::parse_as<p::PollResponse>(reply->body).value();
  ASSERT_EQ(got.jobs.size(), 1u) << reply->body;
  EXPECT_EQ(got.jobs[0].job_id, second);
  EXPECT_EQ(after - before, 1) << "commits from the final event to the held poll's reply";
  EXPECT_EQ(api.job(first).state, p::JobState::succeeded);
  EXPECT_EQ(api.job(second).state, p::JobState::running);

  // Nothing queued: the final event's transaction finds no job for the poll, which goes on waiting.
  auto lease2 = got.jobs[0].lease_id;
  std::string third;
  auto held2 = api.client().request(
      Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(0, {{second, lease2}})));
  auto finish2 = api.when_held(1, [&]() -> asio::awaitable<void> {
    EXPECT_EQ(co_await api.succeed_async(second, lease2, api.credential(w)), 200u);
    EXPECT_EQ(co_await api.metric_async("nymph_held_polls"), 1);  // still held after the event's reply
    third = co_await api.submit_async();
  });
  auto reply2 = run_coro(api.ioc(), with_side(std::move(held2), std::move(finish2)));
  ASSERT_TRUE(reply2);
  auto got2 = p::parse_as<p::PollResponse>(reply2->body).value();
  ASSERT_EQ(got2.jobs.size(), 1u) << reply2->body;
  EXPECT_EQ(got2.jobs[0].job_id, third);
  EXPECT_EQ(api.job(second).state, p::JobState::succeeded);
}

// Issue 17: a final event with takeNext leases the next queued job in its own transaction and hands it over in
// its own reply (one request and one commit for "done" and the next lease); the worker's held poll is neither
// woken nor answered. With nothing queued the slot goes to the held poll (slotHeld), and a later submission
// reaches it there.
TEST(ControlServer, AFinalEventTakingNextLeasesTheNextQueuedJobInItsOwnReplyAndTheHeldPollStaysHeld) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string first = api.submit();
  auto lease1 = api.poll(w, 1).jobs.at(0).lease_id;
  std::string second = api.submit();  // queued: the worker's one slot is busy
  long polls_before = -1, commits_before = -1, commits_after = -1;
  p::EventResponse taken, none;
  std::string third;
  auto held = api.client().request(
      Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(0, {{first, lease1}})));
  auto finish = api.when_held(1, [&]() -> asio::awaitable<void> {
    polls_before = co_await api.metric_async("nymph_poll_requests_total");
    commits_before = co_await api.metric_async("nymph_db_commits_total");
    taken = co_await api.succeed_taking_next_async(first, lease1);
    commits_after = co_await api.metric_async("nymph_db_commits_total");
    EXPECT_EQ(co_await api.metric_async("nymph_held_polls"), 1) << "the held poll was answered";
    // Nothing queued now: the second job's slot goes to the held poll, which a submission then reaches.
    none = co_await api.succeed_taking_next_async(second, taken.jobs.at(0).lease_id);
    third = co_await api.submit_async();
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(held), std::move(finish)));
  ASSERT_EQ(taken.jobs.size(), 1u);
  EXPECT_EQ(taken.jobs[0].job_id, second);
  EXPECT_EQ(taken.jobs[0].attempt, 1);
  EXPECT_EQ(taken.jobs[0].runner, "process");
  EXPECT_EQ(taken.jobs[0].spec.argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(taken.jobs[0].lease_ttl_s, 90.0);
  EXPECT_EQ(taken.slot_held, false);
  EXPECT_EQ(commits_after - commits_before, 1) << "commits from the final event to its reply with the next lease";
  EXPECT_EQ(run_coro(api.ioc(), api.metric_async("nymph_poll_requests_total")), polls_before)
      << "no poll was needed to hand the next job over";
  EXPECT_TRUE(none.jobs.empty());
  EXPECT_EQ(none.slot_held, true);
  ASSERT_TRUE(reply);
  auto got = p::parse_as<p::PollResponse>(reply->body).value();
  ASSERT_EQ(got.jobs.size(), 1u) << reply->body;
  EXPECT_EQ(got.jobs[0].job_id, third);
  EXPECT_EQ(api.job(first).state, p::JobState::succeeded);
  EXPECT_EQ(api.job(second).state, p::JobState::succeeded);
  EXPECT_EQ(api.job(third).state, p::JobState::running);
}

// takeNext with no held poll and nothing queued: no poll knows the slot (slotHeld false), so the worker must
// poll again; a worker under a drain directive is handed nothing even with a job queued.
TEST(ControlServer, AFinalEventTakingNextSaysWhenNoPollHoldsTheSlotAndHandsNothingUnderADirective) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string first = api.submit();
  auto lease1 = api.poll(w, 1).jobs.at(0).lease_id;
  auto alone = api.succeed_taking_next(first, lease1);
  EXPECT_TRUE(alone.jobs.empty());
  EXPECT_EQ(alone.slot_held, false);

  std::string second = api.submit();
  auto lease2 = api.poll(w, 1).jobs.at(0).lease_id;
  std::string third = api.submit();
  api.ok<p::WorkerInfo>(200, http::Method::post, p::drain_path(w), api.admin(), "{}");
  auto drained = api.succeed_taking_next(second, lease2);
  EXPECT_TRUE(drained.jobs.empty());
  EXPECT_EQ(api.job(third).state, p::JobState::queued);
}

// A repeated final event (its first reply lost) hands again the job its first application leased while that job
// is unstarted, under the same lease: the lease is not left to expire. Once the job has an event, the repeat
// hands nothing.
TEST(ControlServer, ARepeatedFinalEventTakingNextHandsItsUnstartedJobAgain) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string first = api.submit();
  auto lease1 = api.poll(w, 1).jobs.at(0).lease_id;
  std::string second = api.submit();
  auto taken = api.succeed_taking_next(first, lease1);
  ASSERT_EQ(taken.jobs.size(), 1u);
  auto again = api.succeed_taking_next(first, lease1);
  EXPECT_TRUE(again.duplicate);
  ASSERT_EQ(again.jobs.size(), 1u);
  EXPECT_EQ(again.jobs[0].job_id, second);
  EXPECT_EQ(again.jobs[0].lease_id, taken.jobs[0].lease_id);
  EXPECT_EQ(again.jobs[0].spec.argv, taken.jobs[0].spec.argv);

  ASSERT_EQ(api.event(second, taken.jobs[0].lease_id, 1, p::EventState::running).status, 200u);
  auto late = api.succeed_taking_next(first, lease1);
  EXPECT_TRUE(late.duplicate);
  EXPECT_TRUE(late.jobs.empty());
}

// Issue 17: a wait woken by the job's final event is answered with the job as that event's transaction left it:
// no second database operation (and no second trip through the DB thread) between the event and the answer.
TEST(ControlServer, AJobWaitWokenByTheFinalEventIsAnsweredWithoutReadingTheJobAgain) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string job_id = api.submit();
  auto lease = api.poll(w, 1).jobs.at(0).lease_id;
  long before = -1;
  auto wait = api.client().request(Api::req(http::Method::get, p::job_path(job_id) + "?waitS=30", api.admin()));
  auto finish = api.when_gauge("nymph_held_job_waits", 1, [&]() -> asio::awaitable<void> {
    before = co_await api.metric_async("nymph_db_operations_total");
    EXPECT_EQ(co_await api.succeed_async(job_id, lease, api.lease_credential(lease)), 200u);
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(wait), std::move(finish)));
  const long after = run_coro(api.ioc(), api.metric_async("nymph_db_operations_total"));
  ASSERT_TRUE(reply);
  auto job = p::parse_as<p::JobInfo>(reply->body).value();
  EXPECT_EQ(job.state, p::JobState::succeeded) << reply->body;
  EXPECT_EQ(job.exit_code, 0);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].state, p::AttemptState::succeeded);
  EXPECT_EQ(after - before, 1) << "database operations from the final event to the wait's answer";
}

TEST(ControlServer, JobWaitIsAnsweredByTheFinalEventOrCancel) {
  ControlServer cp;  // waits of 30 s: replies within seconds prove the wake-ups
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string job_id = api.submit();
  auto lease = api.poll(w, 1).jobs.at(0).lease_id;
  auto start = Clock::now();
  auto wait = api.client().request(Api::req(http::Method::get, p::job_path(job_id) + "?waitS=30", api.admin()));
  auto finish = api.when_gauge("nymph_held_job_waits", 1, [&]() -> asio::awaitable<void> {
    EXPECT_EQ(co_await api.succeed_async(job_id, lease, api.lease_credential(lease)), 200u);
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(wait), std::move(finish)));
  ASSERT_TRUE(reply);
  EXPECT_EQ(p::parse_as<p::JobInfo>(reply->body).value().state, p::JobState::succeeded) << reply->body;
  EXPECT_LT(Clock::now() - start, 10s);
  // A final job is answered at once; a cancel of a queued job wakes its waiter.
  EXPECT_EQ(api.ok<p::JobInfo>(200, http::Method::get, p::job_path(job_id) + "?waitS=30", api.admin()).state,
            p::JobState::succeeded);
  std::string queued = api.submit();
  auto wait2 = api.client().request(Api::req(http::Method::get, p::job_path(queued) + "?waitS=30", api.admin()));
  auto cancel = api.when_gauge("nymph_held_job_waits", 1, [&]() -> asio::awaitable<void> {
    auto r = co_await api.client().request(Api::req(http::Method::post, p::cancel_path(queued), api.admin()));
    EXPECT_EQ(r.value().status, 200u);
  });
  auto reply2 = run_coro(api.ioc(), with_side(std::move(wait2), std::move(cancel)));
  ASSERT_TRUE(reply2);
  EXPECT_EQ(p::parse_as<p::JobInfo>(reply2->body).value().state, p::JobState::cancelled) << reply2->body;
  EXPECT_LT(Clock::now() - start, 20s);
  for (std::string bad : {"0", "61", "x"})
    EXPECT_EQ(api.call(http::Method::get, p::job_path(queued) + "?waitS=" + bad, api.admin()).status, 400u) << bad;
}

TEST(ControlServer, HeldPollIsWokenByCancelAndKill) {
  ControlServer cp;
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string j = api.submit();
  auto lease = api.poll(w, 1).jobs.at(0).lease_id;
  api.event(j, lease, 1, p::EventState::running);
  auto start = Clock::now();
  auto held = api.client().request(
      Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(0, {{j, lease}})));
  auto cancel = api.when_held(1, [&]() -> asio::awaitable<void> {
    co_await api.client().request(Api::req(http::Method::post, p::cancel_path(j), api.admin(), "{}"));
  });
  auto reply = run_coro(api.ioc(), with_side(std::move(held), std::move(cancel)));
  auto got = p::parse_as<p::PollResponse>(reply.value().body).value();
  ASSERT_EQ(got.cancel.size(), 1u);
  EXPECT_EQ(got.cancel[0].reason, p::CancelReason::user);
  EXPECT_EQ(api.job(j).state, p::JobState::cancelling);
  EXPECT_EQ(api.event(j, lease, 2, p::EventState::cancelled).status, 200u);
  EXPECT_EQ(api.job(j).state, p::JobState::cancelled);

  auto held2 = api.client().request(Api::req(http::Method::post, p::poll_path(w), api.credential(w), Api::poll_body(1)));
  auto kill = api.when_held(1, [&]() -> asio::awaitable<void> {
    co_await api.client().request(Api::req(http::Method::post, p::kill_path(w), api.admin(), "{}"));
  });
  auto reply2 = run_coro(api.ioc(), with_side(std::move(held2), std::move(kill)));
  EXPECT_EQ(p::parse_as<p::PollResponse>(reply2.value().body)->directive, p::Directive::kill);
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST(ControlServer, LeaseExpiryRequeuesAndFencesTheOldWorker) {
  ControlServer cp({.poll_timeout = "20s", .lease_ttl = "1s"});
  Api api(cp);
  std::string w1 = api.register_worker(nymph::test::fresh_ulid());
  std::string w2 = api.register_worker(nymph::test::fresh_ulid());
  std::string j = api.submit();
  auto a1 = api.poll(w1, 1).jobs.at(0);
  ASSERT_EQ(api.put_log(j, a1.lease_id, 0, "first").status, 200u);
  // w2's held poll is woken when the lease of w1 expires and the job is re-queued.
  auto start = Clock::now();
  auto r2 = api.poll(w2, 1);
  ASSERT_EQ(r2.jobs.size(), 1u);
  EXPECT_EQ(r2.jobs[0].job_id, j);
  EXPECT_EQ(r2.jobs[0].attempt, 2);
  EXPECT_GE(Clock::now() - start, 900ms);
  EXPECT_LT(Clock::now() - start, 15s);
  auto fenced = api.event(j, a1.lease_id, 1, p::EventState::running);
  EXPECT_EQ(fenced.status, 409u);
  EXPECT_EQ(p::parse_error_document(fenced.body)->code, "leaseLost");
  EXPECT_EQ(api.put_log(j, a1.lease_id, 5, "more").status, 409u);
  auto old = api.poll(w1, 1, {{j, a1.lease_id}});  // answered at once: the cancel is news
  ASSERT_EQ(old.cancel.size(), 1u);
  EXPECT_EQ(old.cancel[0].reason, p::CancelReason::lease_lost);
  auto info = api.job(j);
  EXPECT_EQ(info.attempts.at(0).state, p::AttemptState::lost);
  EXPECT_EQ(info.state, p::JobState::running);
  EXPECT_EQ(api.event(j, r2.jobs[0].lease_id, 1, p::EventState::succeeded, 0).status, 200u);
}

TEST(ControlServer, WorkerTurnsStaleAfterStaleAfterS) {
  ControlServer cp({.poll_timeout = "3s", .stale_after = "1s"});
  Api api(cp);
  std::string quiet = api.register_worker(nymph::test::fresh_ulid());
  std::string polling = api.register_worker(nymph::test::fresh_ulid());
  EXPECT_EQ(api.worker(quiet).status, p::WorkerStatus::active);
  auto start = Clock::now();
  // A held poll counts as contact: `polling` stays active while `quiet` goes stale.
  auto held = api.client().request(Api::req(http::Method::post, p::poll_path(polling), api.credential(polling), Api::poll_body(1)));
  int verdict = 0;
  auto check = [&]() -> asio::awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 500; ++i) {
      auto r = co_await api.client().request(Api::req(http::Method::get, p::workers_path(), api.admin()));
      auto list = p::parse_as<p::WorkerList>(r.value().body).value();
      bool quiet_stale = false, polling_active = false;
      for (auto& w : list.workers) {
        if (w.id == quiet) quiet_stale = w.status == p::WorkerStatus::stale && !w.exit_reason;
        if (w.id == polling) polling_active = w.status == p::WorkerStatus::active;
      }
      if (quiet_stale) {
        verdict = polling_active ? 1 : 2;
        co_return;
      }
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
  };
  auto reply = run_coro(api.ioc(), with_side(std::move(held), check()));
  EXPECT_TRUE(reply);
  EXPECT_EQ(verdict, 1) << "0: quiet never went stale, 2: the polling worker went stale too";
  EXPECT_GE(Clock::now() - start, 900ms);
  // Contact makes it active again.
  api.poll(quiet, 0);
  EXPECT_EQ(api.worker(quiet).status, p::WorkerStatus::active);
}

TEST(ControlServer, LogOffsetsOverlapGapAndBinaryBytes) {
  ControlServer cp({.poll_timeout = "200ms"});
  Api api(cp);
  std::string w = api.register_worker(nymph::test::fresh_ulid());
  std::string j = api.submit();
  auto lease = api.poll(w, 1).jobs.at(0).lease_id;
  std::string bytes = all_bytes();
  EXPECT_EQ(api.put_log(j, lease, 0, bytes.substr(0, 128)).body, R"({"nextOffset":128})");
  EXPECT_EQ(api.put_log(j, lease, 64, bytes.substr(64, 128)).body, R"({"nextOffset":192})");  // overlap
  auto gap = api.put_log(j, lease, 200, bytes.substr(200));
  EXPECT_EQ(gap.status, 409u);
  auto e = p::parse_error_document(gap.body).value();
  EXPECT_EQ(e.code, "logGap");
  EXPECT_EQ(e.expected_offset, 192u);
  EXPECT_EQ(api.put_log(j, lease, 192, bytes.substr(192)).status, 200u);
  EXPECT_EQ(api.put_log(j, lease, 0, "err", p::LogStream::err).status, 200u);
  auto out = api.call(http::Method::get, p::log_get_target(j, p::LogStream::out, 0), api.admin());
  EXPECT_EQ(out.body, bytes);
  EXPECT_EQ(out.header("Content-Type"), "application/octet-stream");
  EXPECT_EQ(api.call(http::Method::get, p::log_get_target(j, p::LogStream::out, 250), api.admin()).body, bytes.substr(250));
  EXPECT_EQ(api.call(http::Method::get, p::log_get_target(j, p::LogStream::err, 0), api.admin()).body, "err");
  EXPECT_EQ(api.call(http::Method::put, "/v1/jobs/" + j + "/logs/stdout?offset=-1&lease=" + lease, api.lease_credential(lease), "x").status, 400u);
  EXPECT_EQ(api.call(http::Method::put, "/v1/jobs/" + j + "/logs/stdout?offset=abc&lease=" + lease, api.lease_credential(lease), "x").status, 400u);
  EXPECT_EQ(api.call(http::Method::put, "/v1/jobs/" + j + "/logs/stdout?offset=0", api.lease_credential(lease), "x").status,
            400u);
  EXPECT_EQ(api.call(http::Method::put, "/v1/jobs/" + j + "/logs/stdlog?offset=0&lease=" + lease, api.lease_credential(lease), "x").status, 400u);
  EXPECT_EQ(api.call(http::Method::get, p::log_get_target(j, p::LogStream::out, 0) + "&attempt=0", api.admin()).status, 400u);
}

TEST(ControlServer, BadRequestsGetClear4xxAndTheServerKeepsServing) {
  ControlServer cp({.poll_timeout = "200ms"});
  Api api(cp);
  auto check = [&](http::Method m, std::string target, std::string token, std::string body, unsigned status,
                   std::string code, std::string needle = {}) {
    auto r = api.call(m, target, token, std::move(body));
    EXPECT_EQ(r.status, status) << target << " " << r.body;
    auto e = p::parse_error_document(r.body);
    ASSERT_TRUE(e) << r.body;
    EXPECT_EQ(e->code, code) << r.body;
    if (!needle.empty()) {
      EXPECT_NE(e->message.find(needle), std::string::npos) << e->message;
    }
  };
  auto admin = api.admin(), agent = api.agent();
  auto worker = api.credential(api.register_worker(nymph::test::fresh_ulid()));
  check(http::Method::post, p::jobs_path(), admin, "{not json", 400, "invalidJson");
  check(http::Method::post, p::jobs_path(), admin, R"({"argv":"ls"})", 400, "invalidField", "field 'argv': expected an array");
  check(http::Method::post, p::jobs_path(), admin, R"({"argv":["ls"],"maxAttempts":"2"})", 400, "invalidField", "maxAttempts");
  check(http::Method::post, p::jobs_path(), admin, R"({"argv":["ls"],"env":{"A B":"1"}})", 400, "invalidField", "'A B'");
  // A NUL would cut the value short at execve: "rm -rf /important\0 --dry-run" ran without --dry-run.
  check(http::Method::post, p::jobs_path(), admin, R"({"argv":["rm","-rf /important\u0000 --dry-run"]})", 400,
        "invalidField", "field 'argv[1]': contains a NUL byte");
  check(http::Method::post, p::jobs_path(), admin, R"({"command":"true\u0000; rm -rf /"})", 400, "invalidField",
        "field 'command': contains a NUL byte");
  check(http::Method::post, p::jobs_path(), admin, R"({"argv":["env"],"env":{"A":"x\u0000y"}})", 400, "invalidField",
        "field 'env.A': contains a NUL byte");
  check(http::Method::post, p::jobs_path(), admin, R"({"argv":["env"],"env":{"A\u0000B":"1"}})", 400, "invalidField",
        "field 'env'");
  check(http::Method::post, p::jobs_path(), admin, std::string(40, '[') + std::string(40, ']'), 400, "invalidJson", "deeper");
  check(http::Method::post, p::jobs_path(), admin, "{\"argv\":[\"" + std::string(5 << 20, 'a') + "\"]}", 413, "bodyTooLarge");
  check(http::Method::post, p::workers_path(), agent, R"({"launchId":"x","hostname":"h","runners":[]})", 400, "invalidField", "runners");
  check(http::Method::post, p::poll_path("wrk_nope"), worker, "{}", 403, "forbidden", "another worker");
  check(http::Method::post, p::events_path("job_nope"), worker, R"({"leaseId":"l","seq":1,"state":"running"})", 404, "unknownJob");
  check(http::Method::post, p::events_path("job_nope"), worker, R"({"leaseId":"l","seq":0,"state":"running"})", 400, "invalidField", "seq");
  check(http::Method::get, p::job_path("job_nope"), admin, "", 404, "unknownJob");
  check(http::Method::get, p::jobs_path() + "?state=bogus", admin, "", 400, "badRequest");
  check(http::Method::delete_, p::jobs_path(), admin, "", 405, "methodNotAllowed");
  check(http::Method::get, "/v1/nothing", admin, "", 404, "notFound");
  check(http::Method::get, "/v2/jobs", admin, "", 404, "notFound");
  EXPECT_EQ(api.call(http::Method::get, "/healthz", "").status, 200u);
  EXPECT_TRUE(cp.running());
}

TEST(ControlServer, Kill9MidStreamThenRestartLosesNothingAcknowledged) {
  ControlServer cp({.poll_timeout = "200ms"});
  std::string w, launch = nymph::test::fresh_ulid();
  std::map<std::string, p::JobState> expected;
  std::string streaming, streaming_lease, cancelling, cancelling_lease, acked;
  Api::Credentials seen;
  {
    Api api(cp);
    w = api.register_worker(launch);
    auto make = [&](p::EventState final_state, std::optional<int> code, int max_attempts = 2) {
      std::string j = api.submit({"/bin/true"}, max_attempts);
      auto lease = api.poll(w, 1).jobs.at(0).lease_id;
      api.event(j, lease, 1, p::EventState::running);
      api.event(j, lease, 2, final_state, code);
      return j;
    };
    expected[make(p::EventState::succeeded, 0)] = p::JobState::succeeded;
    expected[make(p::EventState::failed, 7)] = p::JobState::failed;
    expected[make(p::EventState::cancelled, {})] = p::JobState::cancelled;
    expected[make(p::EventState::lost, {}, 1)] = p::JobState::lost;
    std::string c = api.submit();
    api.call(http::Method::post, p::cancel_path(c), api.admin(), "{}");
    expected[c] = p::JobState::cancelled;
    cancelling = api.submit();
    cancelling_lease = api.poll(w, 1).jobs.at(0).lease_id;
    api.call(http::Method::post, p::cancel_path(cancelling), api.admin(), "{}");
    expected[cancelling] = p::JobState::cancelling;
    streaming = api.submit();
    streaming_lease = api.poll(w, 1).jobs.at(0).lease_id;
    api.event(streaming, streaming_lease, 1, p::EventState::running);
    expected[streaming] = p::JobState::running;
    for (int i = 0; i < 50; ++i) {
      std::string chunk = "line " + std::to_string(i) + "\n" + all_bytes();
      ASSERT_EQ(api.put_log(streaming, streaming_lease, acked.size(), chunk).status, 200u);
      acked += chunk;
    }
    expected[api.submit()] = p::JobState::queued;
    seen = api.credentials();
  }
  cp.kill9();
  cp.restart();
  Api api(cp);
  api.adopt(seen);  // a worker credential outlives a restart of the server
  for (const auto& [id, state] : expected) EXPECT_EQ(api.job(id).state, state) << id;
  EXPECT_EQ(api.call(http::Method::get, p::log_get_target(streaming, p::LogStream::out, 0), api.admin()).body, acked);
  // The agent carries on: its poll renews its leases (no cancel for the live one) and uploads continue.
  auto resumed = api.poll(w, 0, {{streaming, streaming_lease}, {cancelling, cancelling_lease}});
  ASSERT_EQ(resumed.cancel.size(), 1u);
  EXPECT_EQ(resumed.cancel[0].job_id, cancelling);
  EXPECT_EQ(resumed.cancel[0].reason, p::CancelReason::user);
  EXPECT_EQ(api.put_log(streaming, streaming_lease, acked.size(), "tail\n").status, 200u);
  EXPECT_EQ(api.event(streaming, streaming_lease, 2, p::EventState::succeeded, 0).status, 200u);
  EXPECT_EQ(api.job(streaming).state, p::JobState::succeeded);
  EXPECT_EQ(api.call(http::Method::get, p::log_get_target(streaming, p::LogStream::out, 0), api.admin()).body, acked + "tail\n");
  EXPECT_EQ(api.event(cancelling, cancelling_lease, 1, p::EventState::cancelled).status, 200u);
  EXPECT_EQ(api.job(cancelling).state, p::JobState::cancelled);
}

TEST(ControlServer, CurlSmoke) {
  ControlServer cp({.poll_timeout = "200ms"});
  auto auth = "Authorization: Bearer " + cp.admin_token();
  auto r = nymph::test::run_command({"curl", "-sS", "-f", "-X", "POST", "-H", auth, "-H",
                                     "Content-Type: application/json", "--data", R"({"argv":["/bin/echo","curl"]})",
                                     cp.url() + "/v1/jobs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto job = p::parse_as<p::JobInfo>(r.out).value();
  EXPECT_EQ(job.state, p::JobState::queued);
  auto list = nymph::test::run_command({"curl", "-sS", "-f", "-H", auth, cp.url() + "/v1/jobs"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(job.id), std::string::npos);
  auto denied = nymph::test::run_command({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", cp.url() + "/v1/jobs"});
  EXPECT_EQ(denied.out, "401");
  auto metrics = nymph::test::run_command({"curl", "-sS", cp.url() + "/metrics"});
  EXPECT_NE(metrics.out.find("nymph_queue_depth 1"), std::string::npos) << metrics.out;
}

TEST(ControlServer, ClientTextInTheLogIsEscapedAndCapped) {
  ControlServer cp;
  Api api(cp);
  p::RegisterRequest reg;
  reg.launch_id = nymph::test::fresh_ulid();
  reg.hostname = "node1\n[error] FORGED by the hostname";
  reg.runners = {"process"};
  auto w = api.ok<p::RegisterResponse>(201, http::Method::post, p::workers_path(), api.agent(), p::to_json_text(reg));
  api.remember(w);
  p::ExitRequest ex{p::ExitReason::error, "bye\r\n[error] FORGED by the message\x1b[2J" + std::string((2 << 20) - 100, 'x')};
  ASSERT_EQ(api.call(http::Method::post, p::exit_path(w.worker_id), api.credential(w.worker_id), p::to_json_text(ex)).status,
            200u);
  std::string log = cp.log();
  EXPECT_NE(log.find("host node1\\n[error] FORGED by the hostname"), std::string::npos) << log;
  EXPECT_NE(log.find("exited: error bye\\r\\n[error] FORGED by the message\\x1b[2Jxxx"), std::string::npos) << log;
  EXPECT_NE(log.find("xxx…(" + std::to_string(ex.message.size()) + " bytes)"), std::string::npos) << log;
  EXPECT_EQ(log.find("\n[error] FORGED"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_LT(log.size(), 16u * 1024) << "the 2 MiB exit message is capped";
}
