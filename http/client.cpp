// nymph::http client: Beast over TCP or TLS, C++20 coroutines. The only translation unit with client-side
// Beast/SSL code (it is expensive to compile).
#include "http/client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "common/concurrency_limit.hpp"

namespace nymph::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string_view to_string(Method m) {
  switch (m) {
    case Method::get: return "GET";
    case Method::post: return "POST";
    case Method::put: return "PUT";
    case Method::delete_: return "DELETE";
  }
  return "?";
}

std::optional<std::string> Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, name)) return v;
  return std::nullopt;
}

const std::vector<std::string>& well_known_ca_bundles() {
  static const std::vector<std::string> paths{
      "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu
      "/etc/pki/tls/certs/ca-bundle.crt",                   // RHEL, Rocky, Fedora
      "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL 7+ (the file the line above links to)
      "/etc/ssl/ca-bundle.pem",                             // SUSE
      "/etc/ssl/cert.pem",                                  // Alpine
  };
  return paths;
}

std::optional<std::string> system_ca_bundle() {
  for (const auto& p : well_known_ca_bundles())
    if (std::ifstream(p).good()) return p;
  return std::nullopt;
}

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One open connection, plain or TLS.
struct Connection {
  std::variant<std::unique_ptr<PlainStream>, std::unique_ptr<TlsStream>> stream;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() {
    if (auto* p = std::get_if<0>(&stream)) return **p;
    return beast::get_lowest_layer(*std::get<1>(stream));
  }
};

// Failure of one exchange, and whether a fresh connection may retry it.
struct ExchangeError {
  std::string message;
  bool retryable = false;
};

std::string describe(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout) return "timed out";
  return ec.message();
}

std::string seconds_text(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

bhttp::verb verb_of(Method m) {
  switch (m) {
    case Method::get: return bhttp::verb::get;
    case Method::post: return bhttp::verb::post;
    case Method::put: return bhttp::verb::put;
    case Method::delete_: return bhttp::verb::delete_;
  }
  return bhttp::verb::get;
}

// Blocking resolution, run on the DNS pool (never on the caller's io_context).
asio::awaitable<Result<std::vector<tcp::endpoint>>> resolve_blocking(std::string host, std::string port) {
  tcp::resolver resolver(co_await asio::this_coro::executor);
  boost::system::error_code ec;
  auto results = resolver.resolve(host, port, ec);
  if (ec) co_return fail("cannot resolve host '" + host + "': " + ec.message());
  std::vector<tcp::endpoint> out;
  for (const auto& r : results) out.push_back(r.endpoint());
  if (out.empty()) co_return fail("cannot resolve host '" + host + "': no addresses");
  co_return out;
}

}  // namespace

struct Client::Impl {
  asio::any_io_executor ex;
  Endpoint ep;
  ClientConfig config;
  std::unique_ptr<ssl::context> tls;
  std::unique_ptr<asio::thread_pool> dns_pool;  // created on first name lookup
  std::vector<std::unique_ptr<Connection>> idle;
  std::optional<ConcurrencyLimit> turns;  // max_concurrent_requests, when set

  ~Impl() {
    idle.clear();
    if (dns_pool) dns_pool->join();
  }

  std::string origin() const {
    bool v6 = ep.host.find(':') != std::string::npos;
    return std::string(ep.tls ? "https://" : "http://") + (v6 ? "[" + ep.host + "]" : ep.host) + ":" +
           std::to_string(ep.port);
  }

  asio::awaitable<Result<std::vector<tcp::endpoint>>> resolve() {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(ep.host, ec);
    if (!ec) co_return std::vector<tcp::endpoint>{tcp::endpoint(addr, ep.port)};
    if (!dns_pool) dns_pool = std::make_unique<asio::thread_pool>(1);
    co_return co_await asio::co_spawn(dns_pool->get_executor(), resolve_blocking(ep.host, std::to_string(ep.port)),
                                      asio::use_awaitable);
  }

  asio::awaitable<Result<std::unique_ptr<Connection>>> connect(Clock::time_point deadline) {
    auto addrs = co_await resolve();
    if (!addrs) co_return addrs.error();
    auto conn = std::make_unique<Connection>();
    if (tls) conn->stream = std::make_unique<TlsStream>(ex, *tls);
    else conn->stream = std::make_unique<PlainStream>(ex);
    auto& tcp_stream = conn->lowest();
    tcp_stream.expires_at(std::min(deadline, Clock::now() + config.connect_timeout));
    auto [ec, _] = co_await tcp_stream.async_connect(*addrs, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return fail("cannot connect to " + origin() + ": " + describe(ec));
    tcp_stream.socket().set_option(tcp::no_delay(true), ec);
    if (tls) {
      auto r = co_await handshake(*std::get<1>(conn->stream));
      if (!r) co_return r.error();
    }
    co_return conn;
  }

  asio::awaitable<Result<void>> handshake(TlsStream& s) {
    boost::system::error_code ec;
    asio::ip::make_address(ep.host, ec);
    bool numeric = !ec;  // no SNI for an IP address (RFC 6066)
    if (!numeric && !SSL_set_tlsext_host_name(s.native_handle(), ep.host.c_str()))
      co_return fail("TLS setup for " + origin() + " failed (SNI)");
    s.set_verify_mode(ssl::verify_peer);
    // OpenSSL checks the name (or IP address) itself, so a mismatch fails as "hostname mismatch" / "IP address
    // mismatch" (an asio verify callback that returns false leaves only "unspecified certificate verification
    // error").
    X509_VERIFY_PARAM* param = SSL_get0_param(s.native_handle());
    if (numeric ? !X509_VERIFY_PARAM_set1_ip_asc(param, ep.host.c_str())
                : !X509_VERIFY_PARAM_set1_host(param, ep.host.c_str(), ep.host.size()))
      co_return fail("TLS setup for " + origin() + " failed (host name check)");
    auto [hec] = co_await s.async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      std::string why = describe(hec);
      long verify = SSL_get_verify_result(s.native_handle());
      if (verify != X509_V_OK) why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
      co_return fail("TLS handshake with " + origin() + " failed: " + why);
    }
    co_return Result<void>{};
  }

  asio::awaitable<boost::system::result<Response, ExchangeError>> exchange(Connection& c, const Request& req,
                                                            Clock::time_point deadline, bool& keep) {
    // The body is viewed, not copied: `req` outlives the exchange, and a poll listing ten thousand attempts
    // would otherwise hold its megabyte twice for the whole hold.
    bhttp::request<bhttp::span_body<const char>> out{verb_of(req.method), ep.base_path + req.target, 11};
    out.set(bhttp::field::host, ep.host);
    out.set(bhttp::field::user_agent, config.user_agent);
    if (!req.bearer_token.empty()) out.set(bhttp::field::authorization, "Bearer " + req.bearer_token);
    if (!req.body.empty() || req.method == Method::post || req.method == Method::put)
      out.set(bhttp::field::content_type, req.content_type);
    out.body() = {req.body.data(), req.body.size()};
    out.keep_alive(true);
    out.prepare_payload();

    c.lowest().expires_at(deadline);
    boost::system::error_code ec;
    if (auto* p = std::get_if<0>(&c.stream)) std::tie(ec, std::ignore) = co_await bhttp::async_write(**p, out, asio::as_tuple(asio::use_awaitable));
    else std::tie(ec, std::ignore) = co_await bhttp::async_write(*std::get<1>(c.stream), out, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return ExchangeError{"sending " + what(req) + " failed: " + describe(ec), ec != beast::error::timeout};

    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(config.max_response_body);
    parser.header_limit(64 * 1024);
    if (auto* p = std::get_if<0>(&c.stream)) std::tie(ec, std::ignore) = co_await bhttp::async_read(**p, c.buffer, parser, asio::as_tuple(asio::use_awaitable));
    else std::tie(ec, std::ignore) = co_await bhttp::async_read(*std::get<1>(c.stream), c.buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (ec == bhttp::error::body_limit)
      co_return ExchangeError{what(req) + ": reply body exceeds " + std::to_string(config.max_response_body) + " bytes"};
    if (ec) {
      bool nothing = !parser.got_some();
      if (ec == beast::error::timeout)
        co_return ExchangeError{what(req) + " timed out after " + seconds_text(req.timeout), false};
      co_return ExchangeError{"reading the reply to " + what(req) + " failed: " + describe(ec), nothing};
    }
    auto& msg = parser.get();
    Response r;
    r.status = msg.result_int();
    for (const auto& f : msg) r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    r.body = std::move(msg.body());
    keep = msg.keep_alive() && !msg.need_eof();
    co_return r;
  }

  std::string what(const Request& req) const {
    return std::string(to_string(req.method)) + " " + origin() + ep.base_path + req.target;
  }
};

Result<Client> Client::create(asio::any_io_executor ex, std::string_view base_url, ClientConfig config) {
  auto ep = parse_endpoint(base_url);
  if (!ep) return ep.error();
  auto impl = std::make_unique<Impl>();
  impl->ex = std::move(ex);
  impl->ep = std::move(*ep);
  impl->config = std::move(config);
  if (impl->config.max_concurrent_requests > 0) impl->turns.emplace(impl->config.max_concurrent_requests);
  if (impl->ep.tls) {
    impl->tls = std::make_unique<ssl::context>(ssl::context::tls_client);
    impl->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                           ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    // OpenSSL's built-in paths honour SSL_CERT_FILE / SSL_CERT_DIR; without them they point at the build
    // host's layout (/usr/lib/ssl), which a static binary does not find on RHEL/SUSE/Alpine: add the
    // distribution's bundle too. Failures are ignored here: verification then fails with a clear error.
    impl->tls->set_default_verify_paths(ec);
    if (!std::getenv("SSL_CERT_FILE") && !std::getenv("SSL_CERT_DIR"))
      if (auto bundle = system_ca_bundle()) impl->tls->load_verify_file(*bundle, ec);
    if (impl->config.ca_file) {
      impl->tls->load_verify_file(*impl->config.ca_file, ec);
      if (ec) return fail("cannot load CA file '" + *impl->config.ca_file + "': " + ec.message());
    }
  }
  return Client(std::move(impl));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

const Endpoint& Client::endpoint() const { return impl_->ep; }

void Client::close_idle() { impl_->idle.clear(); }

std::size_t Client::queued_requests() const { return impl_->turns ? impl_->turns->waiting() : 0; }

asio::awaitable<Result<Response>> Client::request(Request req) {
  Impl& impl = *impl_;
  ConcurrencyLimit::Permit turn;
  if (impl.turns && !req.unqueued) turn = co_await impl.turns->acquire();
  auto deadline = Clock::now() + req.timeout;
  for (int round = 0;; ++round) {
    std::unique_ptr<Connection> conn;
    bool reused = false;
    if (!impl.idle.empty()) {
      conn = std::move(impl.idle.back());
      impl.idle.pop_back();
      reused = true;
    } else {
      auto fresh = co_await impl.connect(deadline);
      if (!fresh) co_return fresh.error();
      conn = std::move(*fresh);
    }
    bool keep = false;
    auto r = co_await impl.exchange(*conn, req, deadline, keep);
    if (r) {
      if (keep && impl.idle.size() < impl.config.max_idle_connections) {
        conn->lowest().expires_never();
        impl.idle.push_back(std::move(conn));
      }
      co_return std::move(*r);
    }
    // A pooled connection the server has closed meanwhile fails before any reply byte: retry once, fresh.
    if (reused && r.error().retryable && round == 0) continue;
    co_return fail(r.error().message);
  }
}

}  // namespace nymph::http
