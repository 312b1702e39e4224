#include "agent/control_plane.hpp"

#include <utility>

#include "http/client.hpp"

namespace nymph::agent {

namespace asio = boost::asio;

void throw_exception_from_error(const CallError& e, const boost::source_location&) {
  throw std::runtime_error(e.message);
}

CallError classify(unsigned status, std::string_view reply, std::string_view what) {
  auto body = protocol::parse_error_document(reply);
  std::string detail = body ? body->message : std::string(reply.substr(0, 200));
  std::string message = std::string(what) + ": HTTP " + std::to_string(status) + (detail.empty() ? "" : ": " + detail);
  CallError e{.message = message};
  if (status == 401 || status == 403) e.kind = CallFailure::unauthorized;
  else if (status == 404 && body && body->code == "unknownWorker") e.kind = CallFailure::worker_unknown;
  else if (status == 409 && body && body->code == "logGap" && body->expected_offset) {
    e.kind = CallFailure::log_gap;
    e.expected_offset = body->expected_offset;
  } else if (status == 409 && body && body->code == "leaseLost") e.kind = CallFailure::fenced;
  else if (body && ((status == 409 && body->code == "attemptFinished") || (status == 413 && body->code == "logCapReached")))
    e.kind = CallFailure::closed;
  // 500 is a bug, so it is rejected (the last branch): retrying the same request repeats it.
  else if (status == 429 || status > 500) e.kind = CallFailure::transient;
  else e.kind = CallFailure::rejected;
  return e;
}

namespace {

class HttpControlPlane final : public ControlPlane {
 public:
  HttpControlPlane(http::Client client, HttpControlPlaneConfig config)
      : client_(std::move(client)), config_(std::move(config)) {}

  // Registration uses the agent token; the worker credential in the reply (kept in memory only) then
  // authenticates every call of that worker, until the next registration replaces it.
  asio::awaitable<CallResult<protocol::RegisterResponse>> register_worker(protocol::RegisterRequest r) override {
    auto reply = co_await call<protocol::RegisterResponse>(http::Method::post, protocol::workers_path(),
                                                           protocol::to_json_text(r), config_.request_timeout,
                                                           "register", config_.token, false);
    if (reply) worker_token_ = std::exchange(reply->worker_token, {});
    co_return reply;
  }

  asio::awaitable<CallResult<protocol::PollResponse>> poll(std::string worker_id, std::string request,
                                                           std::chrono::milliseconds hold) override {
    // The reply may take the whole hold; allow some slack for the network on top.
    co_return co_await call<protocol::PollResponse>(http::Method::post, protocol::poll_path(worker_id),
                                                    std::move(request), hold + std::chrono::seconds(15), "poll",
                                                    worker_credential(), false);
  }

  asio::awaitable<CallResult<protocol::EventResponse>> send_event(std::string job_id, protocol::EventRequest e) override {
    co_return co_await call<protocol::EventResponse>(http::Method::post, protocol::events_path(job_id),
                                                     protocol::to_json_text(e), config_.request_timeout, "event",
                                                     worker_credential(), true);
  }

  asio::awaitable<CallResult<std::uint64_t>> put_log(std::string job_id, protocol::LogStream stream, std::uint64_t offset,
                                                     std::string lease_id, std::string bytes) override {
    auto r = co_await send(http::Method::put, protocol::log_put_target(job_id, stream, offset, lease_id),
                           std::move(bytes), config_.request_timeout, "application/octet-stream",
                           worker_credential(), true);
    if (!r) co_return CallError{CallFailure::transient, "log upload: " + r.error().message};
    if (!r->ok()) co_return classify(r->status, r->body, "log upload");
    auto body = protocol::parse_as<protocol::LogAppendResponse>(r->body);
    if (!body) co_return CallError{CallFailure::rejected, "log upload: bad reply: " + body.error().message};
    co_return body->next_offset;
  }

  asio::awaitable<CallResult<void>> report_exit(std::string worker_id, protocol::ExitRequest x) override {
    auto r = co_await send(http::Method::post, protocol::exit_path(worker_id), protocol::to_json_text(x),
                           config_.request_timeout, "application/json", worker_credential(), false);
    if (!r) co_return CallError{CallFailure::transient, "exit report: " + r.error().message};
    if (!r->ok()) co_return classify(r->status, r->body, "exit report");
    co_return CallResult<void>{};
  }

 private:
  // The credential of the worker's own calls: its worker credential, or the agent token when the server
  // issued none.
  const std::string& worker_credential() const { return worker_token_.empty() ? config_.token : worker_token_; }

  // `queued`: an upload (event, log), which waits its turn among max_concurrent_uploads; the worker's one-at-a-
  // time calls (registration, poll, exit) never wait behind uploads.
  asio::awaitable<Result<http::Response>> send(http::Method m, std::string target, std::string body,
                                               std::chrono::milliseconds timeout, std::string content_type,
                                               const std::string& credential, bool queued) {
    http::Request req{.method = m,
                      .target = std::move(target),
                      .body = std::move(body),
                      .content_type = std::move(content_type),
                      .bearer_token = credential,
                      .timeout = timeout,
                      .unqueued = !queued};
    co_return co_await client_.request(std::move(req));
  }

  template <class T>
  asio::awaitable<CallResult<T>> call(http::Method m, std::string target, std::string body,
                                      std::chrono::milliseconds timeout, std::string_view what,
                                      const std::string& credential, bool queued) {
    auto r = co_await send(m, std::move(target), std::move(body), timeout, "application/json", credential, queued);
    if (!r) co_return CallError{CallFailure::transient, std::string(what) + ": " + r.error().message};
    if (!r->ok()) co_return classify(r->status, r->body, what);
    auto parsed = protocol::parse_as<T>(r->body);
    if (!parsed) co_return CallError{CallFailure::rejected, std::string(what) + ": bad reply: " + parsed.error().message};
    co_return std::move(*parsed);
  }

  http::Client client_;
  HttpControlPlaneConfig config_;
  std::string worker_token_;  // never logged
};

}  // namespace

Result<std::unique_ptr<ControlPlane>> make_http_control_plane(asio::any_io_executor ex, HttpControlPlaneConfig config) {
  http::ClientConfig cc;
  cc.ca_file = config.ca_file;
  cc.user_agent = "nymph-agent";
  cc.max_concurrent_requests = config.max_concurrent_uploads;
  cc.max_idle_connections = config.max_concurrent_uploads + 1;  // a burst's turns reuse them; +1: the poll's
  auto client = http::Client::create(ex, config.url, cc);
  if (!client) return client.error();
  return std::unique_ptr<ControlPlane>(new HttpControlPlane(std::move(*client), std::move(config)));
}

}  // namespace nymph::agent
