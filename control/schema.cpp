#include "control/schema.hpp"

#include <iterator>

namespace nymph::control {

namespace {

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
    // 2: token scopes, revocation and last use; each worker bound to the agent token that registered it and
    // holding a credential of its own (docs/protocol.md section 2).
    R"sql(
ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT '{}';
ALTER TABLE tokens ADD COLUMN revoked_at TEXT;
ALTER TABLE tokens ADD COLUMN last_used_at TEXT;
ALTER TABLE workers ADD COLUMN token_hash TEXT;
ALTER TABLE workers ADD COLUMN credential_hash TEXT;
CREATE UNIQUE INDEX workers_by_credential ON workers(credential_hash);
CREATE INDEX workers_by_token ON workers(token_hash);
)sql",
    // 3: the identity a worker registered with (a login-node manager's "<user>@<cluster>"): a registration
    // with an identity takes over the other workers of its agent token and identity (docs/protocol.md 8.1).
    R"sql(
ALTER TABLE workers ADD COLUMN identity TEXT;
CREATE INDEX workers_by_identity ON workers(token_hash, identity);
)sql",
    // 4: why a worker reported an attempt lost, and the attempts of a job that do not count against its
    // maxAttempts (refused overCapacity before they started).
    R"sql(
ALTER TABLE events ADD COLUMN reason TEXT;
ALTER TABLE jobs ADD COLUMN uncounted_attempts INTEGER NOT NULL DEFAULT 0;
)sql",
    // 5: a training job submitted without a runner: its runner reads 'auto' while it is queued and is chosen
    // per worker at dispatch (docs/protocol.md, "Runner choice").
    R"sql(
ALTER TABLE jobs ADD COLUMN runner_auto INTEGER NOT NULL DEFAULT 0;
)sql",
    // 6: the generation of a kept launch: each allocation of the chain is its own worker, so a worker is
    // (launch_id, generation), not launch_id alone. SQLite cannot drop a column's UNIQUE: the table is rebuilt.
    R"sql(
CREATE TABLE workers_v6(
  id TEXT PRIMARY KEY, launch_id TEXT NOT NULL, generation INTEGER NOT NULL DEFAULT 1, label TEXT NOT NULL,
  hostname TEXT NOT NULL, pid INTEGER NOT NULL, version TEXT NOT NULL, protocol INTEGER NOT NULL,
  backend TEXT NOT NULL, runners TEXT NOT NULL, tags TEXT NOT NULL, capacity TEXT NOT NULL, profiles TEXT NOT NULL,
  slurm TEXT, status TEXT NOT NULL, exit_reason TEXT, exit_message TEXT NOT NULL DEFAULT '', directive TEXT,
  registered_at TEXT NOT NULL, last_seen TEXT NOT NULL, token_hash TEXT, credential_hash TEXT, identity TEXT,
  UNIQUE(launch_id, generation));
INSERT INTO workers_v6(id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, capacity,
  profiles, slurm, status, exit_reason, exit_message, directive, registered_at, last_seen, token_hash,
  credential_hash, identity)
SELECT id, launch_id, label, hostname, pid, version, protocol, backend, runners, tags, capacity, profiles, slurm,
  status, exit_reason, exit_message, directive, registered_at, last_seen, token_hash, credential_hash, identity
FROM workers;
DROP TABLE workers;
ALTER TABLE workers_v6 RENAME TO workers;
CREATE UNIQUE INDEX workers_by_credential ON workers(credential_hash);
CREATE INDEX workers_by_token ON workers(token_hash);
CREATE INDEX workers_by_identity ON workers(token_hash, identity);
)sql",
    // 7: the leases an attempt-ending event with takeNext handed to its worker (a JSON array of lease ids), so a
    // repeat of that event can hand them again (docs/protocol.md 8.3).
    R"sql(
ALTER TABLE events ADD COLUMN leased TEXT;
)sql",
};

static_assert(std::size(kMigrations) == kSchemaVersion);

}  // namespace

std::span<const char* const> schema_migrations() { return kMigrations; }

}  // namespace nymph::control
