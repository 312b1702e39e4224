#pragma once
// SQL plumbing of the control plane's store: one SQLite connection with cached prepared statements,
// statements that bind and step, transactions by plain SQL (BEGIN, SAVEPOINT, COMMIT) and schema migrations
// counted by PRAGMA user_version. Synchronous and single-threaded: the DB thread owns the connection.
//
// Failures throw. SQLite errors that mean the storage is in trouble (busy/locked, I/O, full, read-only,
// cannot open, corrupt, no memory, ...) throw StorageError (an outage, answered 503); the others (an SQL
// error, a constraint violated, misuse of the API) are bugs of the caller and throw std::logic_error.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "control/storage_error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace nymph::control::sql {

// Binds SQL NULL.
struct Null {};
// Binds bytes as a BLOB (a plain string binds as TEXT).
struct Blob {
  std::string_view bytes;
};

// A cached prepared statement being used: bind, step, read columns. The destructor resets it and clears
// its bindings, so the cache can hand it out again.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds the arguments to parameters 1..N in order: strings (TEXT), Blob, integers, bool (0/1), Null, and
  // std::optional of those (NULL when empty). Returns *this to chain run()/step().
  template <class... A>
  Statement& bind(const A&... args) {
    int i = 0;
    (bind_one(++i, args), ...);
    return *this;
  }

  // Steps once: true when a row is available, false when done.
  bool step();
  // Steps a statement that returns no rows (or ignores them) to its end.
  void run();

  // Column readers for the current row (column index from 0).
  bool null(int c) const;
  std::int64_t i64(int c) const;
  int i32(int c) const;
  std::string text(int c) const;
  std::string blob(int c) const;
  std::optional<int> opt_i32(int c) const;
  std::optional<double> opt_f64(int c) const;  // an INTEGER column reads as its value
  std::optional<std::string> opt_text(int c) const;

 private:
  void check(int rc) const;
  void bind_one(int i, std::string_view s);
  void bind_one(int i, const std::string& s) { bind_one(i, std::string_view(s)); }
  void bind_one(int i, const char* s) { bind_one(i, std::string_view(s)); }
  void bind_one(int i, Blob b);
  void bind_one(int i, std::int64_t x);
  void bind_one(int i, int x) { bind_one(i, static_cast<std::int64_t>(x)); }
  void bind_one(int i, std::uint64_t x) { bind_one(i, static_cast<std::int64_t>(x)); }
  void bind_one(int i, bool x) { bind_one(i, static_cast<std::int64_t>(x ? 1 : 0)); }
  void bind_one(int i, Null);
  template <class T>
  void bind_one(int i, const std::optional<T>& x) {
    if (x) bind_one(i, *x);
    else bind_one(i, Null{});
  }

  sqlite3* db_;
  sqlite3_stmt* s_;
};

class Connection {
 public:
  // Opens (creating if needed) the database file at `path` in WAL mode with synchronous=FULL and foreign
  // keys on; a locked database is waited for up to `busy_timeout` before an operation fails as busy.
  // Throws StorageError naming the file when it cannot be opened or set up.
  static Connection open(const std::string& path, std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&&) = delete;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Runs SQL without results (BEGIN, SAVEPOINT, COMMIT, DDL; several statements allowed). Throws.
  void exec(const char* sql);
  // Rolls back the open transaction, if any; never throws (for cleanup paths).
  void rollback_quietly() noexcept;
  // The statement for `sql`, prepared once and cached by the pointer `sql`: pass string literals or strings
  // that live as long as the connection. Throws when it does not prepare.
  Statement query(const char* sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const;
  // PRAGMA user_version.
  int user_version();
  // Brings the schema to version migrations.size(): migrations[i] moves user_version i to i+1, all in one
  // transaction. Throws std::runtime_error when the file has a newer version than `migrations` knows (the
  // file is left untouched), or what exec throws.
  void migrate(std::span<const char* const> migrations);

 private:
  explicit Connection(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
};

}  // namespace nymph::control::sql
