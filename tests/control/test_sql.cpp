// The SQL plumbing on real files: migrations, binding and reading values, cached statements, and which
// failures are storage outages (StorageError) and which are bugs (std::logic_error).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "control/schema.hpp"
#include "control/sql.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::control;
using namespace std::chrono_literals;
using nymph::test::TempDir;

namespace {

constexpr const char* kTwoSteps[] = {"CREATE TABLE a(x INTEGER);", "CREATE TABLE b(y TEXT);"};

}  // namespace

TEST(Sql, MigrationsRunOnceAndCountInUserVersion) {
  TempDir dir("nymph-sql");
  auto path = (dir.path() / "m.db").string();
  {
    auto db = sql::Connection::open(path);
    EXPECT_EQ(db.user_version(), 0);
    db.migrate(std::span(kTwoSteps).first(1));
    EXPECT_EQ(db.user_version(), 1);
    db.migrate(kTwoSteps);  // only the second step runs: the first would fail (table exists)
    EXPECT_EQ(db.user_version(), 2);
    db.migrate(kTwoSteps);
  }
  auto again = sql::Connection::open(path);
  EXPECT_EQ(again.user_version(), 2);
  again.query("INSERT INTO b(y) VALUES('kept')").run();
}

TEST(Sql, ANewerSchemaIsRefusedAndLeftAlone) {
  TempDir dir("nymph-sql");
  auto path = (dir.path() / "n.db").string();
  sql::Connection::open(path).migrate(kTwoSteps);
  auto db = sql::Connection::open(path);
  EXPECT_THROW(db.migrate(std::span(kTwoSteps).first(1)), std::runtime_error);
  EXPECT_EQ(db.user_version(), 2);
}

TEST(Sql, TheControlPlaneSchemaMigratesToItsVersion) {
  TempDir dir("nymph-sql");
  auto db = sql::Connection::open((dir.path() / "c.db").string());
  db.migrate(schema_migrations());
  EXPECT_EQ(db.user_version(), kSchemaVersion);
}

// Schema 6 rebuilds the workers table (a worker is (launch_id, generation)): a version-5 database keeps its
// workers, each as generation 1, and the same launch may then hold a second generation.
TEST(Sql, WorkersOfAnOlderSchemaBecomeGenerationOne) {
  TempDir dir("nymph-sql");
  auto path = (dir.path() / "w.db").string();
  {
    auto db = sql::Connection::open(path);
    db.migrate(schema_migrations().first(5));
    db.exec("INSERT INTO workers(id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, "
            "capacity, profiles, status, registered_at, last_seen, token_hash, credential_hash, identity) VALUES("
            "'wrk_1', 'L1', 'lab', 'h', 7, '0.1', 1, 'slurm', '[]', '{}', '{}', '[]', 'gone', 't0', 't1', 'th', "
            "'ch', 'u@c')");
  }
  auto db = sql::Connection::open(path);
  db.migrate(schema_migrations());
  EXPECT_EQ(db.user_version(), kSchemaVersion);
  auto q = db.query("SELECT id, generation, label, pid, credential_hash, identity FROM workers WHERE launch_id='L1'");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "wrk_1");
  EXPECT_EQ(q.i64(1), 1);
  EXPECT_EQ(q.text(2), "lab");
  EXPECT_EQ(q.i64(3), 7);
  EXPECT_EQ(q.text(4), "ch");
  EXPECT_EQ(q.text(5), "u@c");
  db.exec("INSERT INTO workers(id, launch_id, generation, label, hostname, pid, version, protocol, backend, runners, "
          "tags, capacity, profiles, status, registered_at, last_seen) VALUES('wrk_2', 'L1', 2, 'lab', 'h', 8, "
          "'0.1', 1, 'slurm', '[]', '{}', '{}', '[]', 'active', 't2', 't2')");
  EXPECT_THROW(db.exec("INSERT INTO workers(id, launch_id, generation, label, hostname, pid, version, protocol, "
                       "backend, runners, tags, capacity, profiles, status, registered_at, last_seen) VALUES('wrk_3', "
                       "'L1', 2, 'lab', 'h', 9, '0.1', 1, 'slurm', '[]', '{}', '{}', '[]', 'active', 't3', 't3')"),
               std::logic_error);
}

TEST(Sql, ValuesRoundTripAndCachedStatementsAreReset) {
  TempDir dir("nymph-sql");
  auto db = sql::Connection::open((dir.path() / "v.db").string());
  db.exec("CREATE TABLE t(s TEXT, b BLOB, i INTEGER, o INTEGER, n TEXT)");
  std::string bytes("a\0b\xff", 4);
  std::optional<int> none;
  for (int round = 0; round < 2; ++round)  // the second round reuses the cached, reset statement
    db.query("INSERT INTO t VALUES(?,?,?,?,?)")
        .bind(std::string("text"), sql::Blob{bytes}, std::int64_t{1} << 40, std::optional<int>(7), none)
        .run();
  EXPECT_EQ(db.changes(), 1);
  auto q = db.query("SELECT s, b, i, o, n FROM t");
  int rows = 0;
  while (q.step()) {
    ++rows;
    EXPECT_EQ(q.text(0), "text");
    EXPECT_EQ(q.blob(1), bytes);
    EXPECT_EQ(q.i64(2), std::int64_t{1} << 40);
    EXPECT_EQ(q.opt_i32(3), 7);
    EXPECT_TRUE(q.null(4));
    EXPECT_EQ(q.opt_text(4), std::nullopt);
  }
  EXPECT_EQ(rows, 2);
}

TEST(Sql, SqlErrorsAndConstraintViolationsAreBugsNotOutages) {
  TempDir dir("nymph-sql");
  auto db = sql::Connection::open((dir.path() / "e.db").string());
  db.exec("CREATE TABLE t(k TEXT PRIMARY KEY)");
  try {
    db.query("SELECT nope FROM t");
    FAIL() << "expected a throw";
  } catch (const StorageError& e) {
    FAIL() << "an SQL error is not an outage: " << e.what();
  } catch (const std::logic_error&) {
  }
  db.query("INSERT INTO t VALUES('x')").run();
  EXPECT_THROW(db.query("INSERT INTO t VALUES('x')").run(), std::logic_error);
  EXPECT_THROW(db.exec("NOT SQL"), std::logic_error);
}

TEST(Sql, ALockedDatabaseIsAStorageErrorAfterTheBusyTimeout) {
  TempDir dir("nymph-sql");
  auto path = (dir.path() / "b.db").string();
  auto holder = sql::Connection::open(path);
  holder.exec("CREATE TABLE t(x INTEGER)");
  holder.exec("BEGIN IMMEDIATE");  // another process holding the write lock
  auto db = sql::Connection::open(path, 50ms);
  EXPECT_THROW(db.exec("BEGIN IMMEDIATE"), StorageError);
  EXPECT_THROW(db.query("INSERT INTO t VALUES(1)").run(), StorageError);
  holder.exec("COMMIT");
  db.query("INSERT INTO t VALUES(1)").run();  // the outage is over
}

TEST(Sql, AFileThatIsNotADatabaseIsAStorageError) {
  TempDir dir("nymph-sql");
  auto path = dir.path() / "junk.db";
  std::ofstream(path) << std::string(4096, 'x');
  EXPECT_THROW(sql::Connection::open(path.string()), StorageError);
  EXPECT_THROW(sql::Connection::open((dir.path() / "no/such/dir.db").string()), StorageError);
}

TEST(Sql, RollbackQuietlyUndoesAnOpenTransactionOnly) {
  TempDir dir("nymph-sql");
  auto db = sql::Connection::open((dir.path() / "r.db").string());
  db.exec("CREATE TABLE t(x INTEGER)");
  db.rollback_quietly();  // none open: nothing happens
  db.exec("BEGIN");
  db.query("INSERT INTO t VALUES(1)").run();
  db.rollback_quietly();
  auto q = db.query("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.i64(0), 0);
}

namespace {

// The files this process holds open whose path contains `part` (a deleted temp file included: its link reads
// "/var/tmp/etilqs_... (deleted)").
int open_files_named(const std::string& part) {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(fd.path(), ec);
    if (!ec && target.string().find(part) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace

// The DB thread runs each operation in a savepoint. A savepoint that changes more than 64 KiB of existing pages
// would spill its sub-journal to a new temp file (SQLite's "etilqs_" files: an inode created and freed on busy
// batches); with temp_store=MEMORY it stays in memory.
TEST(Sql, ASavepointChangingManyPagesOpensNoTempFile) {
  TempDir dir("nymph-sql");
  auto db = sql::Connection::open((dir.path() / "t.db").string());
  db.exec("CREATE TABLE t(i INTEGER PRIMARY KEY, s TEXT)");
  db.exec("BEGIN");
  for (int i = 0; i < 2000; ++i) db.query("INSERT INTO t(s) VALUES(?)").bind(std::string(500, 'x')).run();
  db.exec("COMMIT");  // about 1 MB of pages that exist before the savepoint below
  db.exec("BEGIN");
  db.exec("SAVEPOINT op");
  db.exec("UPDATE t SET s = s || 'y'");
  EXPECT_EQ(open_files_named("etilqs"), 0);
  db.exec("RELEASE op");
  db.exec("ROLLBACK");
}
