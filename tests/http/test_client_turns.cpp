// http::Client's max_concurrent_requests, against a loopback server that holds every reply until it is told to
// answer: a burst of requests is a few requests on the wire at a time, over kept-alive connections, and an
// unqueued request (the agent's long poll) never waits behind them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <string>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "common/coroutine_warning.hpp"
#include "http/client.hpp"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

// Accepts connections on 127.0.0.1 and reads requests on them; holds every reply until release(), after which
// it answers what it holds and everything later at once (200, "{}", keep-alive).
class HoldingServer {
 public:
  explicit HoldingServer(asio::io_context& io)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        gate_(io, asio::steady_timer::time_point::max()) {
    asio::co_spawn(io, accept_loop(), rethrow);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  std::size_t held() const { return held_; }          // requests read and not answered
  std::size_t most_held() const { return most_held_; }
  std::size_t connections() const { return connections_; }  // accepted so far
  void release() {
    releasing_ = true;
    gate_.cancel();
  }
  void stop() { acceptor_.close(); }

 private:
  NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      ++connections_;
      asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), rethrow);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      bhttp::request<bhttp::string_body> request;
      auto [read_error, n] = co_await bhttp::async_read(socket, buffer, request, asio::as_tuple(asio::use_awaitable));
      if (read_error) co_return;
      most_held_ = std::max(most_held_, ++held_);
      while (!releasing_) co_await gate_.async_wait(asio::as_tuple(asio::use_awaitable));
      --held_;
      bhttp::response<bhttp::string_body> reply{bhttp::status::ok, 11};
      reply.set(bhttp::field::content_type, "application/json");
      reply.keep_alive(true);
      reply.body() = "{}";
      reply.prepare_payload();
      auto [write_error, m] = co_await bhttp::async_write(socket, reply, asio::as_tuple(asio::use_awaitable));
      if (write_error) co_return;
    }
  }
  NYMPH_GCC_PR109224_END

  tcp::acceptor acceptor_;
  asio::steady_timer gate_;  // its waiters are the held requests; release() cancels it
  bool releasing_ = false;
  std::size_t held_ = 0, most_held_ = 0, connections_ = 0;
};

// Runs `io` until `done()`, failing (instead of hanging) when it takes more than 20 s.
void run_until(asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
    io.run_one_for(100ms);
  }
}

struct Outcomes {
  int done = 0;
  int ok = 0;
};

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<void> one_request(nymph::http::Client& client, Outcomes& out, bool unqueued) {
  // A named request: built as a braced temporary inside the co_await expression, GCC 12 destroyed it with a bad
  // pointer (ASan: a free of an address that was not malloc'ed, inside a coroutine frame).
  nymph::http::Request request{.method = nymph::http::Method::post, .target = "/x", .body = "{}", .unqueued = unqueued};
  auto r = co_await client.request(std::move(request));
  ++out.done;
  if (r && r->ok()) ++out.ok;
}
NYMPH_GCC_PR109224_END

void start_request(asio::io_context& io, nymph::http::Client& client, Outcomes& out, bool unqueued = false) {
  asio::co_spawn(io, one_request(client, out, unqueued), rethrow);
}

}  // namespace

TEST(ClientTurns, AtMostMaxConcurrentRequestsAreOnTheWireTheOthersWaitTheirTurn) {
  asio::io_context io;
  HoldingServer server(io);
  auto client = nymph::http::Client::create(io.get_executor(), server.url(),
                                            {.max_idle_connections = 9, .max_concurrent_requests = 8}).value();
  Outcomes out;
  for (int i = 0; i < 40; ++i) start_request(io, client, out);
  // Either the server holds more than 8 (the limit failed), or it holds 8 while the client queues the rest.
  run_until(io, [&] { return server.held() > 8 || (server.held() == 8 && client.queued_requests() == 32); });
  EXPECT_EQ(server.held(), 8u);
  EXPECT_EQ(client.queued_requests(), 32u);

  server.release();
  run_until(io, [&] { return out.done == 40; });
  EXPECT_EQ(out.ok, 40);
  EXPECT_EQ(server.most_held(), 8u);
  EXPECT_EQ(server.connections(), 8u);  // the later turns reused the kept-alive connections
  EXPECT_EQ(client.queued_requests(), 0u);
  server.stop();
}

TEST(ClientTurns, AnUnqueuedRequestGoesOutWhileEveryTurnIsTaken) {
  asio::io_context io;
  HoldingServer server(io);
  auto client = nymph::http::Client::create(io.get_executor(), server.url(),
                                            {.max_idle_connections = 9, .max_concurrent_requests = 2}).value();
  Outcomes queued, poll;
  for (int i = 0; i < 5; ++i) start_request(io, client, queued);
  run_until(io, [&] { return server.held() == 2 && client.queued_requests() == 3; });
  start_request(io, client, poll, /*unqueued=*/true);
  run_until(io, [&] { return server.held() == 3; });  // on the wire beside the two, not behind the three
  EXPECT_EQ(client.queued_requests(), 3u);

  server.release();
  run_until(io, [&] { return queued.done == 5 && poll.done == 1; });
  EXPECT_EQ(queued.ok, 5);
  EXPECT_EQ(poll.ok, 1);
  server.stop();
}
