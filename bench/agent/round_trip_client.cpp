// nymph-round-trip-client URL TOKEN_FILE N [CA_FILE]: the /bin/true round trip as a lean client sees it.
//
// Submits N process jobs running /bin/true, one at a time, each as POST /v1/jobs followed by
// GET /v1/jobs/{id}?waitS=60 until the job is final, on one kept-alive connection (nymph's own HTTP client), and
// prints the p50 and p99 of submit -> final in microseconds as "p50_us=... p99_us=... failed=K" (K: jobs whose
// final state was not "succeeded"), then "exchange_p50_us=...": the p50 of N plain GET /v1/jobs/{id} of the last
// job (one HTTP exchange on loopback and one read through nymph-control's database thread, no commit), the
// unit the round trip's hops are made of. The admin token is read from TOKEN_FILE (a 0600 file, as the agent's
// token), never taken from argv.
// bench/agent/run.py runs it beside its Python client: the Python client's own request handling is about a
// millisecond of each round trip on this machine, which this client does not add.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include "agent/config.hpp"
#include "bench/control_server.hpp"
#include "http/client.hpp"
#include "protocol/routes.hpp"
#include "protocol/types.hpp"

namespace asio = boost::asio;
namespace http = nymph::http;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// The reply's JSON object; throws (a bench failure) on a transport error or a non-2xx status.
asio::awaitable<json::object> call(http::Client& client, http::Method method, std::string target, std::string token,
                                   std::string body = {}) {
  http::Request req;
  req.method = method;
  req.target = std::move(target);
  req.bearer_token = std::move(token);
  req.body = std::move(body);
  req.timeout = 120s;
  auto reply = co_await client.request(std::move(req));
  if (!reply) throw std::runtime_error(reply.error().message);
  if (!reply->ok()) throw std::runtime_error("HTTP " + std::to_string(reply->status) + ": " + reply->body);
  co_return json::parse(reply->body).as_object();
}

// One job submitted and waited for; returns its id, or nullopt when it did not succeed.
asio::awaitable<std::optional<std::string>> round_trip(http::Client& client, const std::string& token) {
  auto job = co_await call(client, http::Method::post, nymph::protocol::jobs_path(), token,
                           R"({"runner":"process","argv":["/bin/true"]})");
  std::string id(job.at("id").as_string());
  for (;;) {
    auto now = co_await call(client, http::Method::get, nymph::protocol::job_path(id) + "?waitS=60", token);
    auto state = nymph::protocol::parse_job_state(now.at("state").as_string());
    if (!state) throw std::runtime_error("job " + id + " has an unknown state");
    if (nymph::protocol::is_final(*state))
      co_return *state == nymph::protocol::JobState::succeeded ? std::optional(id) : std::nullopt;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s URL TOKEN_FILE N [CA_FILE]\n", argv[0]);
    return 2;
  }
  auto token_file = nymph::agent::read_token_file(argv[2]);
  if (!token_file) return (std::fprintf(stderr, "%s\n", token_file.error().message.c_str()), 2);
  const std::string token = std::move(*token_file);
  const int n = std::atoi(argv[3]);
  if (n < 1) return (std::fprintf(stderr, "N must be at least 1\n"), 2);
  http::ClientConfig config;
  if (argc == 5) config.ca_file = argv[4];
  asio::io_context ioc(1);
  auto client = http::Client::create(ioc.get_executor(), argv[1], config);
  if (!client) return (std::fprintf(stderr, "%s\n", client.error().message.c_str()), 2);
  std::vector<double> micros, exchange_micros;
  int failed = 0;
  auto since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  auto all = [&]() -> asio::awaitable<void> {
    std::string last;
    for (int i = 0; i < n; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto id = co_await round_trip(*client, token);
      micros.push_back(since(t0));
      if (id) last = *id;
      else ++failed;
    }
    if (last.empty()) co_return;
    for (int i = 0; i < n; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      co_await call(*client, http::Method::get, nymph::protocol::job_path(last), token);
      exchange_micros.push_back(since(t0));
    }
  };
  auto done = asio::co_spawn(ioc, all(), asio::use_future);
  ioc.run();
  try {
    done.get();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "round trip failed: %s\n", e.what());
    return 1;
  }
  using nymph::bench::percentile;  // 0 for no samples
  std::printf("p50_us=%.0f p99_us=%.0f failed=%d exchange_p50_us=%.0f\n", percentile(micros, 0.5),
              percentile(micros, 0.99), failed, percentile(exchange_micros, 0.5));
  return 0;
}
