#include "control/admin/api.hpp"

#include <chrono>

namespace nymph::control::admin {

namespace asio = boost::asio;
using namespace std::chrono_literals;

Result<Api> Api::connect(asio::any_io_executor ex, const AdminOptions& o) {
  auto t = resolve_target(o);
  if (!t) return t.error();
  http::ClientConfig cfg;
  cfg.ca_file = t->ca_file;
  cfg.user_agent = "nymph-control";
  auto c = http::Client::create(ex, t->url, cfg);
  if (!c) return c.error();
  return Api(std::move(*c), std::move(t->token));
}

asio::awaitable<Result<http::Response>> Api::call(http::Method m, std::string target, std::string body) {
  http::Request req{m, std::move(target), std::move(body), "application/json", token_, 60s};
  auto r = co_await client_.request(std::move(req));
  if (!r) co_return r.error();
  if (!r->ok()) {
    auto e = protocol::parse_error_document(r->body);
    co_return fail("HTTP " + std::to_string(r->status) + (e ? " " + e->code + ": " + e->message : ""));
  }
  co_return std::move(*r);
}

}  // namespace nymph::control::admin
