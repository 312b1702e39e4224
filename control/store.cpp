#include "control/store.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sqlite3.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

namespace nymph::control {

namespace json = boost::json;
using protocol::AttemptState;
using protocol::EventState;
using protocol::JobState;
using protocol::WorkerStatus;

std::string_view to_string(Role r) { return r == Role::admin ? "admin" : "agent"; }

std::optional<Role> parse_role(std::string_view s) {
  if (s == "admin") return Role::admin;
  if (s == "agent") return Role::agent;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------
// SQLite plumbing

namespace {

struct Null {};
struct Blob {
  std::string_view bytes;
};

[[noreturn]] void throw_sqlite(sqlite3* db, const std::string& what) {
  throw std::runtime_error("storage error (" + what + "): " + sqlite3_errmsg(db));
}

[[noreturn]] void throw_log_io(const std::filesystem::path& file, const std::string& what) {
  throw std::runtime_error("log file " + file.string() + ": " + what + ": " + std::strerror(errno));
}

// fsyncs the directory `dir`, so that a new entry in it survives a crash. Throws std::runtime_error.
void sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_log_io(dir, "cannot open directory");
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) throw_log_io(dir, "cannot sync directory");
}

// Writes `bytes` at `offset` of `file` and makes them durable before the caller commits the new size; a new
// file's directory entry (and a new directory's) is made durable too. Throws std::runtime_error on I/O errors.
void write_log_bytes(const std::filesystem::path& file, std::uint64_t offset, std::string_view bytes) {
  auto dir = file.parent_path();
  bool new_dir = ::mkdir(dir.c_str(), 0700) == 0;
  if (!new_dir && errno != EEXIST) throw_log_io(dir, "cannot create");
  bool new_file = ::access(file.c_str(), F_OK) != 0;
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw_log_io(file, "cannot open");
  const char* failed = nullptr;
  while (!bytes.empty() && !failed) {
    ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed = "cannot write";
    } else {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
  }
  if (!failed && ::fdatasync(fd) != 0) failed = "cannot sync";
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (failed) throw_log_io(file, failed);
  if (new_file) sync_directory(dir);
  if (new_dir) sync_directory(dir.has_parent_path() ? dir.parent_path() : std::filesystem::path("."));
}

// Reads up to `n` bytes at `offset` of `file` (fewer only at its end). Throws std::runtime_error on I/O errors.
std::string read_log_bytes(const std::filesystem::path& file, std::uint64_t offset, std::size_t n) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_log_io(file, "cannot open");
  std::string out(n, '\0');
  std::size_t got = 0;
  bool failed = false;
  while (got < n && !failed) {
    ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) failed = true;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (failed) throw_log_io(file, "cannot read");
  out.resize(got);
  return out;
}

std::string hex_sha256(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string random_token() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) throw std::runtime_error("cannot generate random bytes (OpenSSL RAND_bytes)");
  unsigned char b64[64];
  int n = EVP_EncodeBlock(b64, raw, sizeof raw);
  std::string t(reinterpret_cast<char*>(b64), static_cast<std::size_t>(n));
  for (char& c : t) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  while (!t.empty() && t.back() == '=') t.pop_back();
  return "nym_" + t;
}

template <class T>
std::string to_text(const T& x) {
  return json::serialize(json::value_from(x));
}

template <class T>
T from_text(const std::string& text) {
  auto v = protocol::parse_json(text);
  if (!v) throw std::runtime_error("corrupt JSON in the database: " + v.error().message);
  auto r = protocol::from_json<T>(*v);
  if (!r) throw std::runtime_error("corrupt JSON in the database: " + r.error().message);
  return *r;
}

// Containers stored as JSON text (written by to_text, so a mismatch means a corrupt database).
json::value json_from(const std::string& text) {
  auto v = protocol::parse_json(text);
  if (!v) throw std::runtime_error("corrupt JSON in the database: " + v.error().message);
  return std::move(*v);
}

std::vector<std::string> strings_from(const std::string& text) {
  std::vector<std::string> out;
  json::value v = json_from(text);
  if (v.is_array())
    for (const auto& e : v.get_array())
      if (e.is_string()) out.emplace_back(e.get_string());
  return out;
}

std::map<std::string, std::string> string_map_from(const std::string& text) {
  std::map<std::string, std::string> out;
  json::value v = json_from(text);
  if (v.is_object())
    for (const auto& kv : v.get_object())
      if (kv.value().is_string()) out.emplace(kv.key(), kv.value().get_string());
  return out;
}

std::map<std::string, int> int_map_from(const std::string& text) {
  std::map<std::string, int> out;
  json::value v = json_from(text);
  if (v.is_object())
    for (const auto& kv : v.get_object())
      if (kv.value().is_int64()) out.emplace(kv.key(), static_cast<int>(kv.value().get_int64()));
  return out;
}

}  // namespace

// A cached prepared statement, bound and stepped; reset when destroyed.
class Store::Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Stmt(const Stmt&) = delete;
  ~Stmt() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

  template <class... A>
  Stmt& bind(const A&... args) {
    int i = 0;
    (bind_one(++i, args), ...);
    return *this;
  }

  // Steps once: true when a row is available.
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, sqlite3_sql(s_));
  }

  // Steps a statement that returns no rows.
  void run() {
    while (step()) {
    }
  }

  bool null(int c) { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::int64_t i64(int c) { return sqlite3_column_int64(s_, c); }
  int i32(int c) { return static_cast<int>(sqlite3_column_int64(s_, c)); }
  std::string text(int c) {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }
  std::string blob(int c) {
    auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }
  std::optional<int> opt_i32(int c) { return null(c) ? std::nullopt : std::optional<int>(i32(c)); }
  std::optional<std::string> opt_text(int c) { return null(c) ? std::nullopt : std::optional<std::string>(text(c)); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, "bind");
  }
  void bind_one(int i, std::string_view s) {
    check(sqlite3_bind_text(s_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
  }
  void bind_one(int i, const std::string& s) { bind_one(i, std::string_view(s)); }
  void bind_one(int i, const char* s) { bind_one(i, std::string_view(s)); }
  void bind_one(int i, Blob b) {
    check(sqlite3_bind_blob64(s_, i, b.bytes.data(), b.bytes.size(), SQLITE_TRANSIENT));
  }
  void bind_one(int i, std::int64_t x) { check(sqlite3_bind_int64(s_, i, x)); }
  void bind_one(int i, int x) { check(sqlite3_bind_int64(s_, i, x)); }
  void bind_one(int i, std::uint64_t x) { check(sqlite3_bind_int64(s_, i, static_cast<std::int64_t>(x))); }
  void bind_one(int i, bool x) { check(sqlite3_bind_int64(s_, i, x ? 1 : 0)); }
  void bind_one(int i, Null) { check(sqlite3_bind_null(s_, i)); }
  template <class T>
  void bind_one(int i, const std::optional<T>& x) {
    if (x) bind_one(i, *x);
    else bind_one(i, Null{});
  }

  sqlite3* db_;
  sqlite3_stmt* s_;
};

namespace {

// Schema migrations: kMigrations[i] moves user_version i to i+1.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE tokens(
  hash TEXT PRIMARY KEY, role TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL);
CREATE TABLE workers(
  id TEXT PRIMARY KEY, launch_id TEXT NOT NULL UNIQUE, label TEXT NOT NULL, hostname TEXT NOT NULL,
  pid INTEGER NOT NULL, version TEXT NOT NULL, protocol INTEGER NOT NULL, backend TEXT NOT NULL,
  runners TEXT NOT NULL, tags TEXT NOT NULL, capacity TEXT NOT NULL, profiles TEXT NOT NULL, slurm TEXT,
  status TEXT NOT NULL, exit_reason TEXT, exit_message TEXT NOT NULL DEFAULT '', directive TEXT,
  registered_at TEXT NOT NULL, last_seen TEXT NOT NULL);
CREATE TABLE jobs(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, state TEXT NOT NULL, runner TEXT NOT NULL,
  kind TEXT NOT NULL, profile TEXT, spec TEXT NOT NULL, required_tags TEXT NOT NULL,
  max_attempts INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, current_lease TEXT, worker_id TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, signal INTEGER,
  message TEXT NOT NULL DEFAULT '', result TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  finished_at TEXT);
CREATE INDEX jobs_by_state ON jobs(state, seq);
CREATE TABLE attempts(
  lease_id TEXT PRIMARY KEY, job_id TEXT NOT NULL, attempt INTEGER NOT NULL, worker_id TEXT NOT NULL,
  state TEXT NOT NULL, exit_code INTEGER, signal INTEGER, message TEXT NOT NULL DEFAULT '', slurm_job_id TEXT,
  last_seq INTEGER NOT NULL DEFAULT 0, assigned_at TEXT NOT NULL, finished_at TEXT, UNIQUE(job_id, attempt));
CREATE INDEX attempts_by_worker ON attempts(worker_id, state);
CREATE TABLE events(
  lease_id TEXT NOT NULL, seq INTEGER NOT NULL, job_id TEXT NOT NULL, attempt INTEGER NOT NULL,
  state TEXT NOT NULL, exit_code INTEGER, signal INTEGER, message TEXT NOT NULL, slurm_job_id TEXT,
  result TEXT, at TEXT, received_at TEXT NOT NULL, PRIMARY KEY(lease_id, seq));
CREATE INDEX events_by_job ON events(job_id, attempt, seq);
CREATE TABLE log_chunks(
  job_id TEXT NOT NULL, attempt INTEGER NOT NULL, stream TEXT NOT NULL, start INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE UNIQUE INDEX log_chunks_by_start ON log_chunks(job_id, attempt, stream, start);
CREATE TABLE log_sizes(
  job_id TEXT NOT NULL, attempt INTEGER NOT NULL, stream TEXT NOT NULL, size INTEGER NOT NULL,
  PRIMARY KEY(job_id, attempt, stream));
)sql",
};

constexpr const char* kJobCols =
    "id, state, runner, kind, spec, required_tags, max_attempts, attempts, worker_id, cancel_requested, "
    "exit_code, signal, message, result, created_at, updated_at, finished_at";

bool live(AttemptState s) { return s == AttemptState::assigned || s == AttemptState::pending || s == AttemptState::running; }

JobState job_state(const std::string& s) {
  auto st = protocol::parse_job_state(s);
  if (!st) throw std::runtime_error("corrupt job state '" + s + "' in the database");
  return *st;
}

AttemptState attempt_state(const std::string& s) {
  auto st = protocol::parse_attempt_state(s);
  if (!st) throw std::runtime_error("corrupt attempt state '" + s + "' in the database");
  return *st;
}

JobNeeds needs_of(const std::string& runner, const std::optional<std::string>& profile,
                  const std::map<std::string, std::string>& tags) {
  return JobNeeds{runner, tags, profile};
}

}  // namespace

struct Store::AttemptRow {
  std::string lease_id;
  std::string job_id;
  int attempt = 0;
  std::string worker_id;
  AttemptState state = AttemptState::assigned;
  std::int64_t last_seq = 0;
  // From the job:
  JobState job_state = JobState::queued;
  std::optional<std::string> current_lease;
  bool cancel_requested = false;
  int attempts_made = 0;
  int max_attempts = 0;
  std::string runner;
  std::optional<std::string> profile;
  std::string required_tags;
};

Store::Store(sqlite3* db, std::filesystem::path log_dir) : db_(db), log_dir_(std::move(log_dir)) {}

Store::~Store() {
  for (auto& [_, s] : cache_) sqlite3_finalize(s);
  sqlite3_close(db_);
}

std::unique_ptr<Store> Store::open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw std::runtime_error("cannot open database '" + path + "': " + why);
  }
  std::unique_ptr<Store> s(new Store(db, path + ".logs"));
  sqlite3_busy_timeout(db, 5000);
  s->exec("PRAGMA journal_mode=WAL");
  s->exec("PRAGMA synchronous=FULL");
  s->exec("PRAGMA foreign_keys=ON");
  s->migrate();
  return s;
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw std::runtime_error("storage error: " + why);
  }
}

int Store::schema_version() {
  auto q = query("PRAGMA user_version");
  return q.step() ? q.i32(0) : 0;
}

void Store::migrate() {
  constexpr int known = static_cast<int>(std::size(kMigrations));
  static_assert(known == kSchemaVersion);
  exec("BEGIN IMMEDIATE");
  try {
    int v = schema_version();
    if (v > known)
      throw std::runtime_error("database schema version " + std::to_string(v) +
                               " is newer than this nymph-control understands (" + std::to_string(known) + ")");
    for (; v < known; ++v) {
      exec(kMigrations[v]);
      exec(("PRAGMA user_version=" + std::to_string(v + 1)).c_str());
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

sqlite3_stmt* Store::prepared(const char* sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return it->second;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
    throw_sqlite(db_, std::string("prepare: ") + sql);
  cache_.emplace(sql, s);
  return s;
}

Store::Stmt Store::query(const char* sql) { return Stmt(db_, prepared(sql)); }

// ---------------------------------------------------------------------------------------------------------
// Tokens

std::string Store::create_token(Role role, const std::string& name, WallTime now) {
  std::string token = random_token();
  query("INSERT INTO tokens(hash, role, name, created_at) VALUES(?,?,?,?)")
      .bind(hex_sha256(token), to_string(role), name, protocol::format_time(now))
      .run();
  return token;
}

std::optional<Role> Store::find_token(const std::string& token) {
  auto q = query("SELECT role FROM tokens WHERE hash=?");
  q.bind(hex_sha256(token));
  if (!q.step()) return std::nullopt;
  return parse_role(q.text(0));
}

// ---------------------------------------------------------------------------------------------------------
// Workers

std::optional<protocol::WorkerInfo> Store::worker(const std::string& id) {
  auto q = query(
      "SELECT id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, capacity, profiles, "
      "slurm, status, exit_reason, exit_message, directive, registered_at, last_seen FROM workers WHERE id=?");
  q.bind(id);
  if (!q.step()) return std::nullopt;
  protocol::WorkerInfo w;
  w.id = q.text(0);
  w.launch_id = q.text(1);
  w.label = q.text(2);
  w.hostname = q.text(3);
  w.pid = q.i64(4);
  w.version = q.text(5);
  w.protocol = q.i32(6);
  w.backend = q.text(7);
  w.runners = strings_from(q.text(8));
  w.tags = string_map_from(q.text(9));
  w.capacity = int_map_from(q.text(10));
  w.profiles = strings_from(q.text(11));
  if (!q.null(12)) w.slurm = from_text<protocol::SlurmAllocation>(q.text(12));
  w.status = protocol::parse_worker_status(q.text(13)).value_or(WorkerStatus::stale);
  if (auto r = q.opt_text(14)) w.exit_reason = protocol::parse_exit_reason(*r);
  w.exit_message = q.text(15);
  if (auto d = q.opt_text(16)) w.directive = protocol::parse_directive(*d);
  w.registered_at = q.text(17);
  w.last_seen = q.text(18);
  auto r = query(
      "SELECT a.job_id FROM attempts a JOIN jobs j ON j.id=a.job_id AND j.current_lease=a.lease_id "
      "WHERE a.worker_id=? AND a.state IN ('assigned','pending','running') ORDER BY j.seq");
  r.bind(id);
  while (r.step()) w.running_jobs.push_back(r.text(0));
  return w;
}

ApiResult<RegisterOutcome> Store::register_worker(const protocol::RegisterRequest& req, WallTime now) {
  RegisterOutcome out;
  std::string when = protocol::format_time(now);
  std::optional<std::string> slurm;
  if (req.slurm) slurm = to_text(*req.slurm);
  auto find = query("SELECT id, status FROM workers WHERE launch_id=?");
  find.bind(req.launch_id);
  if (find.step()) {
    out.reply.worker_id = find.text(0);
    bool was_gone = find.text(1) == "gone";
    query(
        "UPDATE workers SET label=?, hostname=?, pid=?, version=?, protocol=?, backend=?, runners=?, tags=?, "
        "capacity=?, profiles=?, slurm=?, status='active', exit_reason=NULL, exit_message='', "
        "directive=CASE WHEN ? THEN NULL ELSE directive END, last_seen=? WHERE id=?")
        .bind(req.label, req.hostname, req.pid, req.version, req.protocol, req.backend, to_text(req.runners),
              to_text(req.tags), to_text(req.capacity), to_text(req.profiles), slurm, was_gone, when,
              out.reply.worker_id)
        .run();
  } else {
    out.created = true;
    out.reply.worker_id = "wrk_" + protocol::new_ulid();
    query(
        "INSERT INTO workers(id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, "
        "capacity, profiles, slurm, status, registered_at, last_seen) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,'active',?,?)")
        .bind(out.reply.worker_id, req.launch_id, req.label, req.hostname, req.pid, req.version, req.protocol,
              req.backend, to_text(req.runners), to_text(req.tags), to_text(req.capacity), to_text(req.profiles),
              slurm, when, when)
        .run();
  }
  out.caps = WorkerCaps{req.runners, req.tags, req.profiles};
  reconcile(out.reply.worker_id, req.running, out.reply.cancel, out.renewed_leases);
  return out;
}

std::optional<Store::AttemptRow> Store::attempt_of(const std::string& lease_id) {
  auto q = query(
      "SELECT a.lease_id, a.job_id, a.attempt, a.worker_id, a.state, a.last_seq, j.state, j.current_lease, "
      "j.cancel_requested, j.attempts, j.max_attempts, j.runner, j.profile, j.required_tags "
      "FROM attempts a JOIN jobs j ON j.id=a.job_id WHERE a.lease_id=?");
  q.bind(lease_id);
  if (!q.step()) return std::nullopt;
  AttemptRow a;
  a.lease_id = q.text(0);
  a.job_id = q.text(1);
  a.attempt = q.i32(2);
  a.worker_id = q.text(3);
  a.state = attempt_state(q.text(4));
  a.last_seq = q.i64(5);
  a.job_state = job_state(q.text(6));
  a.current_lease = q.opt_text(7);
  a.cancel_requested = q.i32(8) != 0;
  a.attempts_made = q.i32(9);
  a.max_attempts = q.i32(10);
  a.runner = q.text(11);
  a.profile = q.opt_text(12);
  a.required_tags = q.text(13);
  return a;
}

void Store::reconcile(const std::string& worker_id, const std::vector<protocol::AttemptRef>& running,
                      std::vector<protocol::CancelOrder>& cancel, std::vector<std::string>& renewed) {
  for (const auto& ref : running) {
    auto a = attempt_of(ref.lease_id);
    bool current = a && a->job_id == ref.job_id && a->worker_id == worker_id && a->current_lease == ref.lease_id &&
                   a->state != AttemptState::lost;
    if (!current) {
      cancel.push_back({ref.job_id, ref.lease_id, protocol::CancelReason::lease_lost});
      continue;
    }
    if (!live(a->state)) continue;  // final: the worker still owes us nothing but the event ack
    renewed.push_back(ref.lease_id);
    if (a->cancel_requested) cancel.push_back({ref.job_id, ref.lease_id, protocol::CancelReason::user});
  }
}

ApiResult<PollOutcome> Store::poll(const std::string& worker_id, const protocol::PollRequest& req, WallTime now) {
  auto q = query("SELECT status, directive, runners, tags, profiles FROM workers WHERE id=?");
  q.bind(worker_id);
  if (!q.step() || q.text(0) == "gone") return unknown_worker(worker_id);
  PollOutcome out;
  if (auto d = q.opt_text(1)) out.reply.directive = protocol::parse_directive(*d);
  out.caps.runners = strings_from(q.text(2));
  out.caps.tags = string_map_from(q.text(3));
  out.caps.profiles = strings_from(q.text(4));
  // last_seen is kept to the second: a burst of polls (one per finished job) then commits nothing, so the
  // poll does not queue an fsync in front of the events that follow it.
  query("UPDATE workers SET status='active', last_seen=? WHERE id=? AND (status<>'active' OR last_seen<?)")
      .bind(protocol::format_time(now), worker_id, protocol::format_time(now - std::chrono::seconds(1)))
      .run();
  reconcile(worker_id, req.running, out.reply.cancel, out.renewed_leases);
  out.draining = req.draining || out.reply.directive.has_value();
  if (!out.draining) out.reply.jobs = dispatch(worker_id, out.caps, req.free, now);
  return out;
}

std::vector<protocol::JobAssignment> Store::dispatch(const std::string& worker_id, const WorkerCaps& caps,
                                                     const std::map<std::string, int>& free, WallTime now) {
  std::map<std::string, int> budget;
  json::array runners;
  for (const auto& [runner, n] : free)
    if (n > 0 && std::find(caps.runners.begin(), caps.runners.end(), runner) != caps.runners.end()) {
      budget[runner] = n;
      runners.emplace_back(runner);
    }
  std::vector<protocol::JobAssignment> out;
  if (budget.empty()) return out;
  struct Candidate {
    std::string id, runner, kind, spec;
    int attempts;
  };
  std::vector<Candidate> picked;
  {
    auto q = query(
        "SELECT id, runner, kind, profile, required_tags, spec, attempts FROM jobs "
        "WHERE state='queued' AND runner IN (SELECT value FROM json_each(?)) ORDER BY seq");
    q.bind(json::serialize(runners));
    while (q.step()) {
      auto tags = string_map_from(q.text(4));
      JobNeeds needs = needs_of(q.text(1), q.opt_text(3), tags);
      if (!can_take_now(caps, budget, needs)) continue;
      --budget[needs.runner];
      picked.push_back({q.text(0), q.text(1), q.text(2), q.text(5), q.i32(6)});
      bool exhausted = std::all_of(budget.begin(), budget.end(), [](const auto& kv) { return kv.second <= 0; });
      if (exhausted) break;
    }
  }
  std::string when = protocol::format_time(now);
  for (auto& c : picked) {
    protocol::JobAssignment a;
    a.job_id = c.id;
    a.attempt = c.attempts + 1;
    a.lease_id = "lse_" + protocol::new_ulid();
    a.runner = c.runner;
    a.kind = c.kind;
    a.spec = from_text<protocol::JobSpec>(c.spec);
    query("INSERT INTO attempts(lease_id, job_id, attempt, worker_id, state, assigned_at) VALUES(?,?,?,?,'assigned',?)")
        .bind(a.lease_id, a.job_id, a.attempt, worker_id, when)
        .run();
    query("UPDATE jobs SET state='running', attempts=?, current_lease=?, worker_id=?, updated_at=? WHERE id=?")
        .bind(a.attempt, a.lease_id, worker_id, when, a.job_id)
        .run();
    out.push_back(std::move(a));
  }
  return out;
}

ApiResult<void> Store::worker_exit(const std::string& worker_id, const protocol::ExitRequest& req, WallTime now) {
  auto q = query("UPDATE workers SET status='gone', exit_reason=?, exit_message=?, last_seen=? WHERE id=?");
  q.bind(protocol::to_string(req.exit_reason), req.message, protocol::format_time(now), worker_id).run();
  if (sqlite3_changes(db_) == 0) return unknown_worker(worker_id);
  return {};
}

ApiResult<protocol::WorkerInfo> Store::set_directive(const std::string& worker_id, protocol::Directive d) {
  query("UPDATE workers SET directive=CASE WHEN directive='kill' THEN 'kill' ELSE ? END WHERE id=?")
      .bind(protocol::to_string(d), worker_id)
      .run();
  auto w = worker(worker_id);
  if (!w) return unknown_worker(worker_id);
  return *w;
}

protocol::WorkerList Store::list_workers() {
  std::vector<std::string> ids;
  {
    auto q = query("SELECT id FROM workers ORDER BY registered_at, id");
    while (q.step()) ids.push_back(q.text(0));
  }
  protocol::WorkerList out;
  for (const auto& id : ids)
    if (auto w = worker(id)) out.workers.push_back(std::move(*w));
  return out;
}

bool Store::mark_stale(const std::string& worker_id) {
  query("UPDATE workers SET status='stale' WHERE id=? AND status='active'").bind(worker_id).run();
  return sqlite3_changes(db_) > 0;
}

// ---------------------------------------------------------------------------------------------------------
// Jobs

std::optional<protocol::JobInfo> Store::job(const std::string& job_id) {
  static const std::string sql = std::string("SELECT ") + kJobCols + " FROM jobs WHERE id=?";
  auto q = query(sql.c_str());
  q.bind(job_id);
  if (!q.step()) return std::nullopt;
  protocol::JobInfo j;
  j.id = q.text(0);
  j.state = job_state(q.text(1));
  j.runner = q.text(2);
  j.kind = q.text(3);
  j.spec = from_text<protocol::JobSpec>(q.text(4));
  j.required_tags = string_map_from(q.text(5));
  j.max_attempts = q.i32(6);
  j.attempt = q.i32(7);
  j.worker_id = q.opt_text(8);
  j.cancel_requested = q.i32(9) != 0;
  j.exit_code = q.opt_i32(10);
  j.signal = q.opt_i32(11);
  j.message = q.text(12);
  if (!q.null(13)) j.result = *protocol::parse_json(q.text(13));
  j.created_at = q.text(14);
  j.updated_at = q.text(15);
  j.finished_at = q.opt_text(16);
  return j;
}

SubmitOutcome Store::submit(const protocol::JobSubmission& sub, WallTime now) {
  std::string id = "job_" + protocol::new_ulid();
  std::string when = protocol::format_time(now);
  std::optional<std::string> profile;
  if (sub.kind == "training" && sub.spec.payload) profile = sub.spec.payload->profile;
  query(
      "INSERT INTO jobs(id, state, runner, kind, profile, spec, required_tags, max_attempts, created_at, updated_at) "
      "VALUES(?,'queued',?,?,?,?,?,?,?,?)")
      .bind(id, sub.runner, sub.kind, profile, to_text(sub.spec), to_text(sub.required_tags), sub.max_attempts,
            when, when)
      .run();
  return SubmitOutcome{*job(id), needs_of(sub.runner, profile, sub.required_tags)};
}

protocol::JobList Store::list_jobs(std::optional<protocol::JobState> state, int limit) {
  std::vector<std::string> ids;
  {
    auto q = query("SELECT id FROM jobs WHERE (?1 IS NULL OR state=?1) ORDER BY seq DESC LIMIT ?2");
    std::optional<std::string> s;
    if (state) s = std::string(protocol::to_string(*state));
    q.bind(s, limit);
    while (q.step()) ids.push_back(q.text(0));
  }
  protocol::JobList out;
  for (const auto& id : ids)
    if (auto j = job(id)) out.jobs.push_back(std::move(*j));
  return out;
}

ApiResult<protocol::JobInfo> Store::get_job(const std::string& job_id) {
  auto j = job(job_id);
  if (!j) return unknown_job(job_id);
  auto a = query(
      "SELECT attempt, lease_id, worker_id, state, exit_code, signal, message, slurm_job_id, assigned_at, "
      "finished_at FROM attempts WHERE job_id=? ORDER BY attempt");
  a.bind(job_id);
  while (a.step()) {
    protocol::AttemptInfo x;
    x.attempt = a.i32(0);
    x.lease_id = a.text(1);
    x.worker_id = a.text(2);
    x.state = attempt_state(a.text(3));
    x.exit_code = a.opt_i32(4);
    x.signal = a.opt_i32(5);
    x.message = a.text(6);
    x.slurm_job_id = a.opt_text(7);
    x.assigned_at = a.text(8);
    x.finished_at = a.opt_text(9);
    j->attempts.push_back(std::move(x));
  }
  auto e = query(
      "SELECT attempt, lease_id, seq, state, exit_code, signal, message, slurm_job_id, result, at, received_at "
      "FROM events WHERE job_id=? ORDER BY attempt, seq");
  e.bind(job_id);
  while (e.step()) {
    protocol::EventInfo x;
    x.attempt = e.i32(0);
    x.lease_id = e.text(1);
    x.seq = e.i64(2);
    x.state = protocol::parse_event_state(e.text(3)).value_or(EventState::running);
    x.exit_code = e.opt_i32(4);
    x.signal = e.opt_i32(5);
    x.message = e.text(6);
    x.slurm_job_id = e.opt_text(7);
    if (!e.null(8)) x.result = *protocol::parse_json(e.text(8));
    x.at = e.opt_text(9);
    x.received_at = e.text(10);
    j->events.push_back(std::move(x));
  }
  return *j;
}

ApiResult<CancelOutcome> Store::cancel_job(const std::string& job_id, WallTime now) {
  auto j = job(job_id);
  if (!j) return unknown_job(job_id);
  std::string when = protocol::format_time(now);
  CancelOutcome out;
  switch (j->state) {
    case JobState::queued:
      query("UPDATE jobs SET state='cancelled', cancel_requested=1, message='cancelled before it started', "
            "updated_at=?, finished_at=? WHERE id=?")
          .bind(when, when, job_id)
          .run();
      break;
    case JobState::running:
      query("UPDATE jobs SET state='cancelling', cancel_requested=1, updated_at=? WHERE id=?").bind(when, job_id).run();
      out.wake_worker = j->worker_id;
      break;
    case JobState::cancelling:
      out.wake_worker = j->worker_id;
      break;
    case JobState::cancelled:
      break;
    default:
      return conflict("jobFinished", "job '" + job_id + "' already " + std::string(protocol::to_string(j->state)));
  }
  out.job = *job(job_id);
  return out;
}

std::optional<JobNeeds> Store::lose_attempt(const AttemptRow& a, const std::string& message, WallTime now) {
  std::string when = protocol::format_time(now);
  query("UPDATE attempts SET state='lost', message=?, finished_at=? WHERE lease_id=?")
      .bind(message, when, a.lease_id)
      .run();
  JobState next = after_lost_attempt(a.attempts_made, a.max_attempts, a.cancel_requested);
  if (next == JobState::queued) {
    query("UPDATE jobs SET state='queued', current_lease=NULL, worker_id=NULL, updated_at=? WHERE id=?")
        .bind(when, a.job_id)
        .run();
    auto tags = string_map_from(a.required_tags);
    return needs_of(a.runner, a.profile, tags);
  }
  std::string why = next == JobState::cancelled ? "cancelled; its attempt was lost: " + message
                                                : "attempt " + std::to_string(a.attempt) + " lost (" + message +
                                                      "); no attempts left";
  query("UPDATE jobs SET state=?, message=?, updated_at=?, finished_at=? WHERE id=?")
      .bind(protocol::to_string(next), why, when, when, a.job_id)
      .run();
  return std::nullopt;
}

ApiResult<EventOutcome> Store::apply_event(const std::string& job_id, const protocol::EventRequest& ev, WallTime now) {
  auto exists = query("SELECT 1 FROM jobs WHERE id=?");
  exists.bind(job_id);
  if (!exists.step()) return unknown_job(job_id);
  auto a = attempt_of(ev.lease_id);
  if (!a || a->job_id != job_id)
    return lease_lost("lease '" + ev.lease_id + "' is not an attempt of job '" + job_id + "'");
  EventOutcome out;
  {
    auto dup = query("SELECT 1 FROM events WHERE lease_id=? AND seq=?");
    dup.bind(ev.lease_id, ev.seq);
    if (dup.step()) {
      out.reply.duplicate = true;
      out.reply.job_state = a->job_state;
      return out;
    }
  }
  if (a->state == AttemptState::lost || a->current_lease != ev.lease_id)
    return lease_lost("lease '" + ev.lease_id + "' of job '" + job_id + "' is no longer the job's live attempt");
  if (!live(a->state))
    return conflict("attemptFinished", "attempt " + std::to_string(a->attempt) + " of job '" + job_id +
                                           "' already reported its final state");
  std::string when = protocol::format_time(now);
  std::optional<std::string> result;
  if (ev.result) result = json::serialize(*ev.result);
  query("INSERT INTO events(lease_id, seq, job_id, attempt, state, exit_code, signal, message, slurm_job_id, result, "
        "at, received_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)")
      .bind(ev.lease_id, ev.seq, job_id, a->attempt, protocol::to_string(ev.state), ev.exit_code, ev.signal, ev.message,
            ev.slurm_job_id, result, ev.at, when)
      .run();
  out.reply.job_state = a->job_state;
  if (ev.seq <= a->last_seq) return out;  // an older event arriving late: recorded, state unchanged
  query("UPDATE attempts SET last_seq=?, slurm_job_id=COALESCE(?, slurm_job_id) WHERE lease_id=?")
      .bind(ev.seq, ev.slurm_job_id, ev.lease_id)
      .run();
  if (ev.state == EventState::lost) {
    out.requeued = lose_attempt(*a, ev.message.empty() ? "reported lost by the worker" : ev.message, now);
    out.attempt_ended = true;
    out.freed_slot = {a->worker_id, a->runner};
    out.reply.job_state = job(job_id)->state;
    return out;
  }
  JobState next = after_event(a->job_state, ev.state);
  out.reply.job_state = next;
  if (!protocol::is_final(ev.state)) {
    query("UPDATE attempts SET state=? WHERE lease_id=?").bind(protocol::to_string(attempt_state_of(ev.state)), ev.lease_id).run();
    query("UPDATE jobs SET state=?, updated_at=? WHERE id=?").bind(protocol::to_string(next), when, job_id).run();
    return out;
  }
  out.attempt_ended = true;
  out.freed_slot = {a->worker_id, a->runner};
  query("UPDATE attempts SET state=?, exit_code=?, signal=?, message=?, finished_at=? WHERE lease_id=?")
      .bind(protocol::to_string(attempt_state_of(ev.state)), ev.exit_code, ev.signal, ev.message, when, ev.lease_id)
      .run();
  query("UPDATE jobs SET state=?, exit_code=?, signal=?, message=?, result=?, updated_at=?, finished_at=? WHERE id=?")
      .bind(protocol::to_string(next), ev.exit_code, ev.signal, ev.message, result, when, when, job_id)
      .run();
  return out;
}

LeaseExpiry Store::expire_lease(const std::string& lease_id, const std::string& message, WallTime now) {
  LeaseExpiry out;
  auto a = attempt_of(lease_id);
  if (!a || !live(a->state) || a->current_lease != lease_id) return out;
  out.expired = true;
  out.worker_id = a->worker_id;
  out.requeued = lose_attempt(*a, message, now);
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Logs

ApiResult<std::uint64_t> Store::append_log(const std::string& job_id, std::string_view stream,
                                           const std::string& lease_id, std::uint64_t offset, std::string_view bytes) {
  auto exists = query("SELECT 1 FROM jobs WHERE id=?");
  exists.bind(job_id);
  if (!exists.step()) return unknown_job(job_id);
  auto a = attempt_of(lease_id);
  if (!a || a->job_id != job_id)
    return lease_lost("lease '" + lease_id + "' is not an attempt of job '" + job_id + "'");
  if (a->state == AttemptState::lost || a->current_lease != lease_id)
    return lease_lost("lease '" + lease_id + "' of job '" + job_id + "' is no longer the job's live attempt");
  std::uint64_t size = 0;
  {
    auto q = query("SELECT size FROM log_sizes WHERE job_id=? AND attempt=? AND stream=?");
    q.bind(job_id, a->attempt, stream);
    if (q.step()) size = static_cast<std::uint64_t>(q.i64(0));
  }
  if (offset > size) {
    ApiError e = conflict("logGap", "offset " + std::to_string(offset) + " is past the " + std::to_string(size) +
                                        " bytes stored for " + std::string(stream) + " of attempt " +
                                        std::to_string(a->attempt));
    e.expected_offset = size;
    return e;
  }
  std::uint64_t skip = size - offset;
  if (skip >= bytes.size()) return ApiResult<std::uint64_t>(boost::system::in_place_value, size);  // all stored already
  std::string_view tail = bytes.substr(static_cast<std::size_t>(skip));
  if (has_log_chunks(job_id, a->attempt, stream)) {  // begun by a version that kept logs in the database
    query("INSERT INTO log_chunks(job_id, attempt, stream, start, data) VALUES(?,?,?,?,?)")
        .bind(job_id, a->attempt, stream, size, Blob{tail})
        .run();
  } else {
    // Bytes past `size` in the file (written by an upload whose commit never happened) are overwritten.
    write_log_bytes(log_file(job_id, a->attempt, stream), size, tail);
  }
  std::uint64_t next = size + tail.size();
  query("INSERT INTO log_sizes(job_id, attempt, stream, size) VALUES(?,?,?,?) "
        "ON CONFLICT(job_id, attempt, stream) DO UPDATE SET size=excluded.size")
      .bind(job_id, a->attempt, stream, next)
      .run();
  return ApiResult<std::uint64_t>(boost::system::in_place_value, next);
}

ApiResult<LogChunk> Store::read_log(const std::string& job_id, std::string_view stream, std::uint64_t offset,
                                    std::optional<int> attempt, std::size_t max_bytes) {
  auto j = job(job_id);
  if (!j) return unknown_job(job_id);
  LogChunk out;
  out.attempt = attempt.value_or(j->attempt);
  out.complete = protocol::is_final(j->state);
  {
    auto q = query("SELECT size FROM log_sizes WHERE job_id=? AND attempt=? AND stream=?");
    q.bind(job_id, out.attempt, stream);
    if (q.step()) out.size = static_cast<std::uint64_t>(q.i64(0));
  }
  if (offset >= out.size) return out;
  std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(out.size - offset, max_bytes));
  if (!has_log_chunks(job_id, out.attempt, stream)) {
    out.data = read_log_bytes(log_file(job_id, out.attempt, stream), offset, want);
    return out;
  }
  auto q = query(
      "SELECT start, data FROM log_chunks WHERE job_id=?1 AND attempt=?2 AND stream=?3 AND start >= "
      "(SELECT COALESCE(MAX(start), 0) FROM log_chunks WHERE job_id=?1 AND attempt=?2 AND stream=?3 AND start <= ?4) "
      "ORDER BY start");
  q.bind(job_id, out.attempt, stream, offset);
  while (out.data.size() < want && q.step()) {
    auto start = static_cast<std::uint64_t>(q.i64(0));
    std::string data = q.blob(1);
    std::uint64_t from = offset > start ? offset - start : 0;
    if (from >= data.size()) continue;
    std::size_t n = std::min<std::size_t>(data.size() - static_cast<std::size_t>(from), want - out.data.size());
    out.data.append(data, static_cast<std::size_t>(from), n);
  }
  return out;
}

bool Store::has_log_chunks(const std::string& job_id, int attempt, std::string_view stream) {
  auto q = query("SELECT 1 FROM log_chunks WHERE job_id=? AND attempt=? AND stream=? LIMIT 1");
  q.bind(job_id, attempt, stream);
  return q.step();
}

std::filesystem::path Store::log_file(const std::string& job_id, int attempt, std::string_view stream) const {
  // Job ids are [0-9A-Za-z_-] (checked before any lookup) and streams stdout/stderr: a plain file name.
  return log_dir_ / (job_id + "-" + std::to_string(attempt) + "." + std::string(stream));
}

// ---------------------------------------------------------------------------------------------------------
// Restart and metrics

LiveState Store::live_state() {
  LiveState out;
  {
    auto q = query("SELECT id FROM workers WHERE status='active'");
    while (q.step()) out.active_workers.push_back(q.text(0));
  }
  auto q = query(
      "SELECT a.lease_id FROM attempts a JOIN jobs j ON j.id=a.job_id AND j.current_lease=a.lease_id "
      "WHERE a.state IN ('assigned','pending','running')");
  while (q.step()) out.live_leases.push_back(q.text(0));
  return out;
}

Counts Store::counts() {
  Counts out;
  for (auto s : {"active", "stale", "gone"}) out.workers_by_status[s] = 0;
  for (auto s : {"queued", "running", "cancelling", "succeeded", "failed", "cancelled", "lost"}) out.jobs_by_state[s] = 0;
  {
    auto q = query("SELECT status, COUNT(*) FROM workers GROUP BY status");
    while (q.step()) out.workers_by_status[q.text(0)] = q.i64(1);
  }
  auto q = query("SELECT state, COUNT(*) FROM jobs GROUP BY state");
  while (q.step()) out.jobs_by_state[q.text(0)] = q.i64(1);
  return out;
}

}  // namespace nymph::control
