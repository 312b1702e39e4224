#pragma once
// Files the way nymph needs them: small files read without ever blocking on a FIFO or growing without bound,
// secrets only from private files, and writes that are either complete on disk or absent.
#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph {

// Caps on the files nymph reads: a token is one line and a configuration a few KiB, so these only bound what a
// wrong path (a log, a device, a huge file) can cost.
inline constexpr std::size_t kMaxTokenFileBytes = 64 * 1024;
inline constexpr std::size_t kMaxConfigFileBytes = 1024 * 1024;

// Reads a regular file of at most `max_bytes`. A FIFO, device or directory is refused at once (the file is
// opened non-blocking and checked with fstat: "config file /x: is not a regular file"), and so is a larger
// file ("token file /x: is larger than 64 KiB"). `what` names the file in errors.
Result<std::string> read_small_file(const std::filesystem::path& path, std::string_view what,
                                    std::size_t max_bytes = kMaxTokenFileBytes);

// read_small_file for a secret: also refuses a symlink, a file owned by another user and a file that group or
// others may access, saying how to fix it (chmod 600 ...).
Result<std::string> read_private_file(const std::filesystem::path& path, std::string_view what,
                                      std::size_t max_bytes = kMaxTokenFileBytes);

// How far write_file_atomically goes to make a write survive a crash.
enum class Sync {
  file_and_directory,  // fsync the file before the rename and the directory after it: durable once it returns
  none,                // still all or nothing for readers (rename), but may be lost in a crash (cheap)
};

// Replaces `path` with `content`: written to a temporary file beside it with `mode` (whatever the umask),
// synced as `sync` says, renamed over `path`. On failure `path` is unchanged and the temporary file is removed.
Result<void> write_file_atomically(const std::filesystem::path& path, std::string_view content, mode_t mode,
                                   Sync sync = Sync::file_and_directory);

// fsyncs directory `dir`, so entries created or renamed in it survive a crash.
Result<void> sync_directory(const std::filesystem::path& dir);

}  // namespace nymph
