// Corpus replay: the main of fuzz_replay_<name> in the normal (GCC) build. Feeds every regular file under each
// argument (a file or a directory, recursively, in sorted order) to LLVMFuzzerTestOneInput once, so the
// targets' property checks run in ctest without libFuzzer. Exits 0 after the last file (a failed check aborts),
// 2 when an argument does not exist or holds no file.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> files_under(const std::filesystem::path& p) {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::is_regular_file(p)) out.push_back(p);
  if (std::filesystem::is_directory(p)) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(p))
      if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    auto files = files_under(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "replay: %s: no such file or no file in that directory\n", argv[i]);
      return 2;
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::fprintf(stderr, "replay: %zu inputs, all properties held\n", replayed);
  return replayed > 0 ? 0 : 2;
}
