#pragma once
// StorageError: the storage under the control plane failed. An outage, not a bug: the service answers
// 503 `unavailable` and clients retry with backoff. Anything else thrown while a request is handled is a bug
// and answered 500 `internal` (control/service.hpp).
#include <stdexcept>

namespace nymph::control {

// Thrown by the SQL plumbing (control/sql.hpp) when SQLite reports busy/locked, an I/O error, a full disk, a
// read-only, unopenable or corrupt database, or no memory; and by the job-log files (control/log_files.hpp)
// when a file or its directory cannot be created, written, synced or read.
class StorageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace nymph::control
