#pragma once
// The manager identity and its lease (docs/config.md, [manager]).
//
// A manager is a `nymph run` outside a Slurm allocation. Its identity is "<unix user>@<cluster>"; its state
// directory holds the Slurm journal and job directories of every launch of that identity, and manager.json,
// the lease that keeps it to one manager at a time, also across login nodes sharing $HOME over NFS (no flock):
//
//   manager.json = {host, pid, pidStartTime, launchId, startedAt, heartbeatAt, heartbeatIntervalS}
//
// The rule (judge_lease, sans-io): a lease is HELD when
//   - it names this host, and that pid is alive with the same start time (/proc/<pid>/stat field 22), or
//   - it names another host and its heartbeat is younger than kStaleAfterIntervals x its interval;
// otherwise it is FREE (its holder is provably gone: a dead pid here, or a host silent for 3 intervals).
// A file that is not a lease is CORRUPT: never taken silently, the error says to remove it.
//
// File I/O (small, blocking: call it at start-up or from the daemon's io_context the way status.json is
// written): acquire by link(2) of a complete temporary file (atomic on NFS; st_nlink == 2 confirms an
// ambiguous reply), take a FREE lease over by rename(2) of a fresh temporary file then re-read it to confirm,
// heartbeat by temporary file + rename, release by unlinking it when it is still ours. `--replace` asks the
// holder to go (SIGTERM on this host; manager.replace, read at the holder's heartbeat, on another host) and
// waits until the lease is free.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace nymph::agent {

using WallTime = std::chrono::system_clock::time_point;

// manager.json, as written by its holder.
struct ManagerLease {
  std::string host;                        // short host name of the holder
  std::int64_t pid = 0;
  std::uint64_t pid_start_time = 0;        // /proc/<pid>/stat starttime (clock ticks since boot)
  std::string launch_id;
  WallTime started_at;
  WallTime heartbeat_at;
  std::chrono::milliseconds heartbeat_interval{10'000};
  friend bool operator==(const ManagerLease&, const ManagerLease&) = default;
};

inline constexpr const char* kLeaseFile = "manager.json";
inline constexpr const char* kReplaceFile = "manager.replace";
inline constexpr int kStaleAfterIntervals = 3;

// The lease as the JSON text of manager.json (one line, newline-terminated).
std::string lease_json(const ManagerLease& lease);

// Parses manager.json text. An Error says what is missing or wrong. Never throws.
Result<ManagerLease> parse_lease(std::string_view text);

// "host H pid P launch L" (for messages).
std::string describe_holder(const ManagerLease& lease);

enum class LeaseVerdict { free, held, corrupt };

struct LeaseDecision {
  LeaseVerdict verdict = LeaseVerdict::free;
  std::string reason;  // held: who and why ("host a pid 7 launch L, heartbeat 2 s ago"); free: why; corrupt: what
};

// The rule. `content` is manager.json parsed (or the parse error); `this_host` the short host name of the
// caller; `pid_alive` whether, on this host, content->pid is alive with content->pid_start_time (ignored for
// another host). Pure; never throws.
LeaseDecision judge_lease(const Result<ManagerLease>& content, std::string_view this_host, WallTime now,
                          bool pid_alive);

// /proc/<pid>/stat starttime of `pid`, or nullopt when it does not exist, has exited (a zombie) or cannot be read.
std::optional<std::uint64_t> process_start_time(pid_t pid);

// judge_lease on the file in `state_dir`: reads manager.json and looks at /proc. A missing file is free.
struct LeaseInspection {
  LeaseDecision decision;
  std::optional<ManagerLease> lease;  // the content, when it parsed
};
LeaseInspection inspect_lease(const std::filesystem::path& state_dir, std::string_view this_host, WallTime now);

// What a heartbeat found.
enum class HeartbeatOutcome {
  ok,                 // rewritten
  lost,               // manager.json is no longer ours (taken over while we looked dead): stop at once
  replace_requested,  // manager.replace asks us to hand over: drain and exit
};

// The lease this process holds, with its file I/O. Movable, not copyable; the destructor does not release
// (release() does, explicitly, at a clean exit).
class HeldLease {
 public:
  // Acquires the lease in `state_dir` (created 0700 with its parents when missing) for `mine` (host, pid,
  // pid_start_time, launch_id, interval; the times are set here). Errors: held by a live manager (the message
  // names host, pid and launch: "manager <identity> is already running: host H pid P launch L (...)"), a corrupt
  // manager.json (naming the file and saying to remove it), I/O failures. `identity` is for messages.
  static Result<HeldLease> acquire(const std::filesystem::path& state_dir, ManagerLease mine,
                                   const std::string& identity);

  HeldLease(HeldLease&&) noexcept = default;
  HeldLease& operator=(HeldLease&&) noexcept = default;

  // Rewrites manager.json with heartbeatAt = now when it is still ours, and looks for manager.replace (which
  // it removes). An Error for I/O failures (the caller logs it and tries again at the next interval).
  Result<HeartbeatOutcome> heartbeat(WallTime now);

  // Removes manager.json when it is still ours. Never throws.
  void release();

  const ManagerLease& lease() const { return mine_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  HeldLease(std::filesystem::path path, ManagerLease mine) : path_(std::move(path)), mine_(std::move(mine)) {}
  std::filesystem::path path_;
  ManagerLease mine_;
};

// `--replace`: makes the holder of the lease in `state_dir` go and waits (polling the file every 100 ms; it
// may be on NFS) until the lease is free, at most `timeout`. A holder on this host gets SIGTERM (only after
// its start time is checked again); a holder on another host finds manager.replace (naming `requester`) at
// its next heartbeat. Returns at once when the lease is free already. Errors: a corrupt manager.json, the
// holder still there after `timeout` (naming it), a failed kill or write. Blocks the calling thread.
Result<void> replace_holder(const std::filesystem::path& state_dir, std::string_view this_host,
                            const std::string& requester, std::chrono::milliseconds timeout);

// ---- identity --------------------------------------------------------------------------------------------

// The value of ClusterName in `scontrol show config` output (slurm::parse_cluster_name), or nullopt when absent or
// not a valid name (is_valid_cluster_name).
std::optional<std::string> parse_cluster_name(std::string_view text);

// True for 1-64 letters, digits, '_', '.', '-' starting with a letter or digit (a cluster name nymph accepts).
bool is_valid_cluster_name(std::string_view name);

// This machine's short host name (up to the first '.'), "" when unknown.
std::string short_host_name();

// The user name of the effective uid (passwd), else $USER, else the uid in decimal.
std::string current_user_name();

// The default manager state directory: $XDG_DATA_HOME/nymph/managers/<cluster> when XDG_DATA_HOME is an absolute
// path, else <home>/.local/share/nymph/managers/<cluster>. Reads the environment.
std::filesystem::path default_manager_state_dir(const std::filesystem::path& home, const std::string& cluster);

// The home directory ($HOME when absolute, else passwd), "" when unknown.
std::filesystem::path home_directory();

}  // namespace nymph::agent
