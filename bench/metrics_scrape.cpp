// bench/metrics_scrape: what unauthenticated /metrics scrapers cost the agents of a large control plane.
//
//   metrics_scrape [--server-binary PATH] [--jobs 100000] [--rounds 200] [--scrapers 16]
//
// Fills a fresh database with `--jobs` finished jobs (through the Store, in one transaction), starts
// `nymph-control serve` on it, and times `--rounds` rounds of what an agent's life costs the server:
// register a new worker, submit a job (admin), poll it (the worker takes the job). It prints the round's
// p50/p99 first with nothing else going on (the baseline), then while `--scrapers` clients fetch /metrics
// back to back, and the ratio of the two p50s (target: at most 1.2).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "bench/control_server.hpp"
#include "common/ulid.hpp"
#include "control/store.hpp"
#include "http/client.hpp"
#include "protocol/protocol.hpp"

namespace asio = boost::asio;
namespace p = nymph::protocol;
namespace http = nymph::http;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// `n` finished jobs in the database at `db`, written in one transaction without a server.
void fill(const std::string& db, int n) {
  auto store = nymph::control::Store::open(db);
  store->exec("BEGIN");
  p::JobSubmission s;
  s.spec.argv = std::vector<std::string>{"/bin/true"};
  for (int i = 0; i < n; ++i) store->submit(s, std::chrono::system_clock::now());
  store->exec("UPDATE jobs SET state='succeeded', exit_code=0, finished_at=updated_at");
  store->exec("COMMIT");
}

http::Request request(http::Method m, std::string target, std::string token, std::string body = {}) {
  http::Request r;
  r.method = m;
  r.target = std::move(target);
  r.bearer_token = std::move(token);
  r.body = std::move(body);
  r.timeout = 120s;
  return r;
}

struct Bench {
  http::Client& client;
  std::string agent, admin;
  nymph::UlidGenerator ids;

  // One register + submit + poll, in microseconds.
  asio::awaitable<double> round() {
    auto start = Clock::now();
    p::RegisterRequest reg;
    reg.launch_id = ids.next().value().str();
    reg.hostname = "bench";
    reg.runners = {"process"};
    auto r = co_await client.request(request(http::Method::post, p::workers_path(), agent, p::to_json_text(reg)));
    auto worker = p::parse_as<p::RegisterResponse>(r.value().body).value();
    p::JobSubmission s;
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    auto sub = co_await client.request(request(http::Method::post, p::jobs_path(), admin, p::to_json_text(s)));
    if (sub.value().status != 201) throw std::runtime_error("submit: " + sub.value().body);
    auto poll = co_await client.request(request(http::Method::post, p::poll_path(worker.worker_id), worker.worker_token,
                                                R"({"free":{"process":1}})"));
    auto reply = p::parse_as<p::PollResponse>(poll.value().body).value();
    if (reply.jobs.empty()) throw std::runtime_error("the poll returned no job");
    co_return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }

  asio::awaitable<std::vector<double>> rounds(int n) {
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(std::max(n, 0)));
    for (int i = 0; i < n; ++i) us.push_back(co_await round());
    co_return us;
  }
};

// Fetches /metrics back to back on its own connection until `stop`; counts the scrapes.
asio::awaitable<void> scrape(http::Client& client, const std::atomic<bool>& stop, long& scrapes) {
  while (!stop) {
    auto r = co_await client.request(request(http::Method::get, "/metrics", ""));
    if (!r || r->status != 200) throw std::runtime_error("/metrics failed");
    ++scrapes;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string binary = NYMPH_CONTROL_BINARY_DEFAULT;
  int jobs = 100'000, rounds = 200, scrapers = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--server-binary") binary = v;
    else if (a == "--jobs") jobs = std::stoi(v);
    else if (a == "--rounds") rounds = std::stoi(v);
    else if (a == "--scrapers") scrapers = std::stoi(v);
    else {
      std::cerr << "usage: metrics_scrape [--server-binary PATH] [--jobs N] [--rounds N] [--scrapers N]\n";
      return 2;
    }
  }
  std::string dir = std::filesystem::temp_directory_path().string() + "/nymph-bench-XXXXXX";
  if (!::mkdtemp(dir.data())) return 1;
  std::string db = dir + "/c.db";
  auto filled = Clock::now();
  fill(db, jobs);
  std::printf("%d finished jobs written in %.1f s\n", jobs, std::chrono::duration<double>(Clock::now() - filled).count());
  std::string agent = nymph::bench::run_capture({binary, "token", "create", "--db", db, "--role", "agent"});
  std::string admin = nymph::bench::run_capture({binary, "token", "create", "--db", db, "--role", "admin"});
  auto server = nymph::bench::start_server(binary, db, {"--poll-timeout", "1s"});

  asio::io_context ioc(1);
  auto client = http::Client::create(ioc.get_executor(), server.url).value();
  std::vector<http::Client> scraper_clients;
  scraper_clients.reserve(static_cast<std::size_t>(std::max(scrapers, 0)));
  for (int i = 0; i < scrapers; ++i) scraper_clients.push_back(http::Client::create(ioc.get_executor(), server.url).value());
  Bench bench{client, agent, admin, {}};
  std::atomic<bool> stop{false};
  long scrapes = 0;
  double scrape_seconds = 0;
  std::vector<double> quiet, scraped;
  auto main_coro = [&]() -> asio::awaitable<void> {
    co_await bench.rounds(10);  // warm-up: connections, caches
    quiet = co_await bench.rounds(rounds);
    for (auto& c : scraper_clients) asio::co_spawn(ioc, scrape(c, stop, scrapes), nymph::bench::rethrow_error);
    auto start = Clock::now();
    scraped = co_await bench.rounds(rounds);
    scrape_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stop = true;
  };
  auto done = asio::co_spawn(ioc, main_coro(), asio::use_future);
  int rc = 0;
  try {
    while (done.wait_for(0s) != std::future_status::ready) ioc.run_one_for(100ms);
    done.get();
    ioc.run_for(2s);  // the scrapers finish their last request
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    rc = 1;
  }
  server.stop();
  std::filesystem::remove_all(dir);
  if (rc != 0) return rc;
  using nymph::bench::percentile;
  std::printf("%-34s %12s %12s\n", "register+submit+poll", "p50 ms", "p99 ms");
  std::printf("%-34s %12.2f %12.2f\n", "quiet (baseline)", percentile(quiet, 0.5) / 1000, percentile(quiet, 0.99) / 1000);
  std::printf("%-34s %12.2f %12.2f\n", ("with " + std::to_string(scrapers) + " /metrics scrapers").c_str(),
              percentile(scraped, 0.5) / 1000, percentile(scraped, 0.99) / 1000);
  std::printf("p50 ratio scraped/quiet: %.2f (target <= 1.20); %.0f scrapes/s served meanwhile\n",
              percentile(scraped, 0.5) / percentile(quiet, 0.5), static_cast<double>(scrapes) / scrape_seconds);
  return 0;
}
