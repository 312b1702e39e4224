// The only translation unit with server-side Beast/SSL code (expensive to compile).
#include "control/http_server.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <ctime>
#include <unordered_set>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "control/service.hpp"

namespace nymph::control {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;

Result<ListenConfig> parse_listen(std::string_view text) {
  auto bad = [&] { return fail("invalid listen address '" + std::string(text) + "' (expected HOST:PORT or [V6]:PORT)"); };
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad();
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
  }
  unsigned p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || p > 65535) return bad();
  boost::system::error_code aec;
  asio::ip::make_address(std::string(host), aec);
  if (aec) return fail("invalid listen address '" + std::string(text) + "': the host must be an IP address");
  ListenConfig c;
  c.host = std::string(host);
  c.port = static_cast<std::uint16_t>(p);
  return c;
}

namespace {

constexpr auto kIdleTimeout = 120s;     // keep-alive connection without a request
constexpr auto kReadTimeout = 60s;      // reading one request once it started
constexpr auto kWriteTimeout = 60s;
constexpr auto kHandshakeTimeout = 15s;
constexpr auto kLingerTimeout = 5s;               // draining an oversized request after 413
constexpr std::size_t kLingerBytes = 64 << 20;
constexpr std::size_t kSmallBody = 16 << 10;             // bodies up to this size are read with the default buffer
constexpr std::size_t kLargeBodyReadBuffer = 256 << 10;  // read buffer of a larger body (per request, released after)

// Completes when the peer closes the connection (EOF or error), while a held request is parked. When data
// arrives instead (a pipelined request or a TLS record) it stops watching and waits to be cancelled.
asio::awaitable<void> watch_peer_close(tcp::socket& sock) {
  auto [ec] = co_await sock.async_wait(tcp::socket::wait_read, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return;
  char c;
  ssize_t n = ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) co_return;
  asio::steady_timer forever(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await forever.async_wait(asio::as_tuple(asio::use_awaitable));
}

// RFC 9110 IMF-fixdate of now, e.g. "Sun, 29 Nov 2026 22:40:00 GMT" (clients use it to measure clock skew).
std::string http_date() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return buf;
}

bhttp::response<bhttp::string_body> to_beast(HttpReply r, bool keep_alive) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(r.status), 11};
  res.set(bhttp::field::server, "nymph-control");
  res.set(bhttp::field::date, http_date());
  res.set(bhttp::field::content_type, r.content_type);
  res.set(bhttp::field::cache_control, "no-store");
  for (auto& [k, v] : r.headers) res.set(k, v);
  res.body() = std::move(r.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

}  // namespace

struct HttpServer::Impl {
  asio::io_context& ioc;
  Service& service;
  ListenConfig config;
  std::shared_ptr<spdlog::logger> log;
  tcp::acceptor acceptor;
  std::unique_ptr<ssl::context> tls;
  std::unordered_set<tcp::socket*> sockets;  // open connections, closed by stop()
  bool stopped = false;

  Impl(asio::io_context& io, Service& svc, ListenConfig cfg, std::shared_ptr<spdlog::logger> lg)
      : ioc(io), service(svc), config(std::move(cfg)), log(std::move(lg)), acceptor(io) {}

  // Keeps the socket registered for stop() while a connection coroutine runs.
  struct Registration {
    Impl& impl;
    tcp::socket* sock;
    Registration(Impl& i, tcp::socket& s) : impl(i), sock(&s) { impl.sockets.insert(sock); }
    ~Registration() { impl.sockets.erase(sock); }
  };

  asio::awaitable<void> connection(tcp::socket sock) {
    boost::system::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    if (!tls) {
      beast::tcp_stream stream(std::move(sock));
      Registration reg(*this, stream.socket());
      co_await session(stream, stream.socket());
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(std::move(sock), *tls);
    auto& raw = beast::get_lowest_layer(stream).socket();
    Registration reg(*this, raw);
    beast::get_lowest_layer(stream).expires_after(kHandshakeTimeout);
    auto [hec] = co_await stream.async_handshake(ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      log->debug("TLS handshake failed: {}", hec.message());
      co_return;
    }
    co_await session(stream, raw);
    beast::get_lowest_layer(stream).expires_after(5s);
    co_await stream.async_shutdown(asio::as_tuple(asio::use_awaitable));
  }

  template <class Stream>
  asio::awaitable<bool> send(Stream& stream, HttpReply r, bool keep_alive) {
    auto res = to_beast(std::move(r), keep_alive);
    beast::get_lowest_layer(stream).expires_after(kWriteTimeout);
    auto [ec, n] = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_return !ec;
  }

  // Sends a final error reply, then reads and discards what the client still sends (bounded in time and
  // bytes) before closing, so a client still writing an oversized body reads the reply instead of a reset.
  template <class Stream>
  asio::awaitable<void> reject(Stream& stream, HttpReply r) {
    if (!co_await send(stream, std::move(r), false)) co_return;
    std::vector<char> scratch(64 * 1024);
    std::size_t total = 0;
    beast::get_lowest_layer(stream).expires_after(kLingerTimeout);
    while (total < kLingerBytes) {
      auto [ec, n] = co_await stream.async_read_some(asio::buffer(scratch), asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      total += n;
    }
  }

  // Serves requests on one connection until it closes, errs, or asks not to be kept alive.
  template <class Stream>
  asio::awaitable<void> session(Stream& stream, tcp::socket& sock) {
    const auto& limits = service.config().limits;
    beast::flat_buffer buffer;
    while (!stopped) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
      // Beast checks Content-Length against the body limit while parsing the header: start with the largest
      // limit of any endpoint and narrow it once the target is known.
      parser.body_limit(std::max(limits.max_json_body, limits.max_log_chunk));
      beast::get_lowest_layer(stream).expires_after(kIdleTimeout);
      auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      if (hec == bhttp::error::header_limit) {
        HttpReply rejection = error_reply(431, "headersTooLarge", "request line and headers exceed " +
                                                                     std::to_string(limits.max_header_bytes) + " bytes");
        co_await reject(stream, std::move(rejection));
        co_return;
      }
      if (hec == bhttp::error::body_limit) {
        HttpReply rejection = error_reply(413, "bodyTooLarge", "request body exceeds " +
                                                                 std::to_string(limits.max_log_chunk) + " bytes");
        co_await reject(stream, std::move(rejection));
        co_return;
      }
      if (hec == bhttp::error::end_of_stream || hec == asio::error::eof || hec == beast::error::timeout ||
          hec == asio::error::operation_aborted || hec == asio::error::connection_reset)
        co_return;
      if (hec) {
        HttpReply bad = error_reply(400, "badRequest", "malformed HTTP request: " + hec.message());
        co_await send(stream, std::move(bad), false);
        co_return;
      }
      // Route, credential and path are checked before a byte of the body is read: a request that fails them
      // costs the server its header only.
      auto& head = parser.get();
      HttpRequest head_only{std::string(head.method_string()), std::string(head.target()),
                            std::string(head[bhttp::field::authorization]), {}};
      auto admitted = co_await service.admit(std::move(head_only));
      if (!admitted) {
        bool body_pending = parser.chunked() || parser.content_length().value_or(0) > 0;
        if (body_pending) {  // the unread body makes the connection unusable for another request
          co_await reject(stream, std::move(admitted.error()));
          co_return;
        }
        bool again = parser.keep_alive() && !stopped;
        if (!co_await send(stream, std::move(admitted.error()), again) || !again) co_return;
        continue;
      }
      std::size_t limit = admitted->body_limit;
      if (parser.content_length() && *parser.content_length() > limit) {
        HttpReply rejection = error_reply(413, "bodyTooLarge", "request body exceeds " + std::to_string(limit) + " bytes");
        co_await reject(stream, std::move(rejection));
        co_return;
      }
      parser.body_limit(limit);
      if (beast::iequals(head[bhttp::field::expect], "100-continue")) {
        bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
        beast::get_lowest_layer(stream).expires_after(kWriteTimeout);
        auto [cec, cn] = co_await bhttp::async_write(stream, cont, asio::as_tuple(asio::use_awaitable));
        if (cec) co_return;
      }
      // Beast reads at most the buffer's free capacity per call (512 bytes at least): give a large body a large
      // buffer for this request only, so a 1 MiB log upload takes a few reads instead of two thousand.
      if (auto length = parser.content_length(); length && *length > kSmallBody)
        buffer.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, kLargeBodyReadBuffer)));
      beast::get_lowest_layer(stream).expires_after(kReadTimeout);
      auto [bec, bn] = co_await bhttp::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      if (buffer.capacity() > kSmallBody) buffer.shrink_to_fit();
      if (bec == bhttp::error::body_limit) {
        HttpReply rejection = error_reply(413, "bodyTooLarge", "request body exceeds " + std::to_string(limit) + " bytes");
        co_await reject(stream, std::move(rejection));
        co_return;
      }
      if (bec) co_return;
      bool keep_alive = parser.get().keep_alive();
      admitted->request.body = std::move(parser.get().body());
      beast::get_lowest_layer(stream).expires_never();
      HttpReply reply;
      if (admitted->may_hold) {
        auto r = co_await (service.handle(std::move(*admitted)) || watch_peer_close(sock));
        if (r.index() == 1) co_return;  // the peer went away; the held request was cancelled
        reply = std::get<0>(std::move(r));
      } else {
        reply = co_await service.handle(std::move(*admitted));
      }
      if (!co_await send(stream, std::move(reply), keep_alive && !stopped)) co_return;
      if (!keep_alive) co_return;
    }
  }
};

HttpServer::HttpServer(asio::io_context& ioc, Service& service, ListenConfig config, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(ioc, service, std::move(config), std::move(log))) {
  auto& c = impl_->config;
  if (c.tls_cert || c.tls_key) {
    if (!c.tls_cert || !c.tls_key) throw std::runtime_error("--tls-cert and --tls-key go together");
    impl_->tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    impl_->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                            ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    boost::system::error_code ec;
    impl_->tls->use_certificate_chain_file(*c.tls_cert, ec);
    if (ec) throw std::runtime_error("cannot load TLS certificate '" + *c.tls_cert + "': " + ec.message());
    impl_->tls->use_private_key_file(*c.tls_key, ssl::context::pem, ec);
    if (ec) throw std::runtime_error("cannot load TLS key '" + *c.tls_key + "': " + ec.message());
  }
  tcp::endpoint ep(asio::ip::make_address(c.host), c.port);
  boost::system::error_code ec;
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + c.host + ":" + std::to_string(c.port) + ": " + ec.message());
}

HttpServer::~HttpServer() = default;

std::uint16_t HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string HttpServer::url() const {
  auto addr = impl_->acceptor.local_endpoint().address();
  std::string host = addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string();
  return std::string(impl_->tls ? "https://" : "http://") + host + ":" + std::to_string(port());
}

std::size_t HttpServer::open_connections() const { return impl_->sockets.size(); }

asio::awaitable<void> HttpServer::run() {
  Impl& impl = *impl_;
  while (!impl.stopped) {
    auto [ec, sock] = co_await impl.acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (impl.stopped || ec == asio::error::operation_aborted) co_return;
      impl.log->warn("accept failed: {}", ec.message());
      // Out of descriptors and similar: back off briefly instead of spinning.
      asio::steady_timer pause(impl.ioc, 100ms);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    asio::co_spawn(impl.ioc, impl.connection(std::move(sock)), [log = impl.log](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const boost::system::system_error& se) {
        if (se.code() != asio::error::operation_aborted) log->warn("connection ended: {}", se.what());
      } catch (const std::exception& x) {
        log->error("connection failed: {}", x.what());
      }
    });
  }
}

void HttpServer::stop() {
  Impl& impl = *impl_;
  if (impl.stopped) return;
  impl.stopped = true;
  boost::system::error_code ec;
  impl.acceptor.close(ec);
  for (auto* s : impl.sockets) {
    s->shutdown(tcp::socket::shutdown_both, ec);
    s->close(ec);
  }
}

}  // namespace nymph::control
