#include "platform/environment.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

extern char** environ;

namespace nymph::platform {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

Environment current_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

std::string search_path(const Environment& env) {
  if (auto it = env.find("PATH"); it != env.end()) return it->second;
  if (const char* own = std::getenv("PATH")) return own;
  return "/usr/bin:/bin";
}

std::optional<std::string> find_on_path(std::string_view name, std::string_view path_list) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string_view::npos) {
    std::string path(name);
    if (is_executable_file(path)) return path;
    return std::nullopt;
  }
  std::size_t begin = 0;
  while (begin <= path_list.size()) {
    std::size_t end = std::min(path_list.find(':', begin), path_list.size());
    std::string_view dir = path_list.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + std::string(name);
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return std::nullopt;
}

}  // namespace nymph::platform
