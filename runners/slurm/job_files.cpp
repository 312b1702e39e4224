#include "runners/slurm/job_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace nymph::runners::slurm {

namespace fs = std::filesystem;

std::string read_chunk(const fs::path& path, std::uint64_t offset, std::size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string buf(max, '\0');
  ssize_t n;
  do n = ::pread(fd, buf.data(), max, static_cast<off_t>(offset));
  while (n < 0 && errno == EINTR);
  ::close(fd);
  buf.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return buf;
}

std::optional<int> read_status_file(const fs::path& path) {
  std::ifstream in(path);
  int v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

Result<void> write_file(const fs::path& path, const std::string& text, fs::perms perms) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return fail("cannot write " + path.string());
  std::error_code ec;
  fs::permissions(path, perms, ec);
  return {};
}

Result<void> make_fresh_dir(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create job directory " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  return {};
}

}  // namespace nymph::runners::slurm
