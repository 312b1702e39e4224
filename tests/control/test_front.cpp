// The trust boundary of the real nymph-control, attacked from outside over raw TCP: connections and
// descriptors it holds, bytes of request bodies it holds, allocation failures, request framing. Whoever can
// reach the port, without a token, must not stop the server or lock others out (docs/protocol.md 3, 4, 9).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/run_coro.hpp"

namespace p = nymph::protocol;
namespace http = nymph::http;
using nymph::test::ControlServer;
using nymph::test::ControlServerOptions;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// One HTTP/1.1 response as read from a raw socket.
struct RawResponse {
  int status = 0;        // 0: none (the connection closed first, or the deadline passed)
  std::string head;      // status line and headers
  std::string body;
  std::string error_code() const {
    auto e = p::parse_error_document(body);
    return e ? e->code : std::string();
  }
  std::string error_message() const {
    auto e = p::parse_error_document(body);
    return e ? e->message : std::string();
  }
};

// A blocking TCP connection to 127.0.0.1:port, for writing exact bytes and reading exact replies. Every read
// has a deadline (poll). Closed on destruction.
class RawConn {
 public:
  explicit RawConn(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect failed");
    }
  }
  ~RawConn() { close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  // Closes with a reset (RST) instead of an orderly close.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Writes all of `bytes`; false when the peer closed or reset the connection.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Half-closes the connection: the server reads EOF after what was sent (it stops draining at once).
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }

  // Reads one response (headers, then a Content-Length body) within `bound`.
  RawResponse response(std::chrono::milliseconds bound = 10s) {
    auto deadline = Clock::now() + bound;
    RawResponse r;
    std::size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline)) return r;
    r.head = pending_.substr(0, end + 4);
    pending_.erase(0, end + 4);
    std::smatch m;
    std::size_t length = 0;
    if (std::regex_search(r.head, m, std::regex(R"(content-length: *(\d+))", std::regex::icase)))
      length = std::stoul(m[1]);
    while (pending_.size() < length)
      if (!fill(deadline)) return r;
    r.body = pending_.substr(0, length);
    pending_.erase(0, length);
    r.status = std::stoi(r.head.substr(9, 3));
    return r;
  }

  // True when the server closes the connection (EOF or reset) within `bound`; what arrived meanwhile is kept.
  bool closed_within(std::chrono::milliseconds bound) {
    auto deadline = Clock::now() + bound;
    while (fill(deadline)) {
    }
    return closed_;
  }

  // True when the server has not closed the connection (checked without waiting).
  bool open_now() { return !closed_within(0ms); }

  // Bytes received and not yet returned as a response.
  const std::string& pending() const { return pending_; }

 private:
  // Reads what is there before `deadline`; false at EOF, on error or at the deadline.
  bool fill(Clock::time_point deadline) {
    if (closed_) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::max<long>(left, 0)));
    if (rc <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  std::string pending_;
  bool closed_ = false;
};

// A request head; `extra` holds more header lines, each ending in \r\n.
std::string head(const std::string& method, const std::string& target, const std::string& token,
                 const std::string& extra = {}) {
  std::string h = method + " " + target + " HTTP/1.1\r\nHost: test\r\n";
  if (!token.empty()) h += "Authorization: Bearer " + token + "\r\n";
  return h + extra + "\r\n";
}

const std::string kSubmitBody = R"({"argv":["/bin/true"]})";

std::set<int> open_descriptors(pid_t pid) {
  std::set<int> fds;
  for (auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    fds.insert(std::stoi(e.path().filename().string()));
  return fds;
}

// A connection the server is busy with: an admitted submit whose body it waits for (it answered
// `100 Continue`). Such a connection is never closed to make room.
std::unique_ptr<RawConn> busy_connection(const ControlServer& cp) {
  auto c = std::make_unique<RawConn>(cp.port());
  c->send(head("POST", p::jobs_path(), cp.admin_token(),
               "Content-Length: " + std::to_string(kSubmitBody.size()) + "\r\nExpect: 100-continue\r\n"));
  auto cont = c->response();
  if (cont.status != 100) {
    std::string fds;
    for (int f : open_descriptors(cp.pid())) fds += std::to_string(f) + " ";
    rlimit lim{};
    ::prlimit(cp.pid(), RLIMIT_NOFILE, nullptr, &lim);
    throw std::runtime_error("expected 100 Continue, got: '" + cont.head + "'; the server's descriptors: " + fds +
                             "(limit " + std::to_string(lim.rlim_cur) + "); its log:\n" + cp.log());
  }
  return c;
}

// GET /healthz on a new connection: the status (0 when the connection was closed without a reply).
int healthz(const ControlServer& cp, std::chrono::milliseconds bound = 10s) {
  RawConn c(cp.port());
  c.send(head("GET", "/healthz", "", "Connection: close\r\n"));
  return c.response(bound).status;
}

// GET /healthz on new connections until one is answered 200 or `bound` passes.
bool healthz_within(const ControlServer& cp, std::chrono::milliseconds bound) {
  auto deadline = Clock::now() + bound;
  while (Clock::now() < deadline)
    if (healthz(cp, 1s) == 200) return true;
  return false;
}

// Waits until the server's log contains `needle` (or `bound` passes); returns whether it does.
bool log_shows(const ControlServer& cp, const std::string& needle, std::chrono::milliseconds bound = 10s) {
  auto deadline = Clock::now() + bound;
  while (cp.log().find(needle) == std::string::npos) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);  // polling a file for a line: the deadline is the bound, not the wait
  }
  return true;
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}


// Lets the server meet a client that resets its keep-alive connection, and waits until it closed its end.
// UBSan's vptr check (the ci and dev builds) needs a pipe, two spare descriptors, the first time it meets a
// type: a server out of descriptors dies on the first error category it compares with and has not met yet
// (the reset makes it meet all of them). A real server has met them long before it runs out; so must the
// one under test.
void warm_up(const ControlServer& cp) {
  std::size_t before = open_descriptors(cp.pid()).size();
  {
    RawConn c(cp.port());
    c.send(head("GET", "/healthz", ""));
    if (c.response().status != 200) throw std::runtime_error("warm-up request failed");
    c.reset();
  }
  auto deadline = Clock::now() + 10s;
  while (open_descriptors(cp.pid()).size() > before) {
    if (Clock::now() > deadline) throw std::runtime_error("the server kept the warm-up connection");
    std::this_thread::sleep_for(10ms);  // polling /proc for the close; the deadline bounds it
  }
}

// Lowers the server's open-files limit (soft and hard) so that exactly `spare` more descriptors fit: the
// limit bounds descriptor numbers, and a new descriptor takes the lowest free one.
void limit_descriptors(const ControlServer& cp, std::size_t spare) {
  warm_up(cp);
  auto open = open_descriptors(cp.pid());
  rlim_t n = 0;
  for (std::size_t free = 0; free < spare; ++n)
    if (!open.count(static_cast<int>(n))) ++free;
  rlimit lim{n, n};
  if (::prlimit(cp.pid(), RLIMIT_NOFILE, &lim, nullptr) != 0) throw std::runtime_error("prlimit failed");
}

// Starts a server with more environment variables (ASAN_OPTIONS is added to, not replaced), restoring the
// test's own environment afterwards.
std::unique_ptr<ControlServer> start_with_env(const std::vector<std::pair<std::string, std::string>>& env,
                                              ControlServerOptions options = {}) {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& [name, value] : env) {
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    std::string v = name == "ASAN_OPTIONS" && old && *old ? std::string(old) + ":" + value : value;
    ::setenv(name.c_str(), v.c_str(), 1);
  }
  std::unique_ptr<ControlServer> cp;
  std::exception_ptr failed;
  try {
    cp = std::make_unique<ControlServer>(std::move(options));
  } catch (...) {
    failed = std::current_exception();
  }
  for (const auto& [name, old] : saved) {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  if (failed) std::rethrow_exception(failed);
  return cp;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// A registered worker holding the lease of a running job, to upload its log.
struct LeasedJob {
  std::string worker_token, job, lease;
};

LeasedJob lease_a_job(const ControlServer& cp) {
  boost::asio::io_context ioc;
  auto client = http::Client::create(ioc.get_executor(), cp.url()).value();
  auto call = [&](http::Method m, std::string target, const std::string& token, std::string body) {
    http::Request r{m, std::move(target), std::move(body), "application/json", token, 30s};
    return nymph::test::run_coro(ioc, client.request(std::move(r))).value();
  };
  p::RegisterRequest reg;
  reg.launch_id = nymph::test::fresh_ulid();
  reg.hostname = "h";
  reg.runners = {"process"};
  auto worker = p::parse_as<p::RegisterResponse>(call(http::Method::post, p::workers_path(), cp.agent_token(),
                                                      p::to_json_text(reg)).body).value();
  auto job = p::parse_as<p::JobInfo>(call(http::Method::post, p::jobs_path(), cp.admin_token(), kSubmitBody).body).value();
  p::PollRequest poll;
  poll.free = {{"process", 1}};
  auto polled = call(http::Method::post, p::poll_path(worker.worker_id), worker.worker_token, p::to_json_text(poll));
  return {worker.worker_token, job.id, p::parse_as<p::PollResponse>(polled.body).value().jobs.at(0).lease_id};
}

// The head of a log upload of `length` bytes at `offset` (Content-Length), waiting for 100 Continue.
std::string log_put_head(const ControlServer&, const LeasedJob& j, std::uint64_t offset, std::size_t length) {
  return head("PUT", p::log_put_target(j.job, p::LogStream::out, offset, j.lease), j.worker_token,
              "Content-Type: application/octet-stream\r\nContent-Length: " + std::to_string(length) +
                  "\r\nExpect: 100-continue\r\n");
}

std::string chunked_log_put_head(const LeasedJob& j, std::uint64_t offset) {
  return head("PUT", p::log_put_target(j.job, p::LogStream::out, offset, j.lease), j.worker_token,
              "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n");
}

std::string hex(std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zx", n);
  return buf;
}

}  // namespace

// --- Bounded connections -----------------------------------------------------------------------------------

TEST(ControlFront, IdleConnectionsAtTheCapAreClosedOldestFirstToServeANewClient) {
  ControlServer cp({.extra_args = {"--max-connections", "20"}});
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawConn>(cp.port()));
  EXPECT_EQ(healthz(cp), 200) << cp.log();
  // 40 idle connections and /healthz through a cap of 20: the 21 that waited longest were closed for room.
  for (int i = 0; i < 21; ++i) EXPECT_TRUE(idle[i]->closed_within(5s)) << "connection " << i;
  for (int i = 21; i < 40; ++i) EXPECT_TRUE(idle[i]->open_now()) << "connection " << i;
}

TEST(ControlFront, AtTheCapWithEveryConnectionBusyANewConnectionIsClosedAtOnce) {
  ControlServer cp({.extra_args = {"--max-connections", "2"}});
  auto a = busy_connection(cp), b = busy_connection(cp);
  RawConn refused(cp.port());
  refused.send(head("GET", "/healthz", ""));
  EXPECT_TRUE(refused.closed_within(5s));
  EXPECT_EQ(refused.pending(), "") << "closed without a reply";
  EXPECT_TRUE(log_shows(cp, "refused 1 new connection(s): all 2 connections are busy")) << cp.log();
  // The busy ones were not disturbed: each finishes its request.
  ASSERT_TRUE(a->send(kSubmitBody));
  EXPECT_EQ(a->response().status, 201);
  a->close();
  EXPECT_TRUE(healthz_within(cp, 10s)) << "a slot is free again";
  ASSERT_TRUE(b->send(kSubmitBody));
  EXPECT_EQ(b->response().status, 201);
}

TEST(ControlFront, ANewConnectionWithoutARequestHeadWithinTheHeadTimeoutIsClosed) {
  ControlServer cp({.extra_args = {"--head-timeout", "300ms"}});
  RawConn silent(cp.port()), slow(cp.port());
  slow.send("GET /healthz HTTP/1.1\r\nHost: te");  // slowloris: a head that never ends
  auto start = Clock::now();
  EXPECT_TRUE(silent.closed_within(5s));
  EXPECT_TRUE(slow.closed_within(5s));
  EXPECT_GE(Clock::now() - start, 250ms);
  // A connection that sent its head in time lives on as keep-alive, beyond the head timeout.
  RawConn kept(cp.port());
  kept.send(head("GET", "/healthz", ""));
  EXPECT_EQ(kept.response().status, 200);
  EXPECT_FALSE(kept.closed_within(600ms));
  kept.send(head("GET", "/healthz", ""));
  EXPECT_EQ(kept.response().status, 200);
}

// --- Descriptors -------------------------------------------------------------------------------------------

TEST(ControlFront, TheServerRaisesItsOpenFilesLimitAtStart) {
  rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max == RLIM_INFINITY || mine.rlim_max < 1024) GTEST_SKIP() << "needs a finite hard limit >= 1024";
  rlimit low{64, mine.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);  // the server starts with a soft limit of 64
  std::unique_ptr<ControlServer> cp;
  try {
    cp = std::make_unique<ControlServer>();
  } catch (...) {
    ::setrlimit(RLIMIT_NOFILE, &mine);
    throw;
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &mine), 0);
  EXPECT_NE(cp->log().find("open files limit raised from 64 to " + std::to_string(mine.rlim_max)), std::string::npos)
      << cp->log();
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<RawConn>(cp->port()));
  EXPECT_EQ(healthz(*cp), 200) << cp->log();
  for (auto& c : idle) EXPECT_TRUE(c->open_now());
}

TEST(ControlFront, IdleConnectionsAtTheOpenFilesLimitDoNotLockOutANewClient) {
  ControlServer cp;
  limit_descriptors(cp, 8);
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(std::make_unique<RawConn>(cp.port()));
  // accept() fails with EMFILE: the server closes the idle connection that waited longest and accepts.
  EXPECT_EQ(healthz(cp), 200) << cp.log();
  EXPECT_EQ(healthz(cp), 200) << cp.log();
  EXPECT_EQ(cp.log().find("accept failed"), std::string::npos) << cp.log();
}

TEST(ControlFront, AcceptFailuresPauseAndAreLoggedOncePerBurst) {
  ControlServer cp;
  limit_descriptors(cp, 4);
  std::vector<std::unique_ptr<RawConn>> busy;
  for (int i = 0; i < 4; ++i) busy.push_back(busy_connection(cp));
  // Every descriptor is held by a request: the next connection waits in the backlog and accept() fails.
  RawConn waiting(cp.port());
  ASSERT_TRUE(log_shows(cp, "accept failed: Too many open files")) << cp.log();
  std::this_thread::sleep_for(1500ms);  // the length of the burst (before: a log line every 100 ms)
  busy.clear();                        // the requests go away, their descriptors are free
  ASSERT_TRUE(log_shows(cp, "accepting connections again after ")) << cp.log();
  waiting.send(head("GET", "/healthz", ""));
  EXPECT_EQ(waiting.response().status, 200);
  std::string log = cp.log();
  EXPECT_EQ(count(log, "accept failed"), 1u) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("accepting connections again after (\\d+) failed attempts")));
  EXPECT_LE(std::stoi(m[1]), 8) << "100 ms doubling to 1 s: a handful of attempts in 1.5 s";
}

// --- Memory held by request bodies -------------------------------------------------------------------------

TEST(ControlFront, BodiesBeyondTheBodyMemoryBudgetGet503WithRetryAfter) {
  ControlServer cp({.extra_args = {"--max-body-memory", "8MiB"}});
  auto job = lease_a_job(cp);
  RawConn a(cp.port());
  const std::size_t a_size = 6 << 20;
  a.send(log_put_head(cp, job, 0, a_size));
  ASSERT_EQ(a.response().status, 100);  // admitted: 6 MiB of the 8 are taken while it uploads
  RawConn b(cp.port());
  b.send(log_put_head(cp, job, a_size, 3 << 20));
  auto busy = b.response();
  EXPECT_EQ(busy.status, 503) << busy.head << busy.body;
  EXPECT_EQ(busy.error_code(), "unavailable");
  EXPECT_NE(busy.head.find("Retry-After: 1"), std::string::npos) << busy.head;
  // A chunked body counts as it grows.
  RawConn c(cp.port());
  c.send(chunked_log_put_head(job, a_size) + hex(3 << 20) + "\r\n" + std::string(64 << 10, 'c'));
  auto chunked = c.response();
  EXPECT_EQ(chunked.status, 503) << chunked.head << chunked.body;
  EXPECT_EQ(chunked.error_code(), "unavailable");
  // Once the first upload is done, the budget is free again.
  ASSERT_TRUE(a.send(std::string(a_size, 'a')));
  EXPECT_EQ(a.response().status, 200);
  RawConn retry(cp.port());
  retry.send(log_put_head(cp, job, a_size, 3 << 20));
  ASSERT_EQ(retry.response().status, 100);
  ASSERT_TRUE(retry.send(std::string(3 << 20, 'b')));
  EXPECT_EQ(retry.response().status, 200);
}

TEST(ControlFront, RefusedRequestsDrainingTheirBodiesCostLittleMemory) {
  // Freed memory is not kept in ASan's quarantine (it would count as resident).
  auto cp = start_with_env({{"ASAN_OPTIONS", "quarantine_size_mb=0"}});
  for (int i = 0; i < 20; ++i) ASSERT_EQ(healthz(*cp), 200);
  long before = rss_kib(cp->pid());
  // 500 clients without a token start an 8 MiB log upload each: refused (401) before the body, which the
  // server then drains for up to 5 s, so that they read the reply.
  const int n = 500;
  std::vector<std::unique_ptr<RawConn>> clients;
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<RawConn>(cp->port()));
    clients.back()->send(head("PUT", p::log_put_target("job_x", p::LogStream::out, 0, "lse_x"), "nym_bogus",
                              "Content-Length: " + std::to_string(8 << 20) + "\r\n") +
                         std::string(1000, 'x'));
  }
  for (auto& c : clients) ASSERT_EQ(c->response().status, 401);
  long per_client = (rss_kib(cp->pid()) - before) / n;
  EXPECT_LT(per_client, 48) << "KiB per refused connection (was 64 KiB of drain buffer each, plus the rest)";
  EXPECT_EQ(healthz(*cp), 200);
}

TEST(ControlFront, ARefusedRequestIsDrainedForAtMostFiveSecondsEvenWhileItsBodyKeepsComing) {
  ControlServer cp;
  RawConn c(cp.port());
  c.send(head("PUT", p::log_put_target("job_x", p::LogStream::out, 0, "lse_x"), "nym_bogus",
              "Content-Length: " + std::to_string(8 << 20) + "\r\n"));
  ASSERT_EQ(c.response().status, 401);
  // 320 KiB/s: the body would take 26 s. The server reads and discards it for 5 s, then closes.
  auto start = Clock::now();
  const std::string piece(16 << 10, 'x');
  while (Clock::now() - start < 15s && c.send(piece) && c.open_now()) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(c.closed_within(2s));
  auto lasted = Clock::now() - start;
  EXPECT_GE(lasted, 4s);
  EXPECT_LT(lasted, 8s) << "drained for " << std::chrono::duration_cast<std::chrono::milliseconds>(lasted).count()
                        << " ms";
}

// --- HTTP framing ------------------------------------------------------------------------------------------

TEST(ControlFront, AnyTransferEncodingButChunkedIsRefusedAndNothingIsSmuggled) {
  ControlServer cp;
  const std::string smuggled = head("GET", "/healthz", "");
  for (std::string te : {"Transfer-Encoding: gzip\r\n", "Transfer-Encoding: chunked, identity\r\n",
                         "Transfer-Encoding: identity\r\n", "Transfer-Encoding: gzip, chunked\r\n",
                         "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                         "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"}) {
    RawConn c(cp.port());
    c.send(head("POST", p::jobs_path(), cp.admin_token(), te) + smuggled);
    c.finish_sending();
    auto r = c.response();
    EXPECT_EQ(r.status, 400) << te << r.head << r.body;
    EXPECT_EQ(r.error_code(), "badRequest") << te;
    EXPECT_TRUE(c.closed_within(10s)) << te;
    EXPECT_EQ(c.pending(), "") << te << ": the bytes after the head must not be served as a request";
  }
  // Exactly `chunked`, in any case, is a body.
  RawConn ok(cp.port());
  ok.send(head("POST", p::jobs_path(), cp.admin_token(), "Transfer-Encoding: Chunked\r\n") + hex(kSubmitBody.size()) +
          "\r\n" + kSubmitBody + "\r\n0\r\n\r\n");
  EXPECT_EQ(ok.response().status, 201);
}

TEST(ControlFront, AMalformedChunkedBodyGets400BeforeTheConnectionCloses) {
  ControlServer cp;
  for (std::string chunks : {"zz\r\nabc\r\n0\r\n\r\n", "3\r\nabcXY0\r\n\r\n", "ffffffffffffffffff\r\n"}) {
    RawConn c(cp.port());
    c.send(head("POST", p::jobs_path(), cp.admin_token(), "Transfer-Encoding: chunked\r\n") + chunks);
    c.finish_sending();
    auto r = c.response();
    EXPECT_EQ(r.status, 400) << chunks << r.head << r.body;
    EXPECT_EQ(r.error_code(), "badRequest") << chunks;
    EXPECT_TRUE(c.closed_within(10s)) << chunks;
  }
  EXPECT_EQ(healthz(cp), 200);
}

// --- Allocation failures -----------------------------------------------------------------------------------

// The server under a preloaded operator new that fails, as it does when memory runs out, for any single
// allocation above 1 MiB (tests/control/alloc_limit_preload.cpp): a real std::bad_alloc wherever the server
// allocates large, with no hook in its code.
class AllocationFailures : public ::testing::Test {
 protected:
  static std::unique_ptr<ControlServer> start() {
    // ASan insists on being first in the library list; the preloaded operator new must come before it.
    return start_with_env({{"LD_PRELOAD", NYMPH_ALLOC_LIMIT_PRELOAD},
                           {"NYMPH_TEST_ALLOC_LIMIT", std::to_string(1 << 20)},
                           {"ASAN_OPTIONS", "verify_asan_link_order=0"}});
  }

  std::unique_ptr<ControlServer> cp_ = start();
  LeasedJob job_ = lease_a_job(*cp_);

  // Uploads `bytes` at `offset` in one PUT; the reply's status.
  int put_log(std::uint64_t offset, const std::string& bytes) {
    RawConn c(cp_->port());
    c.send(log_put_head(*cp_, job_, offset, bytes.size()));
    auto cont = c.response();
    if (cont.status != 100) return cont.status;
    c.send(bytes);
    return c.response().status;
  }
};

TEST_F(AllocationFailures, ABodyThatCannotBeAllocatedIs503AndTheServerServesOn) {
  RawConn c(cp_->port());
  c.send(log_put_head(*cp_, job_, 0, 2 << 20));
  auto r = c.response();
  EXPECT_EQ(r.status, 503) << r.head << r.body << cp_->log();
  EXPECT_EQ(r.error_code(), "unavailable");
  EXPECT_NE(r.error_message().find("out of memory"), std::string::npos) << r.body;
  EXPECT_EQ(healthz(*cp_), 200);
  EXPECT_EQ(put_log(0, "small"), 200);
  EXPECT_TRUE(cp_->running());
}

TEST_F(AllocationFailures, AChunkedBodyThatCannotGrowIs503AndTheServerServesOn) {
  RawConn c(cp_->port());
  c.send(chunked_log_put_head(job_, 0) + hex(600 << 10) + "\r\n" + std::string(600 << 10, 'a') + "\r\n" +
         hex(600 << 10) + "\r\n");
  auto r = c.response();
  EXPECT_EQ(r.status, 503) << r.head << r.body << cp_->log();
  EXPECT_NE(r.error_message().find("out of memory"), std::string::npos) << r.body;
  EXPECT_EQ(healthz(*cp_), 200);
  EXPECT_TRUE(cp_->running());
}

TEST_F(AllocationFailures, AReplyThatCannotBeAllocatedIs503NotABug) {
  const std::string piece(700 << 10, 'x');
  for (int i = 0; i < 3; ++i) ASSERT_EQ(put_log(i * piece.size(), piece), 200) << cp_->log();
  RawConn c(cp_->port());
  c.send(head("GET", p::log_get_target(job_.job, p::LogStream::out, 0), cp_->admin_token()));
  auto r = c.response();
  EXPECT_EQ(r.status, 503) << r.head << r.body.substr(0, 200);
  EXPECT_NE(r.error_message().find("out of memory"), std::string::npos) << r.body.substr(0, 200);
  EXPECT_NE(cp_->log().find("GET " + p::log_get_target(job_.job, p::LogStream::out, 0) + ": out of memory"),
            std::string::npos)
      << cp_->log();
  EXPECT_EQ(healthz(*cp_), 200);
}
