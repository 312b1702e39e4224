#pragma once
// nymph::http - a small HTTP/1.1 client for the control-plane protocol (http:// and https://).
//
// - Coroutine API on the caller's executor; expected failures (connection refused, timeout, TLS verification,
//   oversized reply) are Result errors with a message for a person. An HTTP error status is NOT a failure: the
//   Response carries it.
// - HTTPS verifies the peer certificate chain and the host name, sends SNI, and trusts, in this order
//   (docs/install.md): an optional `ca_file`; SSL_CERT_FILE / SSL_CERT_DIR when either is set (OpenSSL
//   uses them instead of its built-in file / directory, and no distribution bundle is added); otherwise
//   OpenSSL's built-in paths plus the first existing well-known distribution bundle (system_ca_bundle()),
//   so a static binary built on Debian also works on RHEL, SUSE or Alpine.
// - Host names are resolved on a private one-thread pool (never by the io_context's resolver, whose internal
//   thread a fork-based launcher's notify_fork stops - TOOLCHAIN.md bug 5; the agent's own launcher no longer
//   forks, but any io_context user may); numeric IPv4/IPv6 hosts skip resolution.
// - Keep-alive connections are pooled and reused; concurrent requests on one Client each use their own
//   connection. A request that fails on a reused connection before any reply byte arrived is retried once on
//   a fresh connection (the server closed the idle connection).
// - At most max_concurrent_requests requests are on the wire at once; more wait their turn, oldest first, so a
//   burst (a thousand tracked jobs reporting at once) is a few kept-alive connections, not a thousand
//   connections and TLS handshakes. A request marked `unqueued` (a call that is one at a time by design, such
//   as a long poll) neither waits nor counts.
// - The bearer token is never logged and never appears in an error message.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/error.hpp"
#include "http/url.hpp"

namespace nymph::http {

enum class Method { get, post, put, delete_ };

// Wire name of a method ("GET", ...).
std::string_view to_string(Method m);

// Settings of one Client (a value, defaulted members).
struct ClientConfig {
  std::optional<std::string> ca_file;               // extra PEM bundle to trust (https)
  std::chrono::milliseconds connect_timeout{10'000}; // TCP connect + TLS handshake
  std::size_t max_response_body = 64 * 1024 * 1024;  // a larger reply is an error
  std::size_t max_idle_connections = 4;              // pooled keep-alive connections
  std::size_t max_concurrent_requests = 0;           // requests on the wire at once (unqueued ones aside); 0: no limit
  std::string user_agent = "nymph";
};

// One request. `target` is the path and query ("/v1/jobs?state=queued"), appended to the base URL's path.
struct Request {
  Method method = Method::get;
  std::string target;
  std::string body;
  std::string content_type = "application/json";  // sent only when body is non-empty or method is POST/PUT
  std::string bearer_token;                        // empty: no Authorization header
  std::chrono::milliseconds timeout{30'000};       // whole exchange: connect, write, read (not the wait for a turn)
  bool unqueued = false;                           // never waits for (nor takes) a max_concurrent_requests turn
};

// A reply, whatever its status.
struct Response {
  unsigned status = 0;
  std::string body;                                          // raw bytes (binary-safe)
  std::vector<std::pair<std::string, std::string>> headers;  // in received order

  // Value of the first header called `name` (case-insensitive), or nullopt.
  std::optional<std::string> header(std::string_view name) const;
  // True for 2xx.
  bool ok() const { return status >= 200 && status < 300; }
};

// The well-known CA bundle files of Linux distributions, in the order they are tried: Debian/Ubuntu,
// RHEL/Rocky/Fedora (two), SUSE, Alpine.
const std::vector<std::string>& well_known_ca_bundles();

// The first of well_known_ca_bundles() that is a readable file, or nullopt. Never throws.
std::optional<std::string> system_ca_bundle();

// An HTTP client bound to one base URL and one executor. Not thread-safe: use it from its executor only.
// Destroying it closes pooled connections; requests in flight must have completed first.
class Client {
 public:
  // Creates a client for `base_url`. Returns an Error for a bad URL or an unreadable `ca_file`.
  static Result<Client> create(boost::asio::any_io_executor ex, std::string_view base_url,
                               ClientConfig config = {});

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  // Sends `req` and reads the whole reply. Fails (Error) on connect/TLS/timeout/protocol errors or when the
  // reply body exceeds max_response_body. Cancellation: a cancelled awaiting coroutine aborts the exchange
  // and the connection is discarded.
  boost::asio::awaitable<Result<Response>> request(Request req);

  // Closes idle pooled connections (e.g. before a long pause). Never fails.
  void close_idle();

  // Requests waiting for a max_concurrent_requests turn.
  std::size_t queued_requests() const;

  // The parsed base URL.
  const Endpoint& endpoint() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nymph::http
