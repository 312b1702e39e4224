#pragma once
// Helpers for tests that start real processes (platform and process-runner tests): /proc inspection, bounded
// polling, temporary directories, and a marker that shows whether a forked child ran this process's atexit
// handlers.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace nymph::test {

// The lines of `text`.
inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) result.push_back(line);
  return result;
}

// State letter and parent pid of process `pid` from /proc/<pid>/stat, or nullopt when it does not exist.
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
};
inline std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  if (!f || !std::getline(f, all)) return std::nullopt;
  auto close = all.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(all.substr(close + 1));
  ProcStat s;
  rest >> s.state >> s.ppid;
  return s;
}

// True when `pid` no longer runs (gone, or a zombie nobody has reaped yet).
inline bool process_dead(pid_t pid) {
  auto s = proc_stat(pid);
  return !s || s->state == 'Z' || s->state == 'X';
}

// Children of this test process that still exist (zombies included), or only the zombies.
inline std::vector<pid_t> children_of_this_process(bool zombies_only) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    auto s = proc_stat(pid);
    if (s && s->ppid == ::getpid() && (!zombies_only || s->state == 'Z')) found.push_back(pid);
  }
  if (d) ::closedir(d);
  return found;
}

// Zombie children of this test process.
inline std::vector<pid_t> zombie_children() { return children_of_this_process(true); }

// Children of this test process that still exist (zombies included).
inline std::vector<pid_t> child_processes() { return children_of_this_process(false); }

// Reads the pids written one per line to `file`.
inline std::vector<pid_t> read_pids(const std::filesystem::path& file) {
  std::vector<pid_t> pids;
  std::ifstream f(file);
  for (pid_t p; f >> p;) pids.push_back(p);
  return pids;
}

// Polls `done` every 10 ms for at most `limit` (a bounded wait for an external event such as a pid file,
// not a synchronisation sleep). Returns whether it became true.
inline boost::asio::awaitable<bool> poll_until(std::function<bool()> done,
                                               std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    timer.expires_after(std::chrono::milliseconds(10));
    co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }
  co_return true;
}

// Registers (once) an atexit handler that creates `marker` when it runs in any process other than this
// one: a forked child that failed to exec and called exit() instead of _exit() would create it.
inline void install_foreign_atexit_marker(const std::filesystem::path& marker) {
  static std::string path;
  static pid_t owner = 0;
  path = marker.string();
  if (owner == 0) {
    owner = ::getpid();
    std::atexit([] {
      if (::getpid() != owner) std::ofstream(path) << ::getpid() << "\n";
    });
  }
}

}  // namespace nymph::test
