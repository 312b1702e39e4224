#pragma once
// The process table as the fault tests see it: which processes carry a marker in their argv, sampled on a
// thread while a fault plays out, so that "never two copies at once" is measured, not assumed.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace nymph::faults {

// The contents of /proc/<pid>/<name>, empty when the process is gone (read(2): a process exiting meanwhile
// makes the read fail, which must not throw).
inline std::string read_proc(int pid, const char* name) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name, out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// The copies among marked processes, given each one's parent pid: a process whose parent is also marked is part
// of its parent's copy (an ASan build's LeakSanitizer clones the process at exit), so only the others count.
inline std::set<int> copies_among(const std::map<int, int>& parent_of_marked) {
  std::set<int> copies;
  for (auto [pid, ppid] : parent_of_marked)
    if (!parent_of_marked.contains(ppid)) copies.insert(pid);
  return copies;
}

// The parent pid in a /proc/<pid>/stat line, and whether the process is a zombie; nullopt for an empty or
// malformed line (the process is gone).
struct ProcStat {
  int ppid = 0;
  bool zombie = false;
};
inline std::optional<ProcStat> parse_proc_stat(const std::string& line) {
  auto close = line.rfind(')');  // comm may hold spaces and parentheses: the state follows the last ')'
  if (close == std::string::npos || close + 4 > line.size()) return std::nullopt;
  return ProcStat{std::atoi(line.c_str() + close + 4), line[close + 2] == 'Z'};
}

// The live (not zombie) processes with `marker` as one whole argument, each with its parent pid; a shell or a
// CLI that only carries it inside a longer string, such as `submit --command "... marker"`, is not one. Each
// process's stat is read once: its parent pid comes from the same read as its state, so a LeakSanitizer clone
// that exits between two reads is still its parent's, not a copy of its own.
inline std::map<int, int> marked_processes(const std::string& marker) {
  std::map<int, int> parent_of_marked;
  DIR* proc = ::opendir("/proc");
  if (!proc) return parent_of_marked;
  const std::string whole = std::string(1, '\0') + marker + std::string(1, '\0');
  while (dirent* e = ::readdir(proc)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string text = read_proc(pid, "cmdline");
    if ((std::string(1, '\0') + text).find(whole) == std::string::npos) continue;  // cmdline ends each argument with NUL
    auto stat = parse_proc_stat(read_proc(pid, "stat"));
    if (!stat || stat->zombie) continue;
    parent_of_marked[pid] = stat->ppid;
  }
  ::closedir(proc);
  return parent_of_marked;
}

// Pids of the processes with `marker`, one per copy (marked_processes, counted by copies_among).
inline std::set<int> processes_with(const std::string& marker) { return copies_among(marked_processes(marker)); }

// Samples processes_with(marker) every 10 ms on its own thread until destroyed; keeps the largest count seen
// at one instant and every pid seen.
class CopySampler {
 public:
  explicit CopySampler(std::string marker) : marker_(std::move(marker)), thread_([this] { loop(); }) {}
  ~CopySampler() {
    stop_ = true;
    thread_.join();
  }
  int max_at_once() const { return max_.load(); }
  // The command lines of the processes seen when max_at_once() was reached (for the failure message).
  std::string worst() const {
    std::lock_guard lock(mutex_);
    return worst_;
  }
  int now() const { return static_cast<int>(processes_with(marker_).size()); }

 private:
  void loop() {
    while (!stop_) {
      auto pids = processes_with(marker_);
      int n = static_cast<int>(pids.size());
      if (n > max_.load()) {
        std::string text;
        for (int pid : pids) {
          std::string cmd = read_proc(pid, "cmdline");
          std::replace(cmd.begin(), cmd.end(), '\0', ' ');
          text += std::to_string(pid) + " (ppid line: " + read_proc(pid, "stat").substr(0, 60) + "): " + cmd + "\n";
        }
        std::lock_guard lock(mutex_);
        worst_ = text;
        max_ = n;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the sampling period, not a synchronisation
    }
  }
  std::string marker_;
  std::atomic<bool> stop_{false};
  std::atomic<int> max_{0};
  mutable std::mutex mutex_;
  std::string worst_;
  std::thread thread_;
};

// Waits until `done()` holds, checking every 50 ms, for at most `limit`. Returns whether it held.
template <class Done>
bool wait_until(Done done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace nymph::faults
