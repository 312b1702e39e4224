#pragma once
// The control plane's tables (workers, jobs, attempts, events, tokens, log sizes) as schema migrations.
#include <span>

namespace nymph::control {

// Schema version this code creates and understands (PRAGMA user_version).
inline constexpr int kSchemaVersion = 7;

// The migrations for sql::Connection::migrate: element i moves user_version i to i+1; there are
// kSchemaVersion of them.
std::span<const char* const> schema_migrations();

}  // namespace nymph::control
