#include "control/sql.hpp"

#include <sqlite3.h>

#include <stdexcept>

namespace nymph::control::sql {

namespace {

// True for the SQLite result codes that mean "the storage is in trouble" rather than "the code is wrong".
bool is_outage(int rc) {
  switch (rc & 0xff) {  // the primary code of an extended one
    case SQLITE_ERROR:       // SQL error or missing database object
    case SQLITE_INTERNAL:
    case SQLITE_CONSTRAINT:  // the store checks before it writes: a violation is a bug
    case SQLITE_MISMATCH:
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:      // requests are bounded long before SQLite's limits
    case SQLITE_AUTH:
    case SQLITE_FORMAT:
      return false;
    default:  // BUSY, LOCKED, NOMEM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, PROTOCOL, NOTADB, PERM, ...
      return true;
  }
}

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what) {
  std::string text = "SQLite (" + std::string(what) + "): " + sqlite3_errmsg(db);
  if (is_outage(rc)) throw StorageError("storage error: " + text);
  throw std::logic_error(text);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Statement

Statement::~Statement() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

bool Statement::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db_, rc, sqlite3_sql(s_));
}

void Statement::run() {
  while (step()) {
  }
}

bool Statement::null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
std::int64_t Statement::i64(int c) const { return sqlite3_column_int64(s_, c); }
int Statement::i32(int c) const { return static_cast<int>(sqlite3_column_int64(s_, c)); }

std::string Statement::text(int c) const {
  auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : std::string();
}

std::string Statement::blob(int c) const {
  auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : std::string();
}

std::optional<int> Statement::opt_i32(int c) const { return null(c) ? std::nullopt : std::optional<int>(i32(c)); }

std::optional<double> Statement::opt_f64(int c) const {
  return null(c) ? std::nullopt : std::optional<double>(sqlite3_column_double(s_, c));
}

std::optional<std::string> Statement::opt_text(int c) const {
  return null(c) ? std::nullopt : std::optional<std::string>(text(c));
}

void Statement::check(int rc) const {
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
}

void Statement::bind_one(int i, std::string_view s) {
  check(sqlite3_bind_text(s_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
}

void Statement::bind_one(int i, Blob b) {
  check(sqlite3_bind_blob64(s_, i, b.bytes.data(), b.bytes.size(), SQLITE_TRANSIENT));
}

void Statement::bind_one(int i, std::int64_t x) { check(sqlite3_bind_int64(s_, i, x)); }
void Statement::bind_one(int i, Null) { check(sqlite3_bind_null(s_, i)); }

// ---------------------------------------------------------------------------------------------------------
// Connection

Connection Connection::open(const std::string& path, std::chrono::milliseconds busy_timeout) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw StorageError("cannot open database '" + path + "': " + why);
  }
  Connection c(db);
  sqlite3_busy_timeout(db, static_cast<int>(busy_timeout.count()));
  try {
    c.exec("PRAGMA journal_mode=WAL");
    c.exec("PRAGMA synchronous=FULL");
    c.exec("PRAGMA foreign_keys=ON");
    // Temporary tables and the savepoints' sub-journal in memory: the DB thread's one savepoint per operation
    // otherwise spills its sub-journal past 64 KiB to a new temp file (create, write, unlink: ext4 inode work
    // on every busy batch). It holds only the pages one transaction changes.
    c.exec("PRAGMA temp_store=MEMORY");
  } catch (const std::exception& e) {
    throw StorageError("cannot open database '" + path + "': " + e.what());
  }
  return c;
}

Connection::Connection(Connection&& other) noexcept : db_(other.db_), cache_(std::move(other.cache_)) {
  other.db_ = nullptr;
  other.cache_.clear();
}

Connection::~Connection() {
  for (auto& [_, s] : cache_) sqlite3_finalize(s);
  sqlite3_close(db_);  // a no-op for nullptr (moved from)
}

void Connection::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return;
  std::string why = err ? err : sqlite3_errmsg(db_);
  sqlite3_free(err);
  std::string text = "SQLite (" + std::string(sql).substr(0, 40) + "): " + why;
  if (is_outage(rc)) throw StorageError("storage error: " + text);
  throw std::logic_error(text);
}

void Connection::rollback_quietly() noexcept {
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

Statement Connection::query(const char* sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Statement(db_, it->second);
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, std::string("prepare: ") + sql);
  cache_.emplace(sql, s);
  return Statement(db_, s);
}

int Connection::changes() const { return sqlite3_changes(db_); }

int Connection::user_version() {
  auto q = query("PRAGMA user_version");
  return q.step() ? q.i32(0) : 0;
}

void Connection::migrate(std::span<const char* const> migrations) {
  const int known = static_cast<int>(migrations.size());
  exec("BEGIN IMMEDIATE");
  try {
    int v = user_version();
    if (v > known)
      throw std::runtime_error("database schema version " + std::to_string(v) +
                               " is newer than this nymph-control understands (" + std::to_string(known) + ")");
    for (; v < known; ++v) {
      exec(migrations[static_cast<std::size_t>(v)]);
      exec(("PRAGMA user_version=" + std::to_string(v + 1)).c_str());
    }
    exec("COMMIT");
  } catch (...) {
    rollback_quietly();
    throw;
  }
}

}  // namespace nymph::control::sql
