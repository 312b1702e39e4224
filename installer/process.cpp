#include "installer/process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "platform/spawn.hpp"

namespace nymph::installer {

Result<platform::CommandResult> run_bounded(std::vector<std::string> argv, std::string input,
                                            std::chrono::milliseconds timeout) {
  const std::string program = argv.empty() ? std::string() : argv.front();
  platform::CommandOptions options;
  options.input = std::move(input);
  auto r = platform::run_command_blocking(std::move(argv), platform::current_environment(), timeout, std::move(options));
  return platform::timeout_as_error(std::move(r), program, timeout);
}

Result<pid_t> spawn_detached(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                             const std::filesystem::path& log) {
  auto cannot = [&](const std::string& why) { return fail("cannot start " + argv[0] + ": " + why); };
  platform::Fd in = platform::above_stdio(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!in) return cannot(std::string("/dev/null: ") + std::strerror(errno));
  platform::Fd out =
      platform::above_stdio(::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return cannot(log.string() + ": " + std::strerror(errno));
  platform::SpawnSetup setup;
  if (int rc = setup.prepare(in.get(), out.get(), out.get(), cwd.c_str(), platform::Grouping::session))
    return cannot(std::strerror(rc));
  pid_t pid = 0;
  if (int rc = platform::spawn(pid, argv[0], setup, argv, std::nullopt)) return cannot(std::strerror(rc));
  return pid;
}

std::optional<std::vector<std::string>> read_cmdline(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string raw = buf.str();
  if (raw.empty()) return std::nullopt;  // a zombie or a kernel thread
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < raw.size()) {
    auto end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    out.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool runs_command(pid_t pid, const std::vector<std::string>& argv) {
  if (pid <= 1 || argv.empty()) return false;
  auto cmd = read_cmdline(pid);
  return cmd && *cmd == argv;
}

std::string tail_file(const std::filesystem::path& path, int max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<long long>(in.tellg());
  in.seekg(std::max(0LL, size - 65536));
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t pos = text.size();
  for (int i = 0; i < max_lines && pos != std::string::npos && pos > 0; ++i) pos = text.rfind('\n', pos - 1);
  if (pos != std::string::npos && pos < text.size()) text.erase(0, pos + 1);
  return text.empty() ? text : text + "\n";
}

}  // namespace nymph::installer
