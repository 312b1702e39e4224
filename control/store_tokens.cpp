// The Store's API tokens and worker credentials (docs/protocol.md section 2).
#include "control/store.hpp"

namespace nymph::control {

namespace {

constexpr std::size_t kTokenIdLength = 12;  // hex digits of the hash shown as a token's id
constexpr const char* kTokenColumns = "hash, name, role, scope, revoked_at";

TokenRecord token_record_from(const sql::Statement& q, int first) {
  TokenRecord t;
  t.hash = q.text(first);
  t.name = q.text(first + 1);
  auto role = parse_role(q.text(first + 2));
  if (!role) throw std::runtime_error("token row with an unknown role '" + q.text(first + 2) + "'");
  t.role = *role;
  auto scope = scope_from_json(q.text(first + 3));
  if (!scope) throw std::runtime_error("token row with an unreadable scope");
  t.scope = std::move(*scope);
  t.revoked = q.opt_text(first + 4).has_value();
  return t;
}

protocol::TokenInfo token_info_from(const sql::Statement& q) {
  TokenRecord t = token_record_from(q, 0);
  protocol::TokenInfo info;
  info.id = t.hash.substr(0, kTokenIdLength);
  info.name = t.name;
  info.role = std::string(to_string(t.role));
  info.scope_tags = t.scope.tags;
  info.scope_runners = t.scope.runners;
  info.revoked_at = q.opt_text(4);
  info.created_at = q.text(5);
  info.last_used_at = q.opt_text(6);
  return info;
}

}  // namespace

std::string Store::create_token(Role role, const std::string& name, WallTime now, const TokenScope& scope) {
  std::string token = new_token();
  db_.query("INSERT INTO tokens(hash, role, name, created_at, scope) VALUES(?,?,?,?,?)")
      .bind(token_hash(token), to_string(role), name, protocol::format_time(now), scope_to_json(scope))
      .run();
  return token;
}

std::optional<TokenRecord> Store::find_token(const std::string& token) {
  static const std::string sql = std::string("SELECT ") + kTokenColumns + " FROM tokens WHERE hash=?";
  auto q = db_.query(sql.c_str());
  q.bind(token_hash(token));
  if (!q.step()) return std::nullopt;
  return token_record_from(q, 0);
}

std::optional<WorkerCredential> Store::find_worker_credential(const std::string& token) {
  auto q = db_.query(
      "SELECT w.id, t.hash, t.name, t.role, t.scope, t.revoked_at FROM workers w JOIN tokens t ON t.hash=w.token_hash "
      "WHERE w.credential_hash=?");
  q.bind(token_hash(token));
  if (!q.step()) return std::nullopt;
  return WorkerCredential{q.text(0), token_record_from(q, 1)};
}

bool Store::touch_token(const std::string& hash, WallTime now) {
  db_.query("UPDATE tokens SET last_used_at=? WHERE hash=?").bind(protocol::format_time(now), hash).run();
  return db_.changes() > 0;
}

protocol::TokenList Store::list_tokens() {
  static const std::string sql =
      std::string("SELECT ") + kTokenColumns + ", created_at, last_used_at FROM tokens ORDER BY created_at, hash";
  auto q = db_.query(sql.c_str());
  protocol::TokenList out;
  while (q.step()) out.tokens.push_back(token_info_from(q));
  return out;
}

ApiResult<RevokeOutcome> Store::revoke_tokens(const std::string& selector, WallTime now) {
  static const std::string sql = std::string("SELECT ") + kTokenColumns +
                                 ", created_at, last_used_at FROM tokens WHERE name=? OR substr(hash, 1, " +
                                 std::to_string(kTokenIdLength) + ")=? ORDER BY created_at";
  std::vector<protocol::TokenInfo> matched;
  std::vector<std::string> hashes;
  {
    auto q = db_.query(sql.c_str());
    q.bind(selector, selector.size() == kTokenIdLength ? selector : std::string());
    while (q.step()) {
      if (q.opt_text(4)) continue;  // revoked before
      hashes.push_back(q.text(0));
      matched.push_back(token_info_from(q));
    }
  }
  if (matched.empty()) {
    static const std::string exists_sql =
        "SELECT 1 FROM tokens WHERE name=? OR substr(hash, 1, " + std::to_string(kTokenIdLength) + ")=?";
    auto any = db_.query(exists_sql.c_str());
    any.bind(selector, selector.size() == kTokenIdLength ? selector : std::string());
    if (!any.step()) return ApiError{404, "unknownToken", "no token named '" + selector + "' or with that id", {}};
  }
  RevokeOutcome out;
  std::string when = protocol::format_time(now);
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    db_.query("UPDATE tokens SET revoked_at=? WHERE hash=?").bind(when, hashes[i]).run();
    matched[i].revoked_at = when;
    std::string why = "the agent token" + (matched[i].name.empty() ? std::string() : " '" + matched[i].name + "'") +
                      " was revoked";
    auto w = db_.query("SELECT id, status FROM workers WHERE token_hash=? AND status<>'gone'");
    w.bind(hashes[i]);
    while (w.step()) {
      out.reply.workers.push_back(w.text(0));
      worker_moved(protocol::parse_worker_status(w.text(1)), protocol::WorkerStatus::gone);
    }
    db_.query("UPDATE workers SET status='gone', exit_reason='error', exit_message=?, last_seen=? "
              "WHERE token_hash=? AND status<>'gone'")
        .bind(why, when, hashes[i])
        .run();
  }
  out.reply.revoked = std::move(matched);
  out.token_hashes = std::move(hashes);
  return out;
}

}  // namespace nymph::control
