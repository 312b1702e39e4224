#include "common/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/text.hpp"

namespace nymph {

namespace fs = std::filesystem;

namespace {

// Closes a descriptor when the scope ends.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Error failure(std::string_view what, const fs::path& path, std::string_view why) {
  return fail(std::string(what) + " " + path.string() + ": " + std::string(why));
}

// "64 KiB", "1 MiB" or "1000 bytes": a limit as a person would write it.
std::string size_text(std::size_t bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0) return std::to_string(bytes / (1024 * 1024)) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

Error too_large(std::string_view what, const fs::path& path, std::size_t max_bytes) {
  return failure(what, path, "is larger than " + size_text(max_bytes));
}

Result<std::string> read_open_file(int fd, const fs::path& path, std::string_view what, std::size_t max_bytes) {
  std::string data;
  char buf[16 * 1024];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failure(what, path, errno_message(errno));
    if (n == 0) return data;
    if (data.size() + static_cast<std::size_t>(n) > max_bytes) return too_large(what, path, max_bytes);
    data.append(buf, static_cast<std::size_t>(n));
  }
}

Result<std::string> read_checked(const fs::path& path, std::string_view what, std::size_t max_bytes,
                                 bool private_only) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (private_only ? O_NOFOLLOW : 0))};
  if (f.fd < 0) {
    if (errno == ELOOP) return failure(what, path, "is a symbolic link; give the file itself");
    return failure(what, path, errno_message(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return failure(what, path, errno_message(errno));
  if (!S_ISREG(st.st_mode)) return failure(what, path, "is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return too_large(what, path, max_bytes);
  if (private_only && st.st_uid != ::geteuid())
    return failure(what, path,
                   "is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
                       std::to_string(::geteuid()) + ")");
  if (private_only && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return failure(what, path,
                   std::string("has mode ") + mode + "; it must not be accessible by group or others (chmod 600 " +
                       path.string() + ")");
  }
  int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  return read_open_file(f.fd, path, what, max_bytes);
}

Result<void> write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno_message(errno));
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

Result<std::string> read_small_file(const fs::path& path, std::string_view what, std::size_t max_bytes) {
  return read_checked(path, what, max_bytes, false);
}

Result<std::string> read_private_file(const fs::path& path, std::string_view what, std::size_t max_bytes) {
  return read_checked(path, what, max_bytes, true);
}

Result<void> sync_directory(const fs::path& dir) {
  Fd f{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (f.fd < 0) return failure("cannot open directory", dir, errno_message(errno));
  if (::fsync(f.fd) != 0) return failure("cannot sync directory", dir, errno_message(errno));
  return {};
}

Result<void> write_file_atomically(const fs::path& path, std::string_view content, mode_t mode, Sync sync) {
  std::string tmpl = path.string() + ".tmp.XXXXXX";
  Fd f{::mkostemp(tmpl.data(), O_CLOEXEC)};
  if (f.fd < 0) return failure("cannot create a file beside", path, errno_message(errno));
  auto abandon = [&](std::string why) -> Result<void> {
    ::unlink(tmpl.c_str());
    return failure("cannot write", path, why);
  };
  if (::fchmod(f.fd, mode) != 0) return abandon(errno_message(errno));
  if (auto w = write_all(f.fd, content); !w) return abandon(w.error().message);
  if (sync == Sync::file_and_directory && ::fsync(f.fd) != 0) return abandon(errno_message(errno));
  if (::rename(tmpl.c_str(), path.c_str()) != 0) return abandon(errno_message(errno));
  return sync == Sync::file_and_directory ? sync_directory(path.parent_path()) : Result<void>{};
}

}  // namespace nymph
