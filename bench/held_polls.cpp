// bench/held_polls: the cost of idle held polls in nymph-control, and the submit -> poll-reply wake-up latency.
//
//   held_polls [--server-binary PATH] [--counts 1000,10000] [--wakeups 200] [--idle-seconds 5]
//
// Starts `nymph-control serve` on a temporary database (poll timeout 600 s), registers idle workers whose only
// runner is "idle" (so no submitted job can wake them) and holds one poll open per worker. For each count it
// prints the server's RSS and its CPU time over an idle window, then measures wake-up latency: a dedicated
// "process" worker parks a poll, the bench submits a job, and the time from sending the submit to receiving
// the poll reply carrying that job is recorded; p50/p99 are printed.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "common/ulid.hpp"
#include "bench/control_server.hpp"


namespace asio = boost::asio;

namespace p = nymph::protocol;
namespace http = nymph::http;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

using nymph::bench::percentile;
using nymph::bench::rethrow_error;
using nymph::bench::run_capture;
using nymph::bench::Server;

// A process's CPU seconds (user+system), from /proc.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  // After "pid (comm) ": state is f[0]; utime and stime are fields 14 and 15 of stat, i.e. f[11] and f[12].
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct Bench {
  asio::io_context& ioc;
  http::Client client;
  std::string agent, admin;
  nymph::UlidGenerator ids;  // launch ids of the registered workers

  http::Request req(http::Method m, std::string target, std::string token, std::string body = {}) {
    http::Request r;
    r.method = m;
    r.target = std::move(target);
    r.bearer_token = std::move(token);
    r.body = std::move(body);
    r.timeout = 900s;
    return r;
  }

  // A registered worker: its id and its credential.
  struct Worker {
    std::string id, credential;
  };

  asio::awaitable<Worker> register_worker(std::string runner) {
    p::RegisterRequest r;
    r.launch_id = ids.next().value().str();
    r.hostname = "bench";
    r.runners = {runner};
    auto res = co_await client.request(req(http::Method::post, p::workers_path(), agent, p::to_json_text(r)));
    auto reply = p::parse_as<p::RegisterResponse>(res.value().body).value();
    co_return Worker{reply.worker_id, reply.worker_token};
  }

  static std::string poll_body(const std::string& runner) {
    p::PollRequest r;
    r.free = {{runner, 1}};
    return p::to_json_text(r);
  }

  // One idle worker: registers, then holds a poll until the server answers it (after 600 s or at shutdown).
  asio::awaitable<void> idle_worker() {
    Worker w = co_await register_worker("idle");
    co_await client.request(req(http::Method::post, p::poll_path(w.id), w.credential, poll_body("idle")));
  }

  asio::awaitable<int> held_polls() {
    auto m = co_await client.request(req(http::Method::get, "/metrics", ""));
    auto& body = m.value().body;
    auto at = body.find("\nnymph_held_polls ");
    co_return std::stoi(body.substr(at + 18));
  }

  asio::awaitable<void> wait_held(int n) {
    asio::steady_timer t(ioc);
    while (co_await held_polls() < n) {
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
  }

  // Adds `n` idle held polls, `batch` connections at a time.
  asio::awaitable<void> add_idle(int n, int already) {
    const int batch = 250;
    for (int done = 0; done < n; done += batch) {
      int k = std::min(batch, n - done);
      for (int i = 0; i < k; ++i) asio::co_spawn(ioc, idle_worker(), rethrow_error);
      co_await wait_held(already + done + k);
    }
  }

  // submit -> poll reply latencies in microseconds, for `rounds` wake-ups of one "process" worker.
  asio::awaitable<std::vector<double>> wakeups(int rounds, int idle) {
    Worker w = co_await register_worker("process");
    std::vector<double> us;
    for (int i = 0; i < rounds; ++i) {
      Clock::time_point sent{};
      auto poll = [&]() -> asio::awaitable<void> {
        auto r = co_await client.request(req(http::Method::post, p::poll_path(w.id), w.credential, poll_body("process")));
        auto got = Clock::now();
        auto reply = p::parse_as<p::PollResponse>(r.value().body).value();
        if (reply.jobs.empty()) throw std::runtime_error("poll returned without the job");
        us.push_back(std::chrono::duration<double, std::micro>(got - sent).count());
      };
      asio::co_spawn(ioc, poll(), rethrow_error);
      co_await wait_held(idle + 1);
      p::JobSubmission s;
      s.spec.argv = std::vector<std::string>{"/bin/true"};
      std::string body = p::to_json_text(s);
      sent = Clock::now();
      co_await client.request(req(http::Method::post, p::jobs_path(), admin, body));
      asio::steady_timer t(ioc);
      while (us.size() < static_cast<std::size_t>(i) + 1) {
        t.expires_after(1ms);
        co_await t.async_wait(asio::use_awaitable);
      }
    }
    co_return us;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string binary = NYMPH_CONTROL_BINARY_DEFAULT;
  std::vector<int> counts{1000, 10000};
  int rounds = 200;
  int idle_seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--server-binary") binary = v;
    else if (a == "--wakeups") rounds = std::stoi(v);
    else if (a == "--idle-seconds") idle_seconds = std::stoi(v);
    else if (a == "--counts") {
      counts.clear();
      std::stringstream ss(v);
      std::string x;
      while (std::getline(ss, x, ',')) counts.push_back(std::stoi(x));
    } else {
      std::cerr << "usage: held_polls [--server-binary PATH] [--counts 1000,10000] [--wakeups N] [--idle-seconds S]\n";
      return 2;
    }
  }
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);  // the server inherits it

  std::string dir = std::filesystem::temp_directory_path().string() + "/nymph-bench-XXXXXX";
  if (!::mkdtemp(dir.data())) return 1;
  std::string agent = run_capture({binary, "token", "create", "--db", dir + "/c.db", "--role", "agent"});
  std::string admin = run_capture({binary, "token", "create", "--db", dir + "/c.db", "--role", "admin"});
  Server server = nymph::bench::start_server(
      binary, dir + "/c.db", {"--poll-timeout", "600s", "--stale-after", "900s", "--lease-ttl", "900s"});
  std::printf("nymph-control %s (pid %d), fd limit %llu\n", server.url.c_str(), server.pid,
              static_cast<unsigned long long>(lim.rlim_cur));

  asio::io_context ioc(1);
  http::ClientConfig cfg;
  cfg.max_idle_connections = 16;
  Bench b{ioc, http::Client::create(ioc.get_executor(), server.url, cfg).value(), agent, admin};
  auto main_coro = [&]() -> asio::awaitable<void> {
    std::printf("%-12s %10s %14s %12s %12s %12s\n", "held polls", "RSS MiB", "CPU ms/s idle", "wake p50 us",
                "wake p99 us", "wake max us");
    auto report = [&](int held) -> asio::awaitable<void> {
      double cpu0 = cpu_seconds(server.pid);
      asio::steady_timer t(ioc, std::chrono::seconds(idle_seconds));
      co_await t.async_wait(asio::use_awaitable);
      double cpu = (cpu_seconds(server.pid) - cpu0) * 1000.0 / idle_seconds;
      long rss = nymph::bench::status_kib(server.pid);
      auto us = co_await b.wakeups(rounds, held);
      std::printf("%-12d %10.1f %14.3f %12.0f %12.0f %12.0f\n", held, static_cast<double>(rss) / 1024.0, cpu,
                  percentile(us, 0.5), percentile(us, 0.99), percentile(us, 1.0));
      std::fflush(stdout);
    };
    co_await report(0);
    int held = 0;
    for (int n : counts) {
      co_await b.add_idle(n - held, held);
      held = n;
      co_await report(held);
    }
  };
  auto done = asio::co_spawn(ioc, main_coro(), asio::use_future);
  // Run until the measurements are done, then stop the server (its SIGTERM path answers the idle polls).
  while (done.wait_for(0s) != std::future_status::ready) ioc.run_one_for(100ms);
  int rc = 0;
  try {
    done.get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    rc = 1;
  }
  server.stop();
  ioc.stop();
  std::filesystem::remove_all(dir);
  return rc;
}
