#include "control/admin/commands.hpp"

// GCC 12 at -O2 reports -Wmismatched-new-delete when an Asio awaitable frame's ramp is inlined into a plain
// function (the frame's operator new/delete pair is Asio's own and does match): a false positive that would
// break -Werror release builds.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>

#include <boost/asio/steady_timer.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

#include "common/duration.hpp"
#include "control/admin/api.hpp"
#include "control/admin/output.hpp"
#include "protocol/protocol.hpp"

namespace nymph::control::admin {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

constexpr auto kFollowInterval = 200ms;

// Splits "k=v"; an Error names the option when there is no '='.
Result<std::pair<std::string, std::string>> key_value(const std::string& text, const char* option) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return fail(std::string(option) + " expects KEY=VALUE, got '" + text + "'");
  return std::pair{text.substr(0, eq), text.substr(eq + 1)};
}

// Follows one or both streams of a job until it is final and everything was printed.
struct LogCursor {
  protocol::LogStream stream;
  std::FILE* out;
  std::uint64_t offset = 0;
  int attempt = 0;
  bool complete = false;
};

// Fetches what is new on `c`; returns true when something was printed.
asio::awaitable<Result<bool>> pull(Api& api, const std::string& id, LogCursor& c, std::optional<int> attempt) {
  auto r = co_await api.call(http::Method::get, protocol::log_get_target(id, c.stream, c.offset, attempt));
  if (!r) co_return r.error();
  int got_attempt = std::atoi(r->header(protocol::kLogAttemptHeader).value_or("0").c_str());
  if (got_attempt != c.attempt && c.attempt != 0 && !attempt) {
    // The job was re-queued: a new attempt starts its streams at 0.
    c.offset = 0;
    c.attempt = got_attempt;
    co_return true;
  }
  c.attempt = got_attempt;
  if (!write_all(c.out, r->body)) co_return fail("cannot write output");
  c.offset += r->body.size();
  std::uint64_t size = std::strtoull(r->header(protocol::kLogSizeHeader).value_or("0").c_str(), nullptr, 10);
  c.complete = r->header(protocol::kLogCompleteHeader).value_or("false") == "true" && c.offset >= size;
  co_return !r->body.empty();
}

asio::awaitable<Result<void>> follow(Api& api, const std::string& id, std::vector<LogCursor>& cursors,
                                     std::optional<int> attempt, bool follow_on) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    bool progress = false, all_complete = true;
    for (auto& c : cursors) {
      auto r = co_await pull(api, id, c, attempt);
      if (!r) co_return r.error();
      progress = progress || *r;
      all_complete = all_complete && c.complete;
    }
    // Without --follow: everything stored so far (a reply carries at most a few MiB), then stop.
    if (all_complete || (!follow_on && !progress)) co_return Result<void>{};
    if (!progress) {
      timer.expires_after(kFollowInterval);
      co_await timer.async_wait(asio::use_awaitable);
    }
  }
}

asio::awaitable<Result<protocol::JobInfo>> wait_final(Api& api, const std::string& id) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto j = co_await api.get<protocol::JobInfo>(http::Method::get, protocol::job_path(id));
    if (!j || protocol::is_final(j->state)) co_return j;
    timer.expires_after(kFollowInterval);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

Result<protocol::JobSubmission> build_submission(const SubmitOptions& s) {
  protocol::JobSubmission sub;
  sub.runner = s.runner;
  sub.kind = s.kind;
  sub.max_attempts = s.max_attempts;
  if (!s.argv.empty()) sub.spec.argv = s.argv;
  sub.spec.command = s.command;
  for (const auto& e : s.env) {
    auto kv = key_value(e, "--env");
    if (!kv) return kv.error();
    sub.spec.env[kv->first] = kv->second;
  }
  for (const auto& t : s.require_tags) {
    auto kv = key_value(t, "--require-tag");
    if (!kv) return kv.error();
    sub.required_tags[kv->first] = kv->second;
  }
  if (s.timeout) {
    auto d = parse_duration(*s.timeout);
    if (!d) return fail("--timeout: " + d.error().message);
    sub.spec.timeout_s = std::chrono::duration<double>(*d).count();
  }
  if (!s.slurm_options.empty()) {
    json::object slurm;
    for (const auto& o : s.slurm_options) {
      auto kv = key_value(o, "--slurm-option");
      if (!kv) return kv.error();
      slurm[kv->first] = kv->second;
    }
    sub.spec.run_config["slurm"] = std::move(slurm);
  }
  if (s.payload) {
    auto p = protocol::parse_as<protocol::Payload>(*s.payload);
    if (!p) return fail("--payload: " + p.error().message);
    sub.spec.payload = std::move(*p);
  }
  return sub;
}

asio::awaitable<int> submit(AdminOptions o, SubmitOptions s) {
  auto sub = build_submission(s);
  if (!sub) co_return report(sub.error().message);
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto job = co_await api->get<protocol::JobInfo>(http::Method::post, protocol::jobs_path(), protocol::to_json_text(*sub));
  if (!job) co_return report(job.error().message);
  if (o.json) print_json(json::value_from(*job));
  else if (s.follow) std::cerr << job->id << "\n";
  else std::cout << job->id << "\n";
  std::cout.flush();
  if (!s.wait && !s.follow) co_return 0;
  if (s.follow) {
    std::vector<LogCursor> cursors{{protocol::LogStream::out, stdout}, {protocol::LogStream::err, stderr}};
    auto f = co_await follow(*api, job->id, cursors, std::nullopt, true);
    if (!f) co_return report(f.error().message);
  }
  auto done = co_await wait_final(*api, job->id);
  if (!done) co_return report(done.error().message);
  if (!o.json && !s.follow)
    std::cerr << "job " << done->id << " " << protocol::to_string(done->state)
              << (done->message.empty() ? "" : ": " + done->message) << "\n";
  co_return exit_status_of_job(std::string(protocol::to_string(done->state)), done->exit_code, done->signal);
}

// Up to `limit` jobs (newest first, in `state` when given), following the server's pages.
asio::awaitable<Result<protocol::JobList>> all_jobs(Api& api, std::optional<protocol::JobState> state, int limit) {
  protocol::JobList all;
  std::optional<std::string> cursor;
  while (static_cast<int>(all.jobs.size()) < limit) {
    int want = std::min(limit - static_cast<int>(all.jobs.size()), protocol::kLimits.max_jobs_page);
    auto page = co_await api.get<protocol::JobList>(http::Method::get, protocol::jobs_page_target(want, state, cursor));
    if (!page) co_return page.error();
    std::move(page->jobs.begin(), page->jobs.end(), std::back_inserter(all.jobs));
    cursor = page->next_cursor;
    if (!cursor) break;
  }
  all.jobs.resize(std::min<std::size_t>(all.jobs.size(), static_cast<std::size_t>(limit)));
  co_return all;
}

// Every worker, following the server's pages.
asio::awaitable<Result<protocol::WorkerList>> all_workers(Api& api) {
  protocol::WorkerList all;
  std::optional<std::string> cursor;
  do {
    auto page = co_await api.get<protocol::WorkerList>(http::Method::get,
                                                       protocol::workers_page_target(protocol::kLimits.max_workers_page, cursor));
    if (!page) co_return page.error();
    std::move(page->workers.begin(), page->workers.end(), std::back_inserter(all.workers));
    cursor = page->next_cursor;
  } while (cursor);
  co_return all;
}

asio::awaitable<int> jobs(AdminOptions o, std::optional<std::string> state_name, int limit) {
  std::optional<protocol::JobState> state;
  if (state_name) {
    state = protocol::parse_job_state(*state_name);
    if (!state) co_return report("--state: unknown job state '" + *state_name + "'");
  }
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto list = co_await all_jobs(*api, state, limit);
  if (!list) co_return report(list.error().message);
  if (o.json) {
    print_json(json::value_from(*list));
    co_return 0;
  }
  std::vector<std::vector<std::string>> rows{{"ID", "STATE", "RUNNER", "KIND", "ATTEMPT", "EXIT", "WORKER", "CREATED"}};
  for (const auto& j : list->jobs)
    rows.push_back({j.id, std::string(protocol::to_string(j.state)), j.runner, j.kind, std::to_string(j.attempt),
                    opt_int(j.exit_code), j.worker_id.value_or("-"), j.created_at});
  print_table(rows);
  co_return 0;
}

asio::awaitable<int> job(AdminOptions o, std::string id) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto j = co_await api->get<protocol::JobInfo>(http::Method::get, protocol::job_path(id));
  if (!j) co_return report(j.error().message);
  if (o.json) {
    print_json(json::value_from(*j));
    co_return 0;
  }
  std::cout << "id:        " << j->id << "\nstate:     " << protocol::to_string(j->state) << "\nrunner:    " << j->runner
            << "\nkind:      " << j->kind << "\nspec:      " << json::serialize(json::value_from(j->spec))
            << "\nattempts:  " << j->attempt << " of " << j->max_attempts << "\nexit code: " << opt_int(j->exit_code)
            << "\nsignal:    " << opt_int(j->signal) << "\nmessage:   " << j->message
            << "\ncreated:   " << j->created_at << "\nfinished:  " << j->finished_at.value_or("-") << "\n";
  if (j->result) std::cout << "result:    " << json::serialize(*j->result) << "\n";
  if (!j->attempts.empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows{
        {"ATTEMPT", "LEASE", "WORKER", "STATE", "EXIT", "SIGNAL", "SLURM JOB", "MESSAGE"}};
    for (const auto& a : j->attempts)
      rows.push_back({std::to_string(a.attempt), a.lease_id, a.worker_id, std::string(protocol::to_string(a.state)),
                      opt_int(a.exit_code), opt_int(a.signal), a.slurm_job_id.value_or("-"), a.message});
    print_table(rows);
  }
  if (!j->events.empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows{{"ATTEMPT", "SEQ", "STATE", "AT", "RECEIVED", "MESSAGE"}};
    for (const auto& e : j->events)
      rows.push_back({std::to_string(e.attempt), std::to_string(e.seq), std::string(protocol::to_string(e.state)),
                      e.at.value_or("-"), e.received_at, e.message});
    print_table(rows);
  }
  co_return 0;
}

asio::awaitable<int> logs(AdminOptions o, std::string id, protocol::LogStream stream, bool follow_on,
                          std::optional<int> attempt) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  std::vector<LogCursor> cursors{{stream, stdout}};
  auto f = co_await follow(*api, id, cursors, attempt, follow_on);
  if (!f) co_return report(f.error().message);
  co_return 0;
}

asio::awaitable<int> cancel(AdminOptions o, std::string id) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto j = co_await api->get<protocol::JobInfo>(http::Method::post, protocol::cancel_path(id), "{}");
  if (!j) co_return report(j.error().message);
  if (o.json) print_json(json::value_from(*j));
  else std::cout << "job " << j->id << " " << protocol::to_string(j->state) << "\n";
  co_return 0;
}

asio::awaitable<int> workers(AdminOptions o) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto list = co_await all_workers(*api);
  if (!list) co_return report(list.error().message);
  if (o.json) {
    print_json(json::value_from(*list));
    co_return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"ID", "LABEL", "HOST", "BACKEND", "RUNNERS", "STATUS", "EXIT", "LAST SEEN", "RUNNING"}};
  for (const auto& w : list->workers) {
    std::string runners;
    for (const auto& r : w.runners) runners += (runners.empty() ? "" : ",") + r;
    rows.push_back({w.id, w.label.empty() ? "-" : w.label, w.hostname, w.backend, runners,
                    std::string(protocol::to_string(w.status)),
                    w.exit_reason ? std::string(protocol::to_string(*w.exit_reason)) : "-", w.last_seen,
                    std::to_string(w.running_jobs.size())});
  }
  print_table(rows);
  co_return 0;
}

asio::awaitable<int> directive(AdminOptions o, std::string worker_id, std::string which) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  std::string path = which == "kill" ? protocol::kill_path(worker_id) : protocol::drain_path(worker_id);
  auto w = co_await api->get<protocol::WorkerInfo>(http::Method::post, path, "{}");
  if (!w) co_return report(w.error().message);
  if (o.json) print_json(json::value_from(*w));
  else std::cout << "worker " << w->id << ": " << which << " requested\n";
  co_return 0;
}

asio::awaitable<int> purge(AdminOptions o, std::optional<std::string> older_than) {
  protocol::PurgeRequest req;
  if (older_than) {
    auto d = parse_duration(*older_than);
    if (!d) co_return report("--older-than: " + d.error().message);
    req.older_than_s = std::chrono::duration<double>(*d).count();
  }
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto r = co_await api->get<protocol::PurgeResponse>(http::Method::post, protocol::purge_path(), protocol::to_json_text(req));
  if (!r) co_return report(r.error().message);
  if (o.json) print_json(json::value_from(*r));
  else
    std::cout << "purged " << r->jobs << " jobs (" << r->log_files << " log files) and " << r->workers
              << " workers older than "
              << format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::duration<double>(r->older_than_s)))
              << "\n";
  co_return 0;
}

}  // namespace

int exit_status_of_job(const std::string& state, std::optional<int> exit_code, std::optional<int> signal) {
  if (state == "succeeded") return 0;
  if (state == "cancelled") return 130;
  if (state == "failed") {
    if (exit_code && *exit_code > 0 && *exit_code < 256) return *exit_code;
    if (signal && *signal > 0 && *signal < 128) return 128 + *signal;
  }
  return 1;
}

int cmd_submit(const AdminOptions& o, const SubmitOptions& s) { return run_sync(submit(o, s)); }
int cmd_jobs(const AdminOptions& o, const std::optional<std::string>& state, int limit) {
  return run_sync(jobs(o, state, limit));
}
int cmd_job(const AdminOptions& o, const std::string& id) { return run_sync(job(o, id)); }
int cmd_logs(const AdminOptions& o, const std::string& id, protocol::LogStream stream, bool follow_on,
             std::optional<int> attempt) {
  return run_sync(logs(o, id, stream, follow_on, attempt));
}
int cmd_cancel(const AdminOptions& o, const std::string& id) { return run_sync(cancel(o, id)); }
int cmd_workers(const AdminOptions& o) { return run_sync(workers(o)); }
int cmd_purge(const AdminOptions& o, const std::optional<std::string>& older_than) {
  return run_sync(purge(o, older_than));
}
int cmd_directive(const AdminOptions& o, const std::string& worker_id, const std::string& which) {
  return run_sync(directive(o, worker_id, which));
}

}  // namespace nymph::control::admin
