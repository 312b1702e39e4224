#pragma once
// Job logs as files beside the database: `<db>.logs/<job>-<attempt>.<stream>`, each 0600 in a 0700
// directory. The store writes an upload here (pwrite, fdatasync, and a directory fsync for a new file or
// directory) *before* it commits the new size in the database: a committed size never counts bytes that are
// not on disk, and bytes past it (an upload whose commit never happened) are overwritten by the next write.
// Synchronous, for the DB thread only. I/O failures throw StorageError naming the file. A purge removes the
// files of the jobs it deletes.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace nymph::control {

class LogFiles {
 public:
  // Logs kept under `dir` (created 0700 by the first write; its parent must exist).
  explicit LogFiles(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // The file of `stream` of attempt `attempt` of `job_id`. Job ids are [0-9A-Za-z_-] and streams are
  // stdout/stderr (the caller checks both before any lookup), so this is a plain file name inside dir().
  std::filesystem::path path(const std::string& job_id, int attempt, std::string_view stream) const;

  // Writes `bytes` at `offset` of that file and makes them durable, together with a new file's directory
  // entry and a new directory's. Throws StorageError.
  void write(const std::string& job_id, int attempt, std::string_view stream, std::uint64_t offset,
             std::string_view bytes) const;

  // Reads up to `n` bytes at `offset` of that file (fewer only at its end). Throws StorageError, also when
  // the file does not exist.
  std::string read(const std::string& job_id, int attempt, std::string_view stream, std::uint64_t offset,
                   std::size_t n) const;

  // Removes that file; returns false when there was none. Throws StorageError when it cannot be removed.
  bool remove(const std::string& job_id, int attempt, std::string_view stream) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace nymph::control
