#pragma once
// TempDir: a fresh private directory under the system temp directory, removed with everything in it when
// the object goes away.
//
//   nymph::test::TempDir dir("nymph-sql");
//   auto db = dir.path() / "c.db";
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace nymph::test {

class TempDir {
 public:
  // Creates `<tmp>/<prefix>-XXXXXX` (mode 0700). Throws std::runtime_error when it cannot.
  explicit TempDir(const std::string& prefix = "nymph-test") {
    std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace nymph::test
