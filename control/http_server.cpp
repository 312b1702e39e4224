// The only translation unit with server-side Beast/SSL code (expensive to compile).
#include "control/http_server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <tuple>
#include <unordered_map>

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

#include "common/text.hpp"
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

constexpr auto kIdleTimeout = 120s;     // keep-alive connection between requests
constexpr auto kReadTimeout = 60s;      // reading one request's body
constexpr auto kWriteTimeout = 60s;
constexpr auto kLingerTimeout = 5s;               // draining a refused request after its error reply
constexpr std::size_t kLingerBytes = 64 << 20;
constexpr std::size_t kScratchBytes = 64 << 10;           // the one buffer every draining connection reads into
constexpr std::size_t kDrainRate = 64 << 20;              // bytes per second all draining connections discard
constexpr std::size_t kSmallBody = 16 << 10;             // bodies up to this size are read with the default buffer
constexpr std::size_t kLargeBodyReadBuffer = 256 << 10;  // read buffer of a larger body (per request, released after)
constexpr auto kRefusalLogInterval = 10s;        // connections refused at the cap: one log line per interval

using State = ConnectionTable::State;

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

HttpReply too_large(std::size_t limit) {
  return error_reply(413, "bodyTooLarge", "request body exceeds " + std::to_string(limit) + " bytes");
}

// 503 when the bodies being read already hold the server's body budget: the client retries.
HttpReply bodies_busy() {
  HttpReply r = error_reply(503, "unavailable", "the server is reading too many request bodies at once; retry later");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

// A request's framing that the server refuses (request smuggling behind a proxy reads it differently): any
// Transfer-Encoding but exactly one `chunked`, which Beast would read as "no body" and parse the body as the
// next request. (Beast itself refuses Content-Length together with chunked.) Returns the 400 reply, or
// nullopt for a request framed by Content-Length, chunked, or nothing.
std::optional<HttpReply> framing_problem(const bhttp::request_parser<bhttp::string_body>::value_type& head) {
  auto [first, last] = head.equal_range(bhttp::field::transfer_encoding);
  if (first == last) return std::nullopt;
  std::string codings;
  for (auto it = first; it != last; ++it) codings += (codings.empty() ? "" : ", ") + std::string(it->value());
  if (std::next(first) == last && beast::iequals(trim(codings), "chunked")) return std::nullopt;
  return error_reply(400, "badRequest", "unsupported Transfer-Encoding '" + printable_excerpt(codings, 64) +
                                            "' (only 'chunked' is accepted)");
}

// EMFILE or ENFILE. Compared by value: an error_condition made from errc would meet Boost's generic category
// for the first time just when descriptors have run out, which UBSan's vptr check (it needs a pipe) does
// not survive in the sanitizer builds.
bool out_of_descriptors(const boost::system::error_code& ec) {
  return ec.category() == boost::system::system_category() && (ec.value() == EMFILE || ec.value() == ENFILE);
}

// True for an error of the HTTP parser (malformed request), as opposed to the connection's.
bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_chunk).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

// The method and target of the request a connection is on, and whether its reply has begun (then no other
// reply may follow).
struct Exchange {
  HttpRequest request;  // method and target only
  bool replying = false;
};

// Why a request ends before its handler runs: a reply to send first, or none (the peer went away).
struct Refusal {
  std::optional<HttpReply> reply;
};

// Grows a chunked body's string ahead of each chunk, within the body budget, so that Beast appends the chunk
// without allocating: running out of budget or memory becomes an error of the read (then `failure` says
// which) instead of an exception thrown through the event loop.
struct ChunkGrowth {
  std::string& body;
  BodyReservation& held;
  std::size_t limit;
  enum class Failure { none, budget, memory } failure = Failure::none;
  std::exception_ptr error;

  void operator()(std::uint64_t size, beast::string_view, beast::error_code& ec) {
    std::size_t need = body.size() + static_cast<std::size_t>(size);  // Beast checked size against the limit
    if (need <= body.capacity()) return;
    std::size_t capacity = std::clamp(body.capacity() * 2, need, std::max(need, limit));
    if (!held.grow(capacity - body.capacity())) {
      failure = Failure::budget;
    } else {
      try {
        body.reserve(capacity);
        return;
      } catch (...) {
        failure = Failure::memory;
        error = std::current_exception();
      }
    }
    ec = bhttp::error::body_limit;  // any error ends the read; `failure` tells the caller which
  }
};

}  // namespace

struct HttpServer::Impl {
  asio::io_context& ioc;
  Service& service;
  ListenConfig config;
  std::shared_ptr<spdlog::logger> log;
  tcp::acceptor acceptor;
  std::unique_ptr<ssl::context> tls;
  ConnectionTable table;
  BodyBudget bodies;
  AcceptBackoff backoff;
  std::unordered_map<ConnectionTable::Id, tcp::socket*> sockets;  // open connections, closed by stop() or for room
  // Refused requests are drained into this one buffer: with one io_context thread, reads complete one at a
  // time, and what they read is thrown away.
  std::vector<char> scratch = std::vector<char>(kScratchBytes);
  std::size_t refused = 0;  // connections refused at the cap since the last log line
  std::chrono::steady_clock::time_point refusals_logged{};
  bool stopped = false;

  Impl(asio::io_context& io, Service& svc, ListenConfig cfg, std::shared_ptr<spdlog::logger> lg)
      : ioc(io),
        service(svc),
        config(std::move(cfg)),
        log(std::move(lg)),
        acceptor(io),
        table(config.limits.max_connections),
        bodies(config.limits.max_body_memory) {}

  // One open connection: its socket is registered (for stop() and to be closed for room) while its
  // coroutine runs, and its state tells the table whether it may be closed.
  struct Conn {
    Impl& impl;
    ConnectionTable::Id id;
    Conn(Impl& i, ConnectionTable::Id c, tcp::socket& s) : impl(i), id(c) { impl.sockets.emplace(id, &s); }
    ~Conn() {
      impl.sockets.erase(id);
      impl.table.remove(id);
    }
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;
    void set(State s) { impl.table.set(id, s); }
  };

  // Closes a connection's socket (its coroutine then ends). Never fails.
  void close_connection(ConnectionTable::Id id) {
    auto it = sockets.find(id);
    if (it == sockets.end()) return;
    boost::system::error_code ec;
    it->second->shutdown(tcp::socket::shutdown_both, ec);
    it->second->close(ec);
  }

  // Closes the connection that has waited longest for a request head (or is draining a refused request),
  // to free its descriptor. False when every connection is busy with a request.
  bool make_room() {
    auto victim = table.evict();
    if (!victim) return false;
    log->debug("closing idle connection {} to make room ({} open)", *victim, table.size());
    close_connection(*victim);
    return true;
  }

  // Takes a connection just accepted: within the cap (closing an idle one to make room if need be), or
  // closed at once when every connection is busy.
  void open(tcp::socket sock) {
    auto admission = table.admit();
    if (admission.kind == ConnectionTable::Admission::Kind::refuse) {
      note_refusal();
      boost::system::error_code ec;
      sock.close(ec);
      return;
    }
    if (admission.kind == ConnectionTable::Admission::Kind::close_victim) close_connection(admission.victim);
    auto id = table.add();
    log->trace("connection {} opened ({} open)", id, table.size());
    try {
      asio::co_spawn(ioc, connection(std::move(sock), id), [log = log](std::exception_ptr e) { log_ended(*log, e); });
    } catch (...) {
      table.remove(id);
      throw;
    }
  }

  void note_refusal() {
    ++refused;
    auto now = std::chrono::steady_clock::now();
    if (now - refusals_logged < kRefusalLogInterval) return;
    log->warn("refused {} new connection(s): all {} connections are busy with requests (--max-connections)",
              std::exchange(refused, 0), table.max_open());
    refusals_logged = now;
  }

  static void log_ended(spdlog::logger& log, std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const boost::system::system_error& se) {
      if (se.code() != asio::error::operation_aborted) log.warn("connection ended: {}", se.what());
    } catch (const std::exception& x) {
      log.error("connection failed: {}", x.what());
    } catch (...) {
      log.error("connection failed: an exception that is not a std::exception");
    }
  }

  // One accept. Returns how long to pause before the next one (after a failure), or nullopt.
  asio::awaitable<std::optional<std::chrono::milliseconds>> accept_one() {
    auto [ec, sock] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (out_of_descriptors(ec)) std::tie(ec, sock) = co_await accept_without_descriptors();
    if (!ec) {
      if (auto failures = backoff.succeeded()) log->info("accepting connections again after {} failed attempts", failures);
      open(std::move(sock));
      co_return std::nullopt;
    }
    if (stopped || ec == asio::error::operation_aborted) co_return std::nullopt;
    auto step = backoff.failed();
    if (step.log) log->warn("accept failed: {}; retrying with a pause of up to 1 s, logged again once it succeeds", ec.message());
    co_return step.pause;
  }

  // accept() without a free descriptor fails at once, even before anyone connects (the kernel takes the
  // descriptor first). Waits for a connection; then, if there is still no descriptor, closes the connection
  // that has waited longest for a request head to free one, and accepts again.
  asio::awaitable<std::tuple<boost::system::error_code, tcp::socket>> accept_without_descriptors() {
    auto [wec] = co_await acceptor.async_wait(tcp::acceptor::wait_read, asio::as_tuple(asio::use_awaitable));
    if (wec) co_return std::tuple(wec, tcp::socket(ioc));
    auto accepted = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (out_of_descriptors(std::get<0>(accepted)) && make_room())
      accepted = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    co_return accepted;
  }

  asio::awaitable<void> connection(tcp::socket sock, ConnectionTable::Id id) {
    if (!table.contains(id)) co_return;  // closed for room before it started
    boost::system::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    // A new connection has head_timeout for its TLS handshake and its first request head together.
    if (!tls) {
      beast::tcp_stream stream(std::move(sock));
      Conn conn(*this, id, stream.socket());
      stream.expires_after(config.limits.head_timeout);
      co_await session(stream, conn);
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(std::move(sock), *tls);
    auto& raw = beast::get_lowest_layer(stream).socket();
    Conn conn(*this, id, raw);
    beast::get_lowest_layer(stream).expires_after(config.limits.head_timeout);
    auto [hec] = co_await stream.async_handshake(ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      log->debug("TLS handshake failed: {}", hec.message());
      co_return;
    }
    co_await session(stream, conn);
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

  // Sends a final error reply, then reads and discards what the client still sends (at most kLingerBytes in
  // kLingerTimeout, at a share of kDrainRate) before closing, so a client still writing an oversized body
  // reads the reply instead of a reset. Meanwhile the connection may be closed to make room.
  template <class Stream>
  asio::awaitable<void> reject(Stream& stream, Conn& conn, HttpReply r) {
    conn.set(State::rejecting);
    // clang-tidy 14 misreads this coroutine's control flow: it reports r as used "in a later loop iteration".
    // NOLINTNEXTLINE(bugprone-use-after-move): false positive, no loop holds this line
    if (!co_await send(stream, std::move(r), false)) co_return;
    auto deadline = std::chrono::steady_clock::now() + kLingerTimeout;
    beast::get_lowest_layer(stream).expires_at(deadline);
    asio::steady_timer pace(ioc);
    // The deadline is checked here too: the stream's own expiry only ends a read that has to wait for data.
    for (std::size_t total = 0; total < kLingerBytes && std::chrono::steady_clock::now() < deadline;) {
      auto [ec, n] = co_await stream.async_read_some(asio::buffer(scratch), asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      total += n;
      pace.expires_at(std::min(deadline, std::chrono::steady_clock::now() +
                                             drain_pause(n, table.count(State::rejecting), kDrainRate)));
      co_await pace.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  // Serves requests on one connection until it closes, errs, or asks not to be kept alive. An exception
  // (std::bad_alloc above all) ends the request with the reply reply_for_exception() gives, if its reply has
  // not begun, and the connection.
  template <class Stream>
  asio::awaitable<void> session(Stream& stream, Conn& conn) {
    beast::flat_buffer buffer;
    for (bool first = true; !stopped; first = false) {
      Exchange exchange;
      std::optional<HttpReply> failure;
      try {
        if (co_await serve_one(stream, conn, buffer, first, exchange)) continue;
        co_return;
      } catch (const boost::system::system_error& e) {
        if (e.code() == asio::error::operation_aborted) throw;
        failure = reply_for_exception(*log, exchange.request);
      } catch (...) {
        failure = reply_for_exception(*log, exchange.request);
      }
      if (!exchange.replying) co_await reject(stream, conn, std::move(*failure));
      co_return;
    }
  }

  // Reads one request and answers it. Returns false when the connection must close. The first request's
  // head must come within the deadline connection() set; later ones within the keep-alive idle timeout.
  template <class Stream>
  asio::awaitable<bool> serve_one(Stream& stream, Conn& conn, beast::flat_buffer& buffer, bool first,
                                  Exchange& exchange) {
    const auto& limits = service.config().limits;
    conn.set(State::waiting);
    if (!first) beast::get_lowest_layer(stream).expires_after(kIdleTimeout);
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    // Beast checks Content-Length against the body limit while parsing the header: start with the largest
    // limit of any endpoint and narrow it once the target is known.
    parser.body_limit(std::max(limits.max_json_body, limits.max_log_chunk));
    auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      co_await refuse_head(stream, conn, hec);
      co_return false;
    }
    conn.set(State::busy);
    auto& head = parser.get();
    exchange.request.method = std::string(head.method_string());
    exchange.request.target = std::string(head.target());
    if (auto bad = framing_problem(head)) {
      co_await reject(stream, conn, std::move(*bad));
      co_return false;
    }
    // Route, credential and path are checked before a byte of the body is read: a request that fails them
    // costs the server its header only.
    HttpRequest head_only{exchange.request.method, exchange.request.target,
                          std::string(head[bhttp::field::authorization]), {}};
    auto admitted = co_await service.admit(std::move(head_only));
    if (!admitted) co_return co_await refuse(stream, conn, parser, std::move(admitted.error()));
    BodyReservation held(bodies);
    if (auto refusal = co_await read_body(stream, buffer, parser, *admitted, held, exchange)) {
      if (refusal->reply) co_await reject(stream, conn, std::move(*refusal->reply));
      co_return false;
    }
    bool keep_alive = parser.get().keep_alive() && !stopped;
    std::optional<HttpReply> reply = co_await handle(std::move(*admitted), stream);
    if (!reply) co_return false;  // the peer went away while its request was held
    exchange.replying = true;
    co_return co_await send(stream, std::move(*reply), keep_alive) && keep_alive;
  }

  // The request head could not be read: the reply for a head too large or malformed (then the connection
  // closes), or nothing when the peer went away or was too slow.
  template <class Stream>
  asio::awaitable<void> refuse_head(Stream& stream, Conn& conn, beast::error_code hec) {
    const auto& limits = service.config().limits;
    if (hec == bhttp::error::header_limit) {
      co_await reject(stream, conn, error_reply(431, "headersTooLarge", "request line and headers exceed " +
                                                                             std::to_string(limits.max_header_bytes) + " bytes"));
    } else if (hec == bhttp::error::body_limit) {
      co_await reject(stream, conn, too_large(limits.max_log_chunk));
    } else if (hec == beast::error::timeout) {
      log->debug("connection {}: no request head in time", conn.id);
    } else if (hec == bhttp::error::end_of_stream || hec == asio::error::eof ||
               hec == asio::error::operation_aborted || hec == asio::error::connection_reset) {
      co_return;
    } else {
      HttpReply bad = error_reply(400, "badRequest", "malformed HTTP request: " + hec.message());
      co_await send(stream, std::move(bad), false);
    }
  }

  // Answers a request that admit() refused. Returns false when the connection must close: its unread body
  // makes it unusable for another request.
  template <class Stream>
  asio::awaitable<bool> refuse(Stream& stream, Conn& conn, bhttp::request_parser<bhttp::string_body>& parser,
                               HttpReply reply) {
    bool body_pending = parser.chunked() || parser.content_length().value_or(0) > 0;
    if (body_pending) {
      co_await reject(stream, conn, std::move(reply));
      co_return false;
    }
    bool again = parser.keep_alive() && !stopped;
    co_return co_await send(stream, std::move(reply), again) && again;
  }

  // Reads an admitted request's body into it, holding its bytes in `held` (the server's body budget).
  // Returns nullopt once read, else the refusal: 413 over the endpoint's limit, 503 `unavailable` when the
  // budget or memory runs out, 400 for a malformed chunked body, no reply when the peer went away.
  template <class Stream>
  asio::awaitable<std::optional<Refusal>> read_body(Stream& stream, beast::flat_buffer& buffer,
                                                    bhttp::request_parser<bhttp::string_body>& parser,
                                                    AdmittedRequest& admitted, BodyReservation& held,
                                                    const Exchange& exchange) {
    std::size_t limit = admitted.body_limit;
    parser.body_limit(limit);
    if (auto length = parser.content_length()) {
      if (*length > limit) co_return Refusal{too_large(limit)};
      if (auto refusal = make_room_for(parser.get().body(), static_cast<std::size_t>(*length), held, exchange))
        co_return refusal;
      // Beast reads at most the buffer's free capacity per call (512 bytes at least): give a large body a
      // large buffer for this request only, budget permitting, so a 1 MiB log upload takes a few reads
      // instead of two thousand.
      if (*length > kSmallBody && held.grow(kLargeBodyReadBuffer))
        buffer.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, kLargeBodyReadBuffer)));
    }
    ChunkGrowth growth{parser.get().body(), held, limit};
    if (parser.chunked()) parser.on_chunk_header(growth);
    if (beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
      bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
      beast::get_lowest_layer(stream).expires_after(kWriteTimeout);
      auto [cec, cn] = co_await bhttp::async_write(stream, cont, asio::as_tuple(asio::use_awaitable));
      if (cec) co_return Refusal{};
    }
    beast::get_lowest_layer(stream).expires_after(kReadTimeout);
    auto [bec, bn] = co_await bhttp::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (buffer.capacity() > kSmallBody) buffer.shrink_to_fit();
    if (!bec) {
      admitted.request.body = std::move(parser.get().body());
      co_return std::nullopt;
    }
    if (growth.failure == ChunkGrowth::Failure::budget) co_return Refusal{bodies_busy()};
    if (growth.failure == ChunkGrowth::Failure::memory) co_return Refusal{reply_for(growth.error, exchange)};
    if (bec == bhttp::error::body_limit) co_return Refusal{too_large(limit)};
    if (is_parse_error(bec)) co_return Refusal{error_reply(400, "badRequest", "malformed HTTP request body: " + bec.message())};
    co_return Refusal{};
  }

  // Takes `length` bytes of the body budget and allocates the body here, where running out of memory is a
  // reply (Beast would allocate it inside the read, where a std::bad_alloc would cross the event loop).
  // Returns the refusal when either fails.
  std::optional<Refusal> make_room_for(std::string& body, std::size_t length, BodyReservation& held,
                                       const Exchange& exchange) {
    if (!held.grow(length)) return Refusal{bodies_busy()};
    try {
      body.reserve(length);
    } catch (...) {
      return Refusal{reply_for(std::current_exception(), exchange)};
    }
    return std::nullopt;
  }

  HttpReply reply_for(std::exception_ptr e, const Exchange& exchange) {
    try {
      std::rethrow_exception(e);
    } catch (...) {
      return reply_for_exception(*log, exchange.request);
    }
  }

  // Runs the handler of a request whose body was read. A request that may be held is cancelled when the
  // peer closes the connection meanwhile: then nullopt.
  template <class Stream>
  asio::awaitable<std::optional<HttpReply>> handle(AdmittedRequest admitted, Stream& stream) {
    beast::get_lowest_layer(stream).expires_never();
    if (!admitted.may_hold) co_return co_await service.handle(std::move(admitted));
    auto r = co_await (service.handle(std::move(admitted)) || watch_peer_close(beast::get_lowest_layer(stream).socket()));
    if (r.index() == 1) co_return std::nullopt;
    co_return std::get<0>(std::move(r));
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
    std::optional<std::chrono::milliseconds> pause;
    try {
      pause = co_await impl.accept_one();
    } catch (const boost::system::system_error& e) {
      if (e.code() == asio::error::operation_aborted) throw;
      impl.log->error("accepting a connection failed: {}", e.what());
      pause = 100ms;
    } catch (const std::exception& e) {  // std::bad_alloc starting a connection: it is closed, the next may fit
      impl.log->error("accepting a connection failed: {}", e.what());
      pause = 100ms;
    }
    if (!pause) continue;
    asio::steady_timer timer(impl.ioc, *pause);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

void HttpServer::stop() {
  Impl& impl = *impl_;
  if (impl.stopped) return;
  impl.stopped = true;
  boost::system::error_code ec;
  impl.acceptor.close(ec);
  for (auto& [id, s] : impl.sockets) {
    s->shutdown(tcp::socket::shutdown_both, ec);
    s->close(ec);
  }
}

}  // namespace nymph::control
