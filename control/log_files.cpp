#include "control/log_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.hpp"
#include "control/storage_error.hpp"

namespace nymph::control {

namespace {

[[noreturn]] void throw_io(const std::filesystem::path& file, const std::string& what) {
  throw StorageError("log file " + file.string() + ": " + what + ": " + std::strerror(errno));
}

// Closes `fd` keeping errno, then throws when `failed` names what went wrong before.
void close_or_throw(int fd, const char* failed, const std::filesystem::path& file) {
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (failed) throw_io(file, failed);
}

// fsyncs the directory `dir`, so that a new entry in it survives a crash.
void sync_directory_or_throw(const std::filesystem::path& dir) {
  if (auto r = sync_directory(dir); !r) throw StorageError("log files: " + r.error().message);
}

// Writes all of `bytes` at `offset` of `fd` and fdatasyncs it; returns what failed, or nullptr.
const char* write_durably(int fd, std::uint64_t offset, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "cannot write";
    bytes.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return ::fdatasync(fd) != 0 ? "cannot sync" : nullptr;
}

}  // namespace

std::filesystem::path LogFiles::path(const std::string& job_id, int attempt, std::string_view stream) const {
  return dir_ / (job_id + "-" + std::to_string(attempt) + "." + std::string(stream));
}

void LogFiles::write(const std::string& job_id, int attempt, std::string_view stream, std::uint64_t offset,
                     std::string_view bytes) const {
  auto file = path(job_id, attempt, stream);
  bool new_dir = ::mkdir(dir_.c_str(), 0700) == 0;
  if (!new_dir && errno != EEXIST) throw_io(dir_, "cannot create");
  bool new_file = ::access(file.c_str(), F_OK) != 0;
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw_io(file, "cannot open");
  close_or_throw(fd, write_durably(fd, offset, bytes), file);
  if (new_file) sync_directory_or_throw(dir_);
  if (new_dir) sync_directory_or_throw(dir_.has_parent_path() ? dir_.parent_path() : std::filesystem::path("."));
}

std::string LogFiles::read(const std::string& job_id, int attempt, std::string_view stream, std::uint64_t offset,
                           std::size_t n) const {
  auto file = path(job_id, attempt, stream);
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io(file, "cannot open");
  std::string out(n, '\0');
  std::size_t got = 0;
  const char* failed = nullptr;
  while (got < n && !failed) {
    ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) failed = "cannot read";
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  close_or_throw(fd, failed, file);
  out.resize(got);
  return out;
}

bool LogFiles::remove(const std::string& job_id, int attempt, std::string_view stream) const {
  auto file = path(job_id, attempt, stream);
  if (::unlink(file.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  throw_io(file, "cannot remove");
}

}  // namespace nymph::control
