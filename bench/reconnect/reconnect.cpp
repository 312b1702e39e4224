// bench/reconnect: 1 000 agents coming back to nymph-control after an outage (issue 15, "Quick, gentle recovery").
//
//   reconnect [--server-binary PATH] [--agents 1000] [--outage-ms 3000]
//
// Starts `nymph-control serve` on a temporary database and measures two rounds of the same 1 000 simulated agents
// (each with its own launch id), each registering (POST /v1/workers) and then polling with one free slot; a
// queued job for every agent makes that first poll answer at once, so "first successful poll" is a reply, not a
// held request:
//   baseline  the server is up; every agent registers at t0 (the same registrations, no outage);
//   outage    the agents hold polls; the server is killed (SIGKILL) and started again on the same port and
//             database after --outage-ms; each agent, from the moment its held poll failed, retries its
//             registration with the agent's reconnect policy (agent/backoff.hpp: full jitter, 500 ms doubling
//             to a 5 s cap) until one succeeds, then polls. t0 is when the restarted server listens again.
// For each round it prints registrations completed per 1 s bucket after t0, register latency p50/p99 (of the
// successful registration request), and t0 -> first successful poll p50/p99 per agent; the outage figures stand
// next to the baseline's with their ratio. Then `cat /proc/loadavg`.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "agent/backoff.hpp"
#include "bench/control_server.hpp"
#include "common/ulid.hpp"
#include "http/client.hpp"
#include "protocol/protocol.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nymph::bench::percentile;
using nymph::bench::rethrow_error;

namespace {

// What one round measured.
struct Round {
  std::vector<double> register_ms;       // latency of each agent's successful registration request
  std::vector<double> first_poll_ms;     // t0 -> the agent's first successful poll reply
  std::vector<Clock::time_point> registered_at;
  std::map<long, int> buckets;           // registrations completed in second k after t0
  int failed_attempts = 0;               // registration attempts that failed (server down)
};

struct Agent {
  std::string launch_id, worker_id, credential;
};

struct Bench {
  asio::io_context& ioc;
  http::Client client;
  std::string agent_token, admin_token;

  static http::Request req(http::Method m, std::string target, std::string token, std::string body = {},
                           std::chrono::milliseconds timeout = 60s) {
    http::Request r;
    r.method = m;
    r.target = std::move(target);
    r.bearer_token = std::move(token);
    r.body = std::move(body);
    r.timeout = timeout;
    return r;
  }

  static std::string poll_body(int free) {
    p::PollRequest r;
    r.free = {{"process", free}};
    return p::to_json_text(r);
  }

  // One registration request; nullopt when it failed (connection refused or reset, 503, ...).
  asio::awaitable<std::optional<double>> try_register(Agent& a) {
    p::RegisterRequest r;
    r.launch_id = a.launch_id;
    r.hostname = "bench";
    r.runners = {"process"};
    r.capacity = {{"process", 1}};
    auto start = Clock::now();
    auto res = co_await client.request(req(http::Method::post, p::workers_path(), agent_token, p::to_json_text(r), 30s));
    if (!res || (res->status != 200 && res->status != 201)) co_return std::nullopt;
    auto reply = p::parse_as<p::RegisterResponse>(res->body).value();
    a.worker_id = reply.worker_id;
    a.credential = reply.worker_token;
    co_return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }

  // Registers (retrying with the agent's backoff, from `start` on), then polls until a poll is answered 200.
  // `t0` is read when the first poll succeeds (the outage round sets it once the server is back), so it is a
  // reference to the bench's variable, which outlives every agent.
  asio::awaitable<void> come_back(Agent& a, Round& round, const Clock::time_point& t0, Clock::time_point start,
                                  std::uint64_t seed) {
    nymph::agent::Backoff backoff({500ms, 5000ms}, seed);
    asio::steady_timer timer(ioc);
    timer.expires_at(start);
    co_await timer.async_wait(asio::use_awaitable);
    std::optional<double> ms;
    while (!(ms = co_await try_register(a))) {
      ++round.failed_attempts;
      timer.expires_after(backoff.next_delay());
      co_await timer.async_wait(asio::use_awaitable);
    }
    backoff.reset();
    auto done = Clock::now();
    round.register_ms.push_back(*ms);
    round.registered_at.push_back(done);
    for (;;) {
      auto r = co_await client.request(req(http::Method::post, p::poll_path(a.worker_id), a.credential, poll_body(1)));
      if (r && r->status == 200) break;
      timer.expires_after(backoff.next_delay());
      co_await timer.async_wait(asio::use_awaitable);
    }
    round.first_poll_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }

  // Holds a poll (no free slot) until the server answers it or the connection fails; then the agent comes
  // back as in come_back, from the moment its poll failed.
  asio::awaitable<void> hold_then_come_back(Agent& a, Round& round, const Clock::time_point& t0, std::uint64_t seed) {
    for (;;) {
      auto r = co_await client.request(req(http::Method::post, p::poll_path(a.worker_id), a.credential, poll_body(0), 120s));
      if (!r || r->status >= 500) break;  // the server went away
    }
    co_await come_back(a, round, t0, Clock::now(), seed);
  }

  asio::awaitable<void> submit(int n) {
    p::JobSubmission s;
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    std::string body = p::to_json_text(s);
    for (int i = 0; i < n; ++i) (void)(co_await client.request(req(http::Method::post, p::jobs_path(), admin_token, body))).value();
  }

  asio::awaitable<int> held_polls() {
    auto m = co_await client.request(req(http::Method::get, "/metrics", ""));
    if (!m) co_return -1;
    auto at = m->body.find("\nnymph_held_polls ");
    co_return at == std::string::npos ? -1 : std::stoi(m->body.substr(at + 18));
  }
};

void finish(Round& r, Clock::time_point t0) {
  for (auto t : r.registered_at)
    ++r.buckets[static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(t - t0).count())];
}

std::string ratio(double a, double b) {
  if (b <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2gx", a / b);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string binary = NYMPH_CONTROL_BINARY_DEFAULT;
  int n = 1000;
  int outage_ms = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--server-binary") binary = v;
    else if (a == "--agents") n = std::stoi(v);
    else if (a == "--outage-ms") outage_ms = std::stoi(v);
    else {
      std::cerr << "usage: reconnect [--server-binary PATH] [--agents N] [--outage-ms MS]\n";
      return 2;
    }
  }
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);  // the server inherits it

  std::string dir = std::filesystem::temp_directory_path().string() + "/nymph-bench-XXXXXX";
  if (!::mkdtemp(dir.data())) return 1;
  const std::string db = dir + "/c.db";
  std::string agent = nymph::bench::run_capture({binary, "token", "create", "--db", db, "--role", "agent"});
  std::string admin = nymph::bench::run_capture({binary, "token", "create", "--db", db, "--role", "admin"});
  const std::vector<std::string> knobs{"--poll-timeout", "60s", "--stale-after", "900s", "--lease-ttl", "900s"};
  nymph::bench::Server server = nymph::bench::start_server(binary, db, knobs);
  const std::string listen = server.url.substr(server.url.rfind('/') + 1);  // 127.0.0.1:PORT, kept on restart
  std::printf("nymph-control %s (pid %d), %d agents, outage %d ms, fd limit %llu\n", server.url.c_str(), server.pid,
              n, outage_ms, static_cast<unsigned long long>(lim.rlim_cur));

  asio::io_context ioc(1);
  http::ClientConfig cfg;
  cfg.max_idle_connections = static_cast<std::size_t>(n) + 16;
  cfg.connect_timeout = 5s;
  Bench b{ioc, http::Client::create(ioc.get_executor(), server.url, cfg).value(), agent, admin};
  std::vector<Agent> agents(static_cast<std::size_t>(n));
  nymph::UlidGenerator ids;
  for (auto& a : agents) a.launch_id = ids.next().value().str();
  Round baseline, outage;
  Clock::time_point t0_base{}, t0_outage{};

  auto main_coro = [&]() -> asio::awaitable<void> {
    asio::steady_timer t(ioc);
    auto wait_for = [&](int count, std::vector<double>& v) -> asio::awaitable<void> {
      while (static_cast<int>(v.size()) < count) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
      }
    };
    // Baseline: every agent registers at t0 and polls; a queued job answers each first poll at once.
    co_await b.submit(n);
    t0_base = Clock::now();
    for (std::size_t i = 0; i < agents.size(); ++i)
      asio::co_spawn(ioc, b.come_back(agents[i], baseline, t0_base, t0_base, i + 1), rethrow_error);
    co_await wait_for(n, baseline.first_poll_ms);
    finish(baseline, t0_base);

    // Outage: the agents hold polls; jobs wait for them; the server dies and comes back.
    co_await b.submit(n);
    for (std::size_t i = 0; i < agents.size(); ++i)
      asio::co_spawn(ioc, b.hold_then_come_back(agents[i], outage, t0_outage, 100000 + i), rethrow_error);
    while (co_await b.held_polls() < n) {
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    ::kill(server.pid, SIGKILL);
    ::waitpid(server.pid, nullptr, 0);
    t.expires_after(std::chrono::milliseconds(outage_ms));
    co_await t.async_wait(asio::use_awaitable);
    // Blocking start (the agents' timers wait meanwhile, as they would): t0 is when it listens again.
    server = nymph::bench::start_server(binary, db, knobs, listen);
    t0_outage = Clock::now();
    co_await wait_for(n, outage.first_poll_ms);
    finish(outage, t0_outage);
  };
  auto done = asio::co_spawn(ioc, main_coro(), asio::use_future);
  while (done.wait_for(0s) != std::future_status::ready) ioc.run_one_for(100ms);
  int rc = 0;
  try {
    done.get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    rc = 1;
  }
  if (rc == 0) {
    std::printf("\nregistrations completed per second after t0 (baseline: all register at t0; outage: t0 = the "
                "restarted server listens)\n%-8s %10s %10s\n", "second", "baseline", "outage");
    long last = 0;
    for (const auto& [k, v] : baseline.buckets) last = std::max(last, k);
    for (const auto& [k, v] : outage.buckets) last = std::max(last, k);
    for (long k = 0; k <= last; ++k)
      std::printf("%-8ld %10d %10d\n", k, baseline.buckets.count(k) ? baseline.buckets[k] : 0,
                  outage.buckets.count(k) ? outage.buckets[k] : 0);
    std::printf("\n%-36s %10s %10s %8s\n", "", "baseline", "outage", "ratio");
    auto row = [](const char* what, double a, double o) {
      std::printf("%-36s %10.1f %10.1f %8s\n", what, a, o, ratio(o, a).c_str());
    };
    row("register latency p50 (ms)", percentile(baseline.register_ms, 0.5), percentile(outage.register_ms, 0.5));
    row("register latency p99 (ms)", percentile(baseline.register_ms, 0.99), percentile(outage.register_ms, 0.99));
    row("t0 -> first successful poll p50 (ms)", percentile(baseline.first_poll_ms, 0.5),
        percentile(outage.first_poll_ms, 0.5));
    row("t0 -> first successful poll p99 (ms)", percentile(baseline.first_poll_ms, 0.99),
        percentile(outage.first_poll_ms, 0.99));
    std::printf("%-36s %10d %10d\n", "failed registration attempts", baseline.failed_attempts, outage.failed_attempts);
    std::printf("\n/proc/loadavg: %s\n", nymph::bench::run_capture({"cat", "/proc/loadavg"}).c_str());
  }
  server.stop();
  ioc.stop();
  std::filesystem::remove_all(dir);
  return rc;
}
