// `nymph-control token create|list|revoke` (docs/protocol.md section 2).
#include <chrono>
#include <iostream>

#include <boost/json/value_from.hpp>

#include "control/admin/api.hpp"
#include "control/admin/commands.hpp"
#include "control/admin/output.hpp"
#include "control/store.hpp"

namespace nymph::control::admin {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// The scope of `token create`: --tag k=v and --runner R. Returns an Error naming a bad --tag.
Result<TokenScope> scope_of(const TokenOptions& t) {
  TokenScope scope;
  for (const auto& kv : t.tags) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return fail("--tag expects KEY=VALUE, got '" + kv + "'");
    scope.tags[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  scope.runners = t.runners;
  return scope;
}

std::string scope_text(const protocol::TokenInfo& t) {
  std::string out;
  for (const auto& [k, v] : t.scope_tags) out.append(out.empty() ? "" : ",").append(k).append("=").append(v);
  for (const auto& r : t.scope_runners) out += (out.empty() ? "runner:" : ",runner:") + r;
  return out.empty() ? "-" : out;
}

asio::awaitable<int> token_list(AdminOptions o) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  auto list = co_await api->get<protocol::TokenList>(http::Method::get, protocol::tokens_path());
  if (!list) co_return report(list.error().message);
  if (o.json) {
    print_json(json::value_from(*list));
    co_return 0;
  }
  std::vector<std::vector<std::string>> rows{{"ID", "NAME", "ROLE", "SCOPE", "CREATED", "LAST USED", "REVOKED"}};
  for (const auto& t : list->tokens)
    rows.push_back({t.id, t.name.empty() ? "-" : t.name, t.role, scope_text(t), t.created_at,
                    t.last_used_at.value_or("-"), t.revoked_at.value_or("-")});
  print_table(rows);
  co_return 0;
}

asio::awaitable<int> token_revoke(AdminOptions o, std::string selector) {
  auto api = Api::connect(co_await asio::this_coro::executor, o);
  if (!api) co_return report(api.error().message);
  std::string body = protocol::to_json_text(protocol::RevokeRequest{selector});
  auto r = co_await api->get<protocol::RevokeResponse>(http::Method::post, protocol::revoke_path(), std::move(body));
  if (!r) co_return report(r.error().message);
  if (o.json) {
    print_json(json::value_from(*r));
    co_return 0;
  }
  if (r->revoked.empty()) std::cout << "'" << selector << "' was already revoked\n";
  for (const auto& t : r->revoked) std::cout << "revoked " << t.id << " " << (t.name.empty() ? "-" : t.name) << "\n";
  for (const auto& w : r->workers) std::cout << "worker " << w << " ended\n";
  co_return 0;
}

}  // namespace

int cmd_token_create(const TokenOptions& t) {
  auto role = parse_role(t.role);
  if (!role) return report("--role must be agent or admin, not '" + t.role + "'");
  auto scope = scope_of(t);
  if (!scope) return report(scope.error().message);
  if (*role == Role::admin && *scope != TokenScope{}) return report("--tag and --runner scope agent tokens only");
  try {
    auto store = Store::open(t.db_path);
    store->exec("BEGIN IMMEDIATE");
    std::string token = store->create_token(*role, t.name, std::chrono::system_clock::now(), *scope);
    store->exec("COMMIT");
    std::cout << token << std::endl;
    return 0;
  } catch (const std::exception& e) {
    return report(e.what());
  }
}

int cmd_token_list(const AdminOptions& o) { return run_sync(token_list(o)); }
int cmd_token_revoke(const AdminOptions& o, const std::string& selector) { return run_sync(token_revoke(o, selector)); }

}  // namespace nymph::control::admin
