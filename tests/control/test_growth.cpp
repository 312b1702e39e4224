// What an agent or an admin can make the real server keep or do: job logs stop at the per-job cap and at the
// attempt's final event; lists come in pages (by count and by size) that the admin CLI follows; its /metrics gauges come from memory and match the database after every kind of
// state change.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "control/sql.hpp"
#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/run_coro.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
namespace sql = nymph::control::sql;
using nymph::test::ControlServer;
using nymph::test::run_coro;
using namespace std::chrono_literals;

namespace {

// A client of one ControlServer: plain calls that return the response, and a few protocol steps, each with the
// credential it needs (a worker's own, issued at its registration, for its polls, events, logs and exit).
class Client {
 public:
  explicit Client(const ControlServer& cp) : cp_(cp), client_(http::Client::create(ioc_.get_executor(), cp.url()).value()) {}

  http::Response call(http::Method m, std::string target, const std::string& token, std::string body = {},
                      std::string content_type = "application/json") {
    http::Request r{m, std::move(target), std::move(body), std::move(content_type), token, 60s};
    return run_coro(ioc_, client_.request(std::move(r))).value();
  }

  // The body of a reply that must have `status`, decoded as T.
  template <class T>
  T ok(unsigned status, http::Method m, std::string target, const std::string& token, std::string body = {}) {
    auto r = call(m, target, token, std::move(body));
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    return p::parse_as<T>(r.body).value();
  }

  std::string register_worker(const std::string& launch, std::map<std::string, std::string> tags = {}) {
    p::RegisterRequest r;
    r.launch_id = launch;
    r.hostname = "h";
    r.runners = {"process"};
    r.tags = std::move(tags);
    auto reply =
        p::parse_as<p::RegisterResponse>(call(http::Method::post, p::workers_path(), agent(), p::to_json_text(r)).body)
            .value();
    credentials_[reply.worker_id] = reply.worker_token;
    return reply.worker_id;
  }

  std::string submit(int max_attempts = 2, std::string arg = "-") {
    p::JobSubmission s;
    s.spec.argv = std::vector<std::string>{"/bin/echo", std::move(arg)};
    s.max_attempts = max_attempts;
    return ok<p::JobInfo>(201, http::Method::post, p::jobs_path(), admin(), p::to_json_text(s)).id;
  }

  std::vector<p::JobAssignment> poll(const std::string& worker, int free) {
    p::PollRequest r;
    r.free = {{"process", free}};
    auto jobs = ok<p::PollResponse>(200, http::Method::post, p::poll_path(worker), credential(worker), p::to_json_text(r)).jobs;
    for (const auto& j : jobs) lease_worker_[j.lease_id] = worker;
    return jobs;
  }

  unsigned event(const p::JobAssignment& a, std::int64_t seq, p::EventState state) {
    p::EventRequest e{.lease_id = a.lease_id, .seq = seq, .state = state};
    return call(http::Method::post, p::events_path(a.job_id), holder(a), p::to_json_text(e)).status;
  }

  unsigned exit(const std::string& worker) {
    p::ExitRequest x{p::ExitReason::sigterm, ""};
    return call(http::Method::post, p::exit_path(worker), credential(worker), p::to_json_text(x)).status;
  }

  http::Response put_log(const p::JobAssignment& a, p::LogStream stream, std::uint64_t offset, std::string bytes) {
    return call(http::Method::put, p::log_put_target(a.job_id, stream, offset, a.lease_id), holder(a), std::move(bytes),
                "application/octet-stream");
  }

  p::JobInfo job(const std::string& id, const std::string& query = {}) {
    return ok<p::JobInfo>(200, http::Method::get, p::job_path(id) + query, admin());
  }

  std::string metrics() { return call(http::Method::get, "/metrics", "").body; }

  const std::string& agent() const { return cp_.agent_token(); }
  const std::string& admin() const { return cp_.admin_token(); }
  asio::io_context& ioc() { return ioc_; }
  // The credential of `worker` (issued at its last registration here), and of the worker that got `a`.
  const std::string& credential(const std::string& worker) const { return credentials_.at(worker); }
  const std::string& holder(const p::JobAssignment& a) const { return credential(lease_worker_.at(a.lease_id)); }

 private:
  const ControlServer& cp_;
  asio::io_context ioc_;
  http::Client client_;
  std::map<std::string, std::string> credentials_;   // worker id -> its credential
  std::map<std::string, std::string> lease_worker_;  // lease id -> the worker it was handed to
};

// "jobs/queued" -> n and "workers/active" -> n for every state and status, counted in the database file.
std::map<std::string, long long> counted_in_database(const std::string& db_path) {
  std::map<std::string, long long> out;
  for (auto s : {"queued", "running", "cancelling", "succeeded", "failed", "cancelled", "lost"}) out["jobs/" + std::string(s)] = 0;
  for (auto s : {"active", "stale", "gone"}) out["workers/" + std::string(s)] = 0;
  auto db = sql::Connection::open(db_path);
  auto jobs = db.query("SELECT state, COUNT(*) FROM jobs GROUP BY state");
  while (jobs.step()) out["jobs/" + jobs.text(0)] = jobs.i64(1);
  auto workers = db.query("SELECT status, COUNT(*) FROM workers GROUP BY status");
  while (workers.step()) out["workers/" + workers.text(0)] = workers.i64(1);
  return out;
}

// The same keys read from a /metrics body (nymph_jobs{state="..."} and nymph_workers{status="..."}).
std::map<std::string, long long> shown_in_metrics(const std::string& body) {
  std::map<std::string, long long> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    for (auto [prefix, key] : {std::pair{"nymph_jobs{state=\"", "jobs/"}, std::pair{"nymph_workers{status=\"", "workers/"}}) {
      if (!line.starts_with(prefix)) continue;
      auto name_end = line.find('"', std::string_view(prefix).size());
      out[key + line.substr(std::string_view(prefix).size(), name_end - std::string_view(prefix).size())] =
          std::stoll(line.substr(line.rfind(' ') + 1));
    }
  }
  return out;
}

// The reply's status and error code, as "413 logCapReached".
std::string outcome(const http::Response& r) {
  auto e = p::parse_error_document(r.body);
  return std::to_string(r.status) + (e ? " " + e->code : "");
}

// Sets `column` of the row `id` in `table` to a time long past, as if it had happened 20 years ago.
void backdate(const ControlServer& cp, const std::string& table, const std::string& column, const std::string& id) {
  std::string sql = "UPDATE " + table + " SET " + column + "='2006-01-01T00:00:00.000Z' WHERE id=?";
  sql::Connection::open(cp.db_path()).query(sql.c_str()).bind(id).run();
}

// The value of an unlabelled metric line "NAME VALUE".
long long metric(const std::string& body, const std::string& name) {
  auto at = body.find("\n" + name + " ");
  if (at == std::string::npos) throw std::runtime_error("no metric " + name + " in:\n" + body);
  return std::stoll(body.substr(at + name.size() + 2));
}

// Asks until `pred` holds (every 20 ms, at most 10 s); false when it never did.
template <class Pred>
bool eventually(asio::io_context& ioc, Pred pred) {
  asio::steady_timer t(ioc);
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    t.expires_after(20ms);
    t.wait();
  }
  return false;
}

}  // namespace

TEST(ControlLogs, UploadsPastTheJobCapAre413AndAfterTheFinalEvent409WithNothingStored) {
  ControlServer cp({.extra_args = {"--max-log-bytes-per-job", "1KiB"}});
  Client c(cp);
  std::string w = c.register_worker(nymph::test::fresh_ulid());
  c.submit();
  auto a = c.poll(w, 1).at(0);
  EXPECT_EQ(outcome(c.put_log(a, p::LogStream::out, 0, std::string(1000, 'o'))), "200");
  auto over = c.put_log(a, p::LogStream::err, 0, std::string(100, 'e'));
  EXPECT_EQ(outcome(over), "413 logCapReached");
  EXPECT_NE(p::parse_error_document(over.body)->message.find("cap of 1024 bytes per job"), std::string::npos) << over.body;
  EXPECT_EQ(outcome(c.put_log(a, p::LogStream::err, 0, std::string(24, 'e'))), "200");  // exactly the cap
  EXPECT_EQ(c.event(a, 1, p::EventState::succeeded), 200u);
  EXPECT_EQ(outcome(c.put_log(a, p::LogStream::out, 1000, "late")), "409 attemptFinished");
  auto stored = c.call(http::Method::get, p::log_get_target(a.job_id, p::LogStream::out, 0), c.admin());
  EXPECT_EQ(stored.body, std::string(1000, 'o'));
  EXPECT_EQ(stored.header("X-Nymph-Log-Complete"), "true");
}

// About 3.5 MiB of tags (7000 pairs of 256-byte keys and values), as a registration may carry.
std::map<std::string, std::string> big_tags() {
  std::map<std::string, std::string> tags;
  for (int i = 0; i < 7000; ++i) {
    std::string key = std::to_string(i);
    tags[key + std::string(256 - key.size(), 'k')] = std::string(256, 'v');
  }
  return tags;
}

TEST(ControlLists, WorkersAndJobsComeInPagesThatFollowEachOther) {
  ControlServer cp;
  Client c(cp);
  std::vector<std::string> workers;
  for (int i = 0; i < 5; ++i) workers.push_back(c.register_worker(nymph::test::fresh_ulid()));
  std::sort(workers.begin(), workers.end());
  std::vector<std::string> seen;
  std::optional<std::string> cursor;
  for (int pages = 0; pages < 3; ++pages) {
    auto page = c.ok<p::WorkerList>(200, http::Method::get, p::workers_page_target(2, cursor), c.admin());
    EXPECT_EQ(page.workers.size(), pages < 2 ? 2u : 1u);
    for (const auto& w : page.workers) seen.push_back(w.id);
    cursor = page.next_cursor;
    EXPECT_EQ(cursor.has_value(), pages < 2);
  }
  EXPECT_EQ(seen, workers);
  EXPECT_EQ(c.ok<p::WorkerList>(200, http::Method::get, p::workers_path(), c.admin()).workers.size(), 5u);
  std::vector<std::string> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(c.submit());
  auto newest = c.ok<p::JobList>(200, http::Method::get, p::jobs_page_target(2), c.admin());
  ASSERT_EQ(newest.jobs.size(), 2u);
  EXPECT_EQ(newest.jobs[0].id, jobs[2]);
  auto oldest = c.ok<p::JobList>(200, http::Method::get, p::jobs_page_target(2, std::nullopt, newest.next_cursor), c.admin());
  ASSERT_EQ(oldest.jobs.size(), 1u);
  EXPECT_EQ(oldest.jobs[0].id, jobs[0]);
  EXPECT_FALSE(oldest.next_cursor);
  for (const std::string& bad : {p::workers_path() + "?limit=0", p::workers_path() + "?limit=1001",
                                 p::workers_path() + "?cursor=no%20such", p::jobs_path() + "?limit=10001",
                                 p::jobs_path() + "?cursor=job_1"})
    EXPECT_EQ(outcome(c.call(http::Method::get, bad, c.admin())), "400 badRequest") << bad;
}

TEST(ControlLists, ABigListIsCutBySizeAndTheAdminCliFollowsItsPages) {
  ControlServer cp;
  Client c(cp);
  auto tags = big_tags();
  for (int i = 0; i < 4; ++i) c.register_worker(nymph::test::fresh_ulid(), tags);
  for (int i = 0; i < 5; ++i) c.submit(2, std::string((2 << 20) - 1000, static_cast<char>('a' + i)));  // about 2 MiB each
  auto first = c.call(http::Method::get, p::workers_path(), c.admin());
  EXPECT_LT(first.body.size(), 8u * 1024 * 1024 + 4u * 1024 * 1024) << "one page is at most the budget plus one worker";
  auto page = p::parse_as<p::WorkerList>(first.body).value();
  EXPECT_LT(page.workers.size(), 4u);
  EXPECT_TRUE(page.next_cursor);
  auto workers = cp.admin({"workers", "--json"});
  ASSERT_EQ(workers.exit_code, 0) << workers.err;
  auto all_workers = p::parse_as<p::WorkerList>(workers.out).value();
  EXPECT_EQ(all_workers.workers.size(), 4u);
  EXPECT_FALSE(all_workers.next_cursor);
  auto table = cp.admin({"workers"});
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 5) << table.out.substr(0, 2000);  // header + 4
  auto jobs = cp.admin({"jobs", "--json", "--limit", "4"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  auto listed = p::parse_as<p::JobList>(jobs.out, {.max_json_body = 64 << 20, .max_string = 4 << 20}).value();
  ASSERT_EQ(listed.jobs.size(), 4u);
  EXPECT_EQ(listed.jobs[0].spec.argv->at(1).front(), 'e');  // newest first
  EXPECT_EQ(listed.jobs[3].spec.argv->at(1).front(), 'b');
}

TEST(ControlRetention, PurgeDeletesOldFinishedJobsWithTheirLogFilesAndOldGoneWorkersOnly) {
  ControlServer cp({.poll_timeout = "200ms"});  // the default retention: 30 days
  Client c(cp);
  std::string active = c.register_worker(nymph::test::fresh_ulid());
  std::string gone = c.register_worker(nymph::test::fresh_ulid());
  EXPECT_EQ(c.exit(gone), 200u);
  c.submit();
  c.submit();
  auto got = c.poll(active, 2);
  ASSERT_EQ(got.size(), 2u);
  const auto& old = got[0];
  EXPECT_EQ(outcome(c.put_log(old, p::LogStream::out, 0, "out")), "200");
  EXPECT_EQ(outcome(c.put_log(old, p::LogStream::err, 0, "err")), "200");
  EXPECT_EQ(c.event(old, 1, p::EventState::succeeded), 200u);
  EXPECT_EQ(c.event(got[1], 1, p::EventState::failed), 200u);
  std::string queued = c.submit();
  backdate(cp, "jobs", "finished_at", old.job_id);
  backdate(cp, "jobs", "created_at", queued);
  backdate(cp, "workers", "last_seen", gone);
  backdate(cp, "workers", "last_seen", active);
  std::filesystem::path logs = cp.db_path() + ".logs";
  ASSERT_TRUE(std::filesystem::exists(logs / (old.job_id + "-1.stdout")));

  auto r = cp.admin({"purge"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "purged 1 jobs (2 log files) and 1 workers older than 30d\n");
  EXPECT_EQ(outcome(c.call(http::Method::get, p::job_path(old.job_id), c.admin())), "404 unknownJob");
  EXPECT_FALSE(std::filesystem::exists(logs / (old.job_id + "-1.stdout")));
  EXPECT_FALSE(std::filesystem::exists(logs / (old.job_id + "-1.stderr")));
  EXPECT_EQ(c.job(got[1].job_id).state, p::JobState::failed);  // finished, but recently
  EXPECT_EQ(c.job(queued).state, p::JobState::queued);          // old, but not finished
  auto workers = c.ok<p::WorkerList>(200, http::Method::get, p::workers_path(), c.admin()).workers;
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].id, active);  // not seen for long, but active
  // The deleted worker's credential, which the server had cached when it exited, no longer works.
  EXPECT_EQ(outcome(c.call(http::Method::post, p::exit_path(gone), c.credential(gone), R"({"exitReason":"sigterm"})")),
            "401 unauthorized");
  EXPECT_EQ(shown_in_metrics(c.metrics()), counted_in_database(cp.db_path()));
  EXPECT_NE(cp.log().find("purged 1 finished jobs (2 log files) and 1 gone or stale workers older than 30d"),
            std::string::npos)
      << cp.log();
  // An explicit age, and JSON.
  auto now = cp.admin({"purge", "--older-than", "0s", "--json"});
  ASSERT_EQ(now.exit_code, 0) << now.err;
  auto all = p::parse_as<p::PurgeResponse>(now.out).value();
  EXPECT_EQ(all.jobs, 1);
  EXPECT_EQ(all.workers, 0);
  EXPECT_EQ(all.older_than_s, 0);
  EXPECT_EQ(c.job(queued).state, p::JobState::queued);
  EXPECT_EQ(outcome(c.call(http::Method::post, p::purge_path(), c.agent(), "{}")), "403 forbidden");
  EXPECT_EQ(outcome(c.call(http::Method::post, p::purge_path(), c.admin(), R"({"olderThanS":-1})")), "400 invalidField");
}

TEST(ControlRetention, TheServerPurgesByItselfEveryIntervalUnlessToldToKeepEverything) {
  ControlServer cp({.extra_args = {"--retention", "1d", "--purge-interval", "100ms"}});
  Client c(cp);
  std::string w = c.register_worker(nymph::test::fresh_ulid());
  c.submit();
  auto a = c.poll(w, 1).at(0);
  EXPECT_EQ(c.event(a, 1, p::EventState::succeeded), 200u);
  std::string queued = c.submit();
  backdate(cp, "jobs", "finished_at", a.job_id);
  backdate(cp, "jobs", "created_at", queued);
  EXPECT_TRUE(eventually(c.ioc(), [&] {
    return c.call(http::Method::get, p::job_path(a.job_id), c.admin()).status == 404;
  }));
  EXPECT_EQ(c.job(queued).state, p::JobState::queued);

  ControlServer keep({.extra_args = {"--retention", "never"}});
  Client k(keep);
  auto refused = k.call(http::Method::post, p::purge_path(), k.admin(), "{}");
  EXPECT_EQ(outcome(refused), "400 badRequest");
  EXPECT_NE(refused.body.find("olderThanS"), std::string::npos) << refused.body;
  EXPECT_EQ(outcome(k.call(http::Method::post, p::purge_path(), k.admin(), R"({"olderThanS":60})")), "200");
}

TEST(ControlMetrics, GaugesEqualTheDatabaseAfterEveryKindOfStateChange) {
  ControlServer cp({.poll_timeout = "200ms", .lease_ttl = "1s", .stale_after = "1s"});
  Client c(cp);
  std::string w1 = c.register_worker(nymph::test::fresh_ulid());
  std::string w2 = c.register_worker(nymph::test::fresh_ulid());
  std::string launch3 = nymph::test::fresh_ulid();
  std::string w3 = c.register_worker(launch3);
  std::vector<std::string> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(c.submit());

  auto first = c.poll(w1, 3);  // dispatch: queued -> running
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(c.event(first[0], 1, p::EventState::running), 200u);
  EXPECT_EQ(c.event(first[0], 2, p::EventState::succeeded), 200u);
  EXPECT_EQ(c.event(first[1], 1, p::EventState::failed), 200u);
  EXPECT_EQ(c.event(first[2], 1, p::EventState::lost), 200u);  // re-queued
  EXPECT_EQ(c.call(http::Method::post, p::cancel_path(jobs[3]), c.admin()).status, 200u);  // queued -> cancelled
  auto second = c.poll(w2, 2);  // the re-queued job (attempt 2) and the next one
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].job_id, first[2].job_id);
  EXPECT_EQ(c.call(http::Method::post, p::cancel_path(second[1].job_id), c.admin()).status, 200u);  // -> cancelling
  EXPECT_EQ(c.event(second[1], 1, p::EventState::cancelled), 200u);
  EXPECT_EQ(c.exit(w3), 200u);                     // -> gone
  EXPECT_EQ(c.register_worker(launch3), w3);       // gone -> active
  EXPECT_EQ(c.exit(w3), 200u);
  // The lease of attempt 2 expires (its last attempt: lost), and w1 and w2 go stale; w1 polls again, then
  // leaves, so that no clock changes anything while the counts are compared.
  EXPECT_EQ(c.job(second[0].job_id, "?waitS=30").state, p::JobState::lost);
  ASSERT_TRUE(eventually(c.ioc(), [&] {
    auto list = c.ok<p::WorkerList>(200, http::Method::get, p::workers_path(), c.admin());
    return std::count_if(list.workers.begin(), list.workers.end(),
                         [](const auto& w) { return w.status == p::WorkerStatus::stale; }) == 2;
  }));
  c.poll(w1, 0);  // stale -> active
  EXPECT_EQ(c.exit(w1), 200u);

  auto expected = counted_in_database(cp.db_path());
  EXPECT_EQ(expected["jobs/queued"], 1);  // the script did reach every state it meant to
  EXPECT_EQ(expected["jobs/lost"], 1);
  EXPECT_EQ(expected["workers/stale"], 1);
  EXPECT_EQ(expected["workers/gone"], 2);
  EXPECT_EQ(shown_in_metrics(c.metrics()), expected);
  EXPECT_EQ(metric(c.metrics(), "nymph_queue_depth"), 1);
  cp.restart();  // counted again at start
  Client again(cp);
  EXPECT_EQ(shown_in_metrics(again.metrics()), counted_in_database(cp.db_path()));
}

TEST(ControlMetrics, AScrapeRunsNothingOnTheDatabase) {
  ControlServer cp;
  Client c(cp);
  c.submit();
  std::string before = c.metrics();
  for (int i = 0; i < 16; ++i) c.metrics();
  std::string after = c.metrics();
  EXPECT_EQ(metric(before, "nymph_db_operations_total"), metric(after, "nymph_db_operations_total")) << after;
  EXPECT_EQ(metric(before, "nymph_db_commits_total"), metric(after, "nymph_db_commits_total"));
  EXPECT_EQ(metric(after, "nymph_queue_depth"), 1);
  c.submit();  // the counters do count real work
  EXPECT_EQ(metric(c.metrics(), "nymph_db_operations_total"), metric(after, "nymph_db_operations_total") + 1);
}
