#include "control/database_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>

#include "common/text.hpp"
#include "control/storage_error.hpp"

namespace nymph::control {

namespace {

constexpr mode_t kPrivate = 0600;

[[noreturn]] void throw_io(const std::string& file, const std::string& what) {
  throw StorageError("database file " + file + ": " + what + ": " + errno_message(errno));
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Creates `file` 0600 (exclusive, so an existing file keeps its contents) unless it exists.
void create_private(const std::string& file) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivate);
  if (fd < 0 && errno != EEXIST) throw_io(file, "cannot create");
  if (fd >= 0) ::close(fd);
}

// chmods `file` to 0600 when group or others have any permission on it; returns what it did, if anything.
std::optional<std::string> tighten(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw_io(file, "cannot stat");
  }
  if ((st.st_mode & 077) == 0) return std::nullopt;
  if (::chmod(file.c_str(), kPrivate) != 0) throw_io(file, "cannot make it private (chmod 600)");
  return file + ": mode " + mode_text(st.st_mode) + " -> " + mode_text(kPrivate);
}

}  // namespace

std::vector<std::string> make_database_private(const std::string& path) {
  if (path.empty() || path == ":memory:") return {};
  create_private(path);
  std::vector<std::string> tightened;
  for (const std::string& file : {path, path + "-wal", path + "-shm"})
    if (auto line = tighten(file)) tightened.push_back(std::move(*line));
  return tightened;
}

}  // namespace nymph::control
