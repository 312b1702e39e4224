#pragma once
// The agent's view of a control plane (owned by its consumer, the daemon): the worker half of protocol /v1.
// Calls return a classified failure so the daemon's policy can tell "retry later" from "stop now".
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <spdlog/logger.h>

#include "common/error.hpp"
#include "protocol/protocol.hpp"

namespace nymph::agent {

// How a call failed, which decides what the daemon does next.
enum class CallFailure {
  transient,      // connection error, timeout, 429, 5xx but 500 (503: outage): back off and retry, keep queued
  unauthorized,   // 401/403: exit with exitReason error
  worker_unknown, // 404 for the worker: re-register with the same launchId
  fenced,         // 409 on an event/log: the lease is no longer current, stop that attempt
  log_gap,        // 409 on a log upload: the server expects `expected_offset`
  closed,         // 409 attemptFinished, 413 logCapReached: the attempt takes no more events, or its job no more
                  // log bytes; drop the upload and, for a log, the rest of that stream
  rejected,       // another 4xx, or 500 (a server bug): the request itself is refused; not retried as is
};

struct CallError {
  CallFailure kind = CallFailure::transient;
  std::string message;                          // for logs; never contains the token
  std::optional<std::uint64_t> expected_offset; // log_gap only
};

[[noreturn]] void throw_exception_from_error(const CallError& e, const boost::source_location&);

// Classifies a non-2xx reply to the call `what` ("poll", "event", ...): the kind from the status and the
// error body's code (docs/protocol.md section 3), and a message naming the call, status and server message.
CallError classify(unsigned status, std::string_view reply, std::string_view what);

template <class T>
using CallResult = boost::system::result<T, CallError>;

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  // POST /v1/workers with the agent token. The worker credential of the reply (workerToken) authenticates
  // the worker's other calls from then on; it is kept in memory only, never logged.
  virtual boost::asio::awaitable<CallResult<protocol::RegisterResponse>> register_worker(protocol::RegisterRequest r) = 0;
  // POST /v1/workers/{id}/poll, held by the server for up to `hold`. Cancellable (terminal cancellation).
  // `request` is a PollRequest's JSON text (protocol::poll_request_text): a manager's poll lists every attempt it
  // holds, and is written as text straight from them.
  virtual boost::asio::awaitable<CallResult<protocol::PollResponse>> poll(std::string worker_id, std::string request,
                                                                          std::chrono::milliseconds hold) = 0;
  // POST /v1/jobs/{id}/events.
  virtual boost::asio::awaitable<CallResult<protocol::EventResponse>> send_event(std::string job_id,
                                                                                 protocol::EventRequest e) = 0;
  // PUT /v1/jobs/{id}/logs/{stream}?offset=&lease=; returns the server's next offset.
  virtual boost::asio::awaitable<CallResult<std::uint64_t>> put_log(std::string job_id, protocol::LogStream stream,
                                                                    std::uint64_t offset, std::string lease_id,
                                                                    std::string bytes) = 0;
  // POST /v1/workers/{id}/exit.
  virtual boost::asio::awaitable<CallResult<void>> report_exit(std::string worker_id, protocol::ExitRequest r) = 0;
};

struct HttpControlPlaneConfig {
  std::string url;
  std::string token;                          // sent as a bearer token, never logged
  std::optional<std::string> ca_file;
  std::chrono::milliseconds request_timeout{30'000};
  // Event and log uploads on the wire at once, all attempts together; more wait their turn, oldest first.
  // Registration, polls and the exit report never wait behind them.
  std::size_t max_concurrent_uploads = 8;
};

// A ControlPlane over nymph::http. Returns an Error for a bad URL or CA file.
Result<std::unique_ptr<ControlPlane>> make_http_control_plane(boost::asio::any_io_executor ex,
                                                              HttpControlPlaneConfig config);

}  // namespace nymph::agent
