#pragma once
// The control plane's database files are private whatever the umask: they hold job specs with their
// environment (secrets) and token hashes.
#include <string>
#include <vector>

namespace nymph::control {

// Before SQLite opens the database at `path`: creates it 0600 when it is missing (SQLite gives the -wal and
// -shm files it creates the database file's permissions), and chmods an existing database, -wal and -shm
// that group or others may access to 0600. Returns one line per file it tightened ("c.db: mode 0644 -> 0600"),
// for the caller's log. ":memory:" and "" are left to SQLite. Throws StorageError naming the file.
std::vector<std::string> make_database_private(const std::string& path);

}  // namespace nymph::control
