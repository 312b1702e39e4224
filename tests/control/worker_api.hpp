#pragma once
// WorkerApi: the protocol calls of workers and of an admin against one real `nymph-control` (ControlServer),
// synchronously (each call runs under run_coro's hang guard), for the tests of the worker seams: takeover,
// event order, lease TTLs, lastSeen.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "http/client.hpp"
#include "protocol/protocol.hpp"
#include "tests/support/control_server.hpp"
#include "tests/support/ids.hpp"
#include "tests/support/run_coro.hpp"

namespace nymph::test {

class WorkerApi {
 public:
  // One worker as an agent sees it.
  struct Worker {
    std::string id, credential;
    protocol::RegisterResponse reply;
  };

  explicit WorkerApi(const ControlServer& cp)
      : cp_(cp), client_(http::Client::create(ioc_.get_executor(), cp.url()).value()) {}

  http::Response send(http::Method m, std::string target, const std::string& token, std::string body = {}) {
    http::Request r{m, std::move(target), std::move(body), "application/json", token, std::chrono::seconds(60)};
    return run_coro(ioc_, client_.request(std::move(r)), std::chrono::seconds(90)).value();
  }

  // "STATUS code" of a reply, e.g. "409 leaseLost" (just "200" for a success).
  static std::string outcome(const http::Response& r) {
    auto e = protocol::parse_error_document(r.body);
    return std::to_string(r.status) + (e ? " " + e->code : "");
  }

  static protocol::RegisterRequest registration(std::optional<std::string> identity = std::nullopt,
                                                std::vector<protocol::AttemptRef> running = {},
                                                std::vector<std::string> runners = {"process"}) {
    protocol::RegisterRequest reg;
    reg.launch_id = fresh_ulid();
    reg.hostname = "login1";
    reg.runners = std::move(runners);
    reg.identity = std::move(identity);
    reg.running = std::move(running);
    return reg;
  }

  Worker register_with(const protocol::RegisterRequest& reg, const std::string& agent_token = {}) {
    auto r = send(http::Method::post, protocol::workers_path(), agent_token.empty() ? cp_.agent_token() : agent_token,
                  protocol::to_json_text(reg));
    if (r.status != 201 && r.status != 200) throw std::runtime_error("register: " + r.body);
    auto reply = protocol::parse_as<protocol::RegisterResponse>(r.body).value();
    return {reply.worker_id, reply.worker_token, reply};
  }

  std::string submit(std::string runner = "process", int max_attempts = 2) {
    protocol::JobSubmission s;
    s.runner = std::move(runner);
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    s.max_attempts = max_attempts;
    auto r = send(http::Method::post, protocol::jobs_path(), cp_.admin_token(), protocol::to_json_text(s));
    if (r.status != 201) throw std::runtime_error("submit: " + r.body);
    return protocol::parse_as<protocol::JobInfo>(r.body).value().id;
  }

  http::Response poll_raw(const Worker& w, std::map<std::string, int> free,
                          std::vector<protocol::AttemptRef> running = {}) {
    protocol::PollRequest body;
    body.free = std::move(free);
    body.running = std::move(running);
    return send(http::Method::post, protocol::poll_path(w.id), w.credential, protocol::to_json_text(body));
  }

  protocol::PollResponse poll(const Worker& w, std::map<std::string, int> free,
                              std::vector<protocol::AttemptRef> running = {}) {
    auto r = poll_raw(w, std::move(free), std::move(running));
    if (r.status != 200) throw std::runtime_error("poll: " + r.body);
    return protocol::parse_as<protocol::PollResponse>(r.body).value();
  }

  static protocol::EventRequest event(const std::string& lease, std::int64_t seq, protocol::EventState st) {
    protocol::EventRequest e;
    e.lease_id = lease;
    e.seq = seq;
    e.state = st;
    if (protocol::is_final(st) && st != protocol::EventState::lost) e.exit_code = 0;
    return e;
  }

  http::Response post_event(const Worker& w, const std::string& job, const protocol::EventRequest& e) {
    return send(http::Method::post, protocol::events_path(job), w.credential, protocol::to_json_text(e));
  }

  protocol::WorkerInfo worker_info(const std::string& id) {
    auto r = send(http::Method::get, protocol::workers_path(), cp_.admin_token());
    for (auto& w : protocol::parse_as<protocol::WorkerList>(r.body).value().workers)
      if (w.id == id) return w;
    throw std::runtime_error("no worker " + id);
  }

  protocol::JobInfo job_info(const std::string& id) {
    auto r = send(http::Method::get, protocol::job_path(id), cp_.admin_token());
    if (r.status != 200) throw std::runtime_error("job: " + r.body);
    return protocol::parse_as<protocol::JobInfo>(r.body).value();
  }

  // The value of one /metrics line, e.g. metric("nymph_workers{status=\"gone\"}"); -1 when absent.
  long metric(const std::string& name) {
    auto body = send(http::Method::get, "/metrics", "").body;
    auto at = body.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stol(body.substr(at + name.size() + 2));
  }

 private:
  const ControlServer& cp_;
  boost::asio::io_context ioc_;
  http::Client client_;
};

}  // namespace nymph::test
