#include "agent/manager_lease.hpp"

#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "common/files.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "slurm/parse.hpp"

namespace nymph::agent {

namespace fs = std::filesystem;
namespace json = boost::json;
using std::chrono::milliseconds;

namespace {

std::string errno_text(int err) { return errno_message(err); }

std::string age_text(WallTime now, WallTime then) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - then).count();
  return std::to_string(s) + " s ago";
}

bool same_holder(const ManagerLease& a, const ManagerLease& b) {
  return a.host == b.host && a.pid == b.pid && a.pid_start_time == b.pid_start_time && a.launch_id == b.launch_id;
}

// Writes `content` to a new file `path` (O_EXCL, 0600) and fsyncs it.
Result<void> write_new(const fs::path& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create " + path.string() + ": " + errno_text(errno));
  int err = 0;
  for (std::size_t done = 0; err == 0 && done < content.size();) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  if (err != 0) {
    ::unlink(path.c_str());
    return fail("cannot write " + path.string() + ": " + errno_text(err));
  }
  return {};
}

// A temporary file name beside manager.json that no other contender uses.
fs::path temp_path(const fs::path& dir, const ManagerLease& mine) {
  static int counter = 0;
  return dir / (".manager.json." + mine.host + "." + std::to_string(mine.pid) + "." + std::to_string(++counter) +
                ".tmp");
}

// Reads manager.json: nullopt when missing, else its text or an Error.
std::optional<Result<std::string>> read_lease_text(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  return read_small_file(path, "manager lease file", 64 * 1024);
}

Result<void> ensure_private_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return {};
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create the manager state directory " + dir.string() + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return {};
}

}  // namespace

std::string lease_json(const ManagerLease& l) {
  json::object o;
  o["host"] = l.host;
  o["pid"] = l.pid;
  o["pidStartTime"] = l.pid_start_time;
  o["launchId"] = l.launch_id;
  o["startedAt"] = format_time(l.started_at);
  o["heartbeatAt"] = format_time(l.heartbeat_at);
  o["heartbeatIntervalS"] = static_cast<double>(l.heartbeat_interval.count()) / 1000.0;
  return json::serialize(o) + "\n";
}

Result<ManagerLease> parse_lease(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return fail("not a JSON object");
  const auto& o = v.as_object();
  ManagerLease l;
  auto str = [&](const char* key, std::string& out) -> Result<void> {
    auto* f = o.if_contains(key);
    if (!f || !f->is_string()) return fail(std::string("\"") + key + "\" is missing or not a string");
    out = std::string(f->as_string());
    return {};
  };
  auto time = [&](const char* key, WallTime& out) -> Result<void> {
    std::string s;
    if (auto r = str(key, s); !r) return r;
    auto t = parse_time(s);
    if (!t) return fail(std::string("\"") + key + "\": " + t.error().message);
    out = *t;
    return {};
  };
  if (auto r = str("host", l.host); !r) return r.error();
  if (l.host.empty()) return fail("\"host\" is empty");
  if (auto r = str("launchId", l.launch_id); !r) return r.error();
  if (auto r = time("startedAt", l.started_at); !r) return r.error();
  if (auto r = time("heartbeatAt", l.heartbeat_at); !r) return r.error();
  auto* pid = o.if_contains("pid");
  if (!pid || !pid->is_int64() || pid->as_int64() <= 0) return fail("\"pid\" is missing or not a positive integer");
  l.pid = pid->as_int64();
  auto* start = o.if_contains("pidStartTime");
  if (!start || !(start->is_int64() || start->is_uint64())) return fail("\"pidStartTime\" is missing or not an integer");
  l.pid_start_time = start->is_uint64() ? start->as_uint64() : static_cast<std::uint64_t>(start->as_int64());
  auto* interval = o.if_contains("heartbeatIntervalS");
  if (!interval || !interval->is_number()) return fail("\"heartbeatIntervalS\" is missing or not a number");
  double s = interval->to_number<double>();
  if (!(s > 0 && s <= 86400)) return fail("\"heartbeatIntervalS\" must be between 0 and 86400");
  l.heartbeat_interval = milliseconds(static_cast<std::int64_t>(std::llround(s * 1000)));
  return l;
}

std::string describe_holder(const ManagerLease& l) {
  return "host " + l.host + " pid " + std::to_string(l.pid) + " launch " + (l.launch_id.empty() ? "-" : l.launch_id);
}

LeaseDecision judge_lease(const Result<ManagerLease>& content, std::string_view this_host, WallTime now,
                          bool pid_alive) {
  if (!content) return {LeaseVerdict::corrupt, content.error().message};
  const ManagerLease& l = *content;
  if (l.host == this_host) {
    if (pid_alive) return {LeaseVerdict::held, describe_holder(l) + ", alive on this host"};
    return {LeaseVerdict::free, describe_holder(l) + " is no longer running on this host"};
  }
  auto stale_after = l.heartbeat_interval * kStaleAfterIntervals;
  if (now - l.heartbeat_at < stale_after)
    return {LeaseVerdict::held, describe_holder(l) + ", heartbeat " + age_text(now, l.heartbeat_at)};
  return {LeaseVerdict::free, describe_holder(l) + " is silent: last heartbeat " + age_text(now, l.heartbeat_at) +
                                  " (more than " + std::to_string(kStaleAfterIntervals) + " intervals)"};
}

std::optional<std::uint64_t> process_start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may contain spaces: count fields after the last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
    if (i == 3 && (field == "Z" || field == "X")) return std::nullopt;  // exited, not yet reaped
    if (i == 22) {
      try {
        return std::stoull(field);
      } catch (...) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

namespace {
bool holder_alive(const ManagerLease& l, std::string_view this_host) {
  if (l.host != this_host) return false;
  auto start = process_start_time(static_cast<pid_t>(l.pid));
  return start && *start == l.pid_start_time;
}

LeaseInspection inspect_text(const std::optional<Result<std::string>>& text, const fs::path& path,
                             std::string_view this_host, WallTime now) {
  if (!text) return {{LeaseVerdict::free, "no manager.json"}, std::nullopt};
  if (!*text) return {{LeaseVerdict::corrupt, text->error().message}, std::nullopt};
  auto parsed = parse_lease(**text);
  if (!parsed) parsed = fail(path.string() + " is not a manager lease (" + parsed.error().message + ")");
  LeaseInspection out;
  out.decision = judge_lease(parsed, this_host, now, parsed && holder_alive(*parsed, this_host));
  if (parsed) out.lease = *parsed;
  return out;
}
}  // namespace

LeaseInspection inspect_lease(const fs::path& state_dir, std::string_view this_host, WallTime now) {
  auto path = state_dir / kLeaseFile;
  return inspect_text(read_lease_text(path), path, this_host, now);
}

Result<HeldLease> HeldLease::acquire(const fs::path& state_dir, ManagerLease mine, const std::string& identity) {
  if (auto r = ensure_private_dir(state_dir); !r) return r.error();
  const fs::path path = state_dir / kLeaseFile;
  mine.started_at = mine.heartbeat_at = std::chrono::system_clock::now();
  const std::string text = lease_json(mine);
  // A stale manager.replace was meant for a predecessor that is gone now.
  auto remove_stale_replace = [&] { ::unlink((state_dir / kReplaceFile).c_str()); };
  for (int round = 0; round < 3; ++round) {
    fs::path tmp = temp_path(state_dir, mine);
    if (auto w = write_new(tmp, text); !w) return w.error();
    struct TmpGuard {
      fs::path p;
      ~TmpGuard() { ::unlink(p.c_str()); }
    } guard{tmp};
    if (::link(tmp.c_str(), path.c_str()) == 0) {
      remove_stale_replace();
      return HeldLease(path, mine);
    }
    int err = errno;
    struct stat st {};
    // NFS may report a failure for a link that was made (a retransmitted request): the link count says.
    if (err != EEXIST && ::stat(tmp.c_str(), &st) == 0 && st.st_nlink == 2) {
      remove_stale_replace();
      return HeldLease(path, mine);
    }
    if (err != EEXIST) return fail("cannot create " + path.string() + ": " + errno_text(err));
    auto found = inspect_text(read_lease_text(path), path, mine.host, std::chrono::system_clock::now());
    switch (found.decision.verdict) {
      case LeaseVerdict::held:
        return fail("manager " + identity + " is already running: " + found.decision.reason + " (lease " +
                    path.string() + "); stop it, or take over with --replace");
      case LeaseVerdict::corrupt:
        return fail("the manager lease " + path.string() + " is unreadable: " + found.decision.reason +
                    "; if no manager of " + identity + " runs, remove it");
      case LeaseVerdict::free:
        break;
    }
    if (!found.lease) continue;  // removed in the meantime: link again
    // Provably gone: replace it atomically, then check no other contender's rename came after ours.
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      return fail("cannot take over " + path.string() + ": " + errno_text(errno));
    auto now_text = read_lease_text(path);
    if (now_text && *now_text && **now_text == text) {
      remove_stale_replace();
      return HeldLease(path, mine);
    }
  }
  return fail("cannot acquire the manager lease " + path.string() + ": other managers of " + identity +
              " are starting at the same time");
}

Result<HeartbeatOutcome> HeldLease::heartbeat(WallTime now) {
  auto text = read_lease_text(path_);
  if (!text) return HeartbeatOutcome::lost;
  if (!*text) return fail(text->error().message);
  auto current = parse_lease(**text);
  if (!current || !same_holder(*current, mine_)) return HeartbeatOutcome::lost;
  auto replace = path_.parent_path() / kReplaceFile;
  struct stat st {};
  if (::lstat(replace.c_str(), &st) == 0) {
    ::unlink(replace.c_str());
    return HeartbeatOutcome::replace_requested;
  }
  ManagerLease next = mine_;
  next.heartbeat_at = now;
  if (auto w = write_file_atomically(path_, lease_json(next), 0600, Sync::none); !w) return w.error();
  mine_ = next;
  return HeartbeatOutcome::ok;
}

void HeldLease::release() {
  auto text = read_lease_text(path_);
  if (!text || !*text) return;
  auto current = parse_lease(**text);
  if (current && same_holder(*current, mine_)) ::unlink(path_.c_str());
}

Result<void> replace_holder(const fs::path& state_dir, std::string_view this_host, const std::string& requester,
                            milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + timeout;
  bool asked = false;
  std::string holder;
  for (;;) {
    auto found = inspect_lease(state_dir, this_host, std::chrono::system_clock::now());
    if (found.decision.verdict == LeaseVerdict::free) return {};
    if (found.decision.verdict == LeaseVerdict::corrupt)
      return fail("the manager lease " + (state_dir / kLeaseFile).string() + " is unreadable: " +
                  found.decision.reason + "; if no manager runs, remove it");
    holder = describe_holder(*found.lease);
    if (!asked) {
      if (found.lease->host == this_host) {
        // inspect_lease checked the start time a moment ago: this pid is still the holder.
        if (::kill(static_cast<pid_t>(found.lease->pid), SIGTERM) != 0 && errno != ESRCH)
          return fail("cannot stop the manager (" + holder + "): " + errno_text(errno));
      } else {
        json::object o{{"replaceRequestedBy", requester}, {"at", format_time(std::chrono::system_clock::now())}};
        if (auto w = write_file_atomically(state_dir / kReplaceFile, json::serialize(o) + "\n", 0600); !w)
          return w.error();
      }
      asked = true;
    }
    if (Clock::now() >= deadline)
      return fail("the manager (" + holder + ") did not hand over within " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) + " s");
    std::this_thread::sleep_for(milliseconds(100));
  }
}

std::optional<std::string> parse_cluster_name(std::string_view text) {
  std::string value = slurm::parse_cluster_name(text);
  if (is_valid_cluster_name(value)) return value;
  return std::nullopt;
}

bool is_valid_cluster_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front())) return false;
  for (char c : name)
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

std::string short_host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

std::string current_user_name() {
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_name && pw->pw_name[0]) return pw->pw_name;
  if (const char* u = std::getenv("USER"); u && u[0]) return u;
  return std::to_string(::geteuid());
}

fs::path home_directory() {
  if (const char* h = std::getenv("HOME"); h && h[0] == '/') return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && pw->pw_dir[0] == '/') return pw->pw_dir;
  return {};
}

fs::path default_manager_state_dir(const fs::path& home, const std::string& cluster) {
  fs::path data = home / ".local" / "share";
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && x[0] == '/') data = x;
  return data / "nymph" / "managers" / cluster;
}

}  // namespace nymph::agent
