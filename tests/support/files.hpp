#pragma once
// File helpers shared by the tests.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace nymph::test {

// The whole content of `path`, byte for byte; empty when it cannot be opened.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace nymph::test
