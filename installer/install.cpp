#include "installer/install.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <boost/json.hpp>

#include "agent/manager_lease.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "installer/launch_record.hpp"
#include "installer/process.hpp"
#include "runners/profile.hpp"
#include "agent/chain_record.hpp"
#include "slurm/commands.hpp"
#include "slurm/parse.hpp"

namespace nymph::installer {

const char* const kSlurmWarning =
    "nothing renews this allocation: when its walltime ends the daemon stops. For a long-lived agent, install "
    "on a login node (without --slurm), which is the recommended placement.";

const char* const kKeptWarning =
    "a kept launch: each allocation submits the next one from inside it (the compute nodes must be able to run "
    "sbatch; `nymph launches` shows the chain and, when a submission keeps failing, why it paused).";

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

std::string errno_text(const std::string& what, const fs::path& path, int err) {
  return what + " " + path.string() + ": " + errno_message(err);
}

// Creates `dir` and missing parents with mode 0700 (existing directories are left as they are).
Result<void> ensure_dir(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return fail(dir.string() + " exists and is not a directory");
  }
  if (dir.has_parent_path() && dir.parent_path() != dir)
    if (auto r = ensure_dir(dir.parent_path()); !r) return r;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fail(errno_text("cannot create", dir, errno));
  return {};
}

// Creates `path` (which must not exist) with mode 0600 and `content`, flushed to disk.
Result<void> write_new_file(const fs::path& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail(errno_text("cannot create", path, errno));
  int err = ::fchmod(fd, 0600) == 0 ? 0 : errno;
  for (std::size_t done = 0; err == 0 && done < content.size();) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  if (err != 0) return fail(errno_text("cannot write", path, err));
  return {};
}

std::int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

LaunchRecord record_for(const InstallPlan& plan, const HostFacts& host) {
  LaunchRecord r;
  r.launch_id = plan.launch_id;
  r.worker_label = plan.worker_label;
  r.mode = plan.mode == LaunchMode::slurm ? "slurm" : "local";
  r.host = host.hostname;
  r.server = plan.server;
  r.config_path = plan.config_path;
  r.log_path = plan.log_path;
  r.command = plan.daemon_argv;
  r.created_at_ms = now_unix_ms();
  r.keep = plan.keep;
  return r;
}

// Writes config.toml, token and launch.json into a fresh temporary directory next to the launch directory and
// renames it into place, so the launch directory appears complete or not at all.
Result<void> write_launch_dir(const InstallPlan& plan, const std::string& token, const LaunchRecord& record) {
  auto launches = plan.launch_dir.parent_path();
  if (auto r = ensure_dir(launches); !r) return r;
  if (fs::path(plan.log_path).has_parent_path())
    if (auto r = ensure_dir(plan.log_path.parent_path()); !r) return r;
  std::string tmpl = (launches / (".tmp-" + plan.launch_id + "-XXXXXX")).native();
  if (!::mkdtemp(tmpl.data())) return fail(errno_text("cannot create a directory in", launches, errno));
  fs::path tmp = tmpl;
  auto result = [&]() -> Result<void> {
    if (::chmod(tmp.c_str(), 0700) != 0) return fail(errno_text("cannot chmod", tmp, errno));
    if (auto r = write_new_file(tmp / kConfigFile, plan.config_toml); !r) return r;
    if (auto r = write_new_file(tmp / kTokenFile, token); !r) return r;
    if (auto r = write_launch_record(tmp, record); !r) return r;
    if (plan.keep) {  // the script every generation is submitted from, and the chain's record
      if (auto r = write_new_file(tmp / agent::kChainScript, plan.sbatch_script); !r) return r;
      if (auto r = agent::update_chain_record(tmp, [](agent::ChainRecord& c) { c.at(1); }); !r) return r.error();
    }
    std::error_code ec;
    if (fs::exists(plan.launch_dir, ec)) return fail(plan.launch_dir.string() + " already exists");
    if (::rename(tmp.c_str(), plan.launch_dir.c_str()) != 0)
      return fail(errno_text("cannot rename " + tmp.string() + " to", plan.launch_dir, errno));
    if (auto synced = sync_directory(launches); !synced) return synced.error();
    return {};
  }();
  if (!result) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  return result;
}

// Removes a launch that never ran (sbatch refused it): its directory and its (empty) log.
void remove_launch(const InstallPlan& plan) {
  std::error_code ec;
  fs::remove_all(plan.launch_dir, ec);
  fs::remove(plan.log_path, ec);
}

// Blocks SIGCHLD for the lifetime of the object and reads it from a signalfd, so a child's exit can be awaited
// with poll() together with other descriptors.
class ChildSignals {
 public:
  ChildSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &set, &old_);
    fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~ChildSignals() {
    if (fd_ >= 0) ::close(fd_);
    ::sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  ChildSignals(const ChildSignals&) = delete;
  ChildSignals& operator=(const ChildSignals&) = delete;
  int fd() const { return fd_; }
  void drain() const {
    signalfd_siginfo info;
    while (fd_ >= 0 && ::read(fd_, &info, sizeof info) > 0) {
    }
  }

 private:
  sigset_t old_{};
  int fd_ = -1;
};

// Reaps `pid` if it has exited: its wait status (-1 when it was already reaped), else nullopt. Once this returned
// a value the pid may be reused by another process and must never be signalled again.
std::optional<int> try_reap(pid_t pid) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return status;
  if (r < 0 && errno == ECHILD) return -1;
  return std::nullopt;
}

std::string describe_wait_status(int status) {
  if (status == -1) return "exited";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + ::strsignal(WTERMSIG(status));
  return "stopped";
}

// Waits until `pid` is up: alive and status.json in `dir` names it, or until it exits or the deadline passes.
// Wakes on changes in the directory (inotify) and on SIGCHLD (signalfd); the 250 ms cap only covers a missing
// inotify/signalfd.
Result<void> wait_until_up(pid_t pid, const fs::path& dir, std::chrono::milliseconds timeout,
                           const ChildSignals& child) {
  auto deadline = Clock::now() + timeout;
  int ino = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (ino >= 0) ::inotify_add_watch(ino, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE);
  auto result = [&]() -> Result<void> {
    while (true) {
      if (auto status = try_reap(pid)) return fail("the daemon " + describe_wait_status(*status) + " before it was up");
      if (auto s = read_status(dir); s && s->pid == pid) {
        if (s->state != "exited") return {};
        return fail("the daemon exited at once (exitReason " + s->exit_reason.value_or("none") + ")" +
                    (s->message.empty() ? "" : ": " + s->message));
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0)
        return fail("the daemon did not write " + (dir / kStatusFile).string() + " within " +
                    std::to_string(timeout.count() / 1000) + " s");
      pollfd fds[2] = {{ino, POLLIN, 0}, {child.fd(), POLLIN, 0}};
      ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 250)));
      char buf[4096];
      while (ino >= 0 && ::read(ino, buf, sizeof buf) > 0) {
      }
      child.drain();
    }
  }();
  if (ino >= 0) ::close(ino);
  return result;
}

// Waits for `pid` (a child) to exit, for at most `timeout`. True when it was reaped.
bool wait_exit(pid_t pid, std::chrono::milliseconds timeout, const ChildSignals& child) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (try_reap(pid)) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fd{child.fd(), POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(std::min<long long>(left, 250)));
    child.drain();
  }
}

// Stops a daemon that did not come up: SIGTERM to its process group, 5 s, then SIGKILL; always reaps it.
void stop_daemon(pid_t pid, const ChildSignals& child) {
  if (try_reap(pid)) return;
  ::kill(-pid, SIGTERM);
  if (wait_exit(pid, std::chrono::seconds(5), child)) return;
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

Result<pid_t> start_local(const InstallPlan& plan, LaunchRecord& record, const InstallContext& ctx) {
  ChildSignals child;
  auto pid = spawn_detached(plan.daemon_argv, plan.launch_dir, plan.log_path);
  if (!pid) {
    record.start_error = pid.error().message;
    (void)write_launch_record(plan.launch_dir, record);
    return pid.error();
  }
  record.pid = *pid;
  if (auto r = write_launch_record(plan.launch_dir, record); !r) {
    stop_daemon(*pid, child);
    return r.error();
  }
  auto up = wait_until_up(*pid, plan.launch_dir, ctx.start_timeout, child);
  if (up) return *pid;
  stop_daemon(*pid, child);
  record.start_error = up.error().message;
  (void)write_launch_record(plan.launch_dir, record);
  std::string tail = tail_file(plan.log_path, 20);
  return fail(up.error().message + "; nothing is running. Last lines of " + plan.log_path.string() + ":\n" +
              (tail.empty() ? "(empty)\n" : tail) + "The launch directory " + plan.launch_dir.string() +
              " is kept for inspection; `nymph launches prune` removes it.");
}

// Runs sbatch with the script on standard input (a kept launch: its chain.sbatch with generation 1) and returns
// the job id it printed.
Result<std::string> sbatch(const InstallPlan& plan, const InstallContext& ctx) {
  auto argv = slurm::sbatch_stdin_argv(ctx.sbatch);
  if (plan.keep) argv.insert(argv.end(), {plan.chain_script.native(), "1"});
  auto r = run_bounded(argv, plan.keep ? std::string() : plan.sbatch_script, ctx.sbatch_timeout);
  if (!r) return fail("sbatch: " + r.error().message);
  if (r->exit_code != 0) return fail("sbatch failed (exit " + std::to_string(r->exit_code) + "): " + r->err);
  return slurm::parse_sbatch_output(r->out);
}

Result<std::string> submit_slurm(const InstallPlan& plan, LaunchRecord& record, const InstallContext& ctx) {
  auto id = sbatch(plan, ctx);
  if (!id) {
    remove_launch(plan);
    const auto& m = id.error().message;
    return fail(m + (m.ends_with("\n") ? "" : "\n") + "nothing was submitted and the launch was removed");
  }
  record.slurm_job_id = *id;
  if (auto w = write_launch_record(plan.launch_dir, record); !w)
    return fail("submitted Slurm job " + *id + " but " + w.error().message);
  if (plan.keep) {
    auto submitted = now_unix_ms();
    auto c = agent::update_chain_record(plan.launch_dir, [&](agent::ChainRecord& chain) {
      auto& g = chain.at(1);
      g.slurm_job_id = *id;
      g.submitted_at_ms = submitted;
      g.submitted_by = "install";
    });
    if (!c) return fail("submitted Slurm job " + *id + " but " + c.error().message);
  }
  return id;
}

// Creates the log file (0600) up front, so it exists with private permissions whoever appends to it.
Result<void> create_log(const fs::path& log) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail(errno_text("cannot create the log file", log, errno));
  ::close(fd);
  return {};
}

std::string squeue_line(const InstallPlan& plan) { return slurm::squeue_by_name_hint(plan.job_name); }

std::string tail_line(const InstallPlan& plan) { return "tail -f " + shell_quote(plan.log_path.native()); }

// Each --training-profile script must be acceptable to `nymph run` (runners::check_profiles), so an install
// never starts a daemon that would refuse to start.
Result<void> check_profile_scripts(const InstallPlan& plan) {
  std::vector<runners::Profile> profiles;
  for (const auto& [name, script] : plan.profiles) profiles.push_back({.name = name, .script = script});
  if (auto r = runners::check_profiles(runners::ProfileCatalog(std::move(profiles))); !r)
    return fail("--training-profile: " + r.error().message);
  return {};
}

// --launch-dir must be a directory this user can create job directories in: an existing directory that is
// writable and searchable, or a path whose nearest existing ancestor is (checked for a dry run too;
// prepare_launch_dir proves it by writing there once the install goes ahead).
Result<void> check_launch_dir(const std::string& dir) {
  if (dir.empty()) return {};
  fs::path p = dir;
  while (true) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return fail("--launch-dir " + dir + ": " + p.native() + " exists and is not a directory");
      if (::access(p.c_str(), W_OK | X_OK) != 0)
        return fail("--launch-dir " + dir + ": " + p.native() + " is not writable by this user (" +
                    errno_message(errno) + ")");
      return {};
    }
    if (errno != ENOENT && errno != ENOTDIR)
      return fail(errno_text("--launch-dir " + dir + ": cannot inspect", p, errno));
    if (!p.has_parent_path() || p.parent_path() == p) return fail("--launch-dir " + dir + ": no existing ancestor");
    p = p.parent_path();
  }
}

// The filesystem type of `dir` as statfs names it (nfs, lustre, gpfs, ext4, tmpfs...), "" when unknown.
std::string filesystem_type(const fs::path& dir) {
  struct statfs st {};
  if (::statfs(dir.c_str(), &st) != 0) return {};
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0x6969: return "nfs";
    case 0x0BD00BD0: return "lustre";
    case 0x47504653: return "gpfs";
    case 0x19830326: return "beegfs";
    case 0x00C36400: return "ceph";
    case 0xFF534D42: return "cifs";
    case 0xFE534D42: return "smb2";
    case 0x65735546: return "fuse";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x2FC12FC1: return "zfs";
    case 0x01021994: return "tmpfs";
    case 0x858458F6: return "ramfs";
    case 0x794C7630: return "overlay";
    default: return {};
  }
}

// Creates --launch-dir (mode 0700, with missing parents) and proves it writable with a file created and
// removed there; returns its filesystem type. Run only when the install goes ahead (not for a dry run).
Result<std::string> prepare_launch_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("--launch-dir " + dir + ": cannot create it: " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);  // as the runner creates it
  std::string probe = (fs::path(dir) / ".nymph-install-probe-XXXXXX").native();
  int fd = ::mkstemp(probe.data());
  if (fd < 0) return fail("--launch-dir " + dir + ": not writable: " + errno_message(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return filesystem_type(dir);
}

// A launch dir on a filesystem compute nodes cannot see (memory-backed or a container's overlay).
bool is_node_local(const std::string& type) { return type == "tmpfs" || type == "ramfs" || type == "overlay"; }

// Reads --config-fragment (a regular file of at most 1 MiB, like a config file), naming it by its absolute path.
Result<std::optional<ConfigFragment>> read_fragment(const std::string& path) {
  if (path.empty()) return std::optional<ConfigFragment>{};
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  if (ec) absolute = path;
  auto text = read_small_file(absolute, "--config-fragment", kMaxConfigFileBytes);
  if (!text) return text.error();
  return std::optional<ConfigFragment>{ConfigFragment{absolute.native(), std::move(*text)}};
}

// One manager per identity: refuses when a live manager holds the lease of plan.manager_state_dir (unless
// --replace, which makes it hand over first). The daemon acquires the lease itself; this only refuses early,
// before anything is written.
Result<void> check_manager_lease(const InstallPlan& plan, const InstallOptions& o, const InstallContext& ctx) {
  if (o.replace) {
    std::string requester = "nymph install of launch " + plan.launch_id + " (host " + ctx.host.hostname + " pid " +
                            std::to_string(::getpid()) + ")";
    if (auto r = agent::replace_holder(plan.manager_state_dir, ctx.host.hostname, requester, ctx.replace_timeout); !r)
      return fail("--replace: " + r.error().message + "; nothing was started");
    return {};
  }
  auto found = agent::inspect_lease(plan.manager_state_dir, ctx.host.hostname, std::chrono::system_clock::now());
  switch (found.decision.verdict) {
    case agent::LeaseVerdict::free:
      return {};
    case agent::LeaseVerdict::held:
      return fail("manager " + plan.identity + " is already running: " + found.decision.reason +
                  "; nothing was started. Stop it (nymph kill " + found.lease->launch_id +
                  "), or take over with --replace");
    case agent::LeaseVerdict::corrupt:
      break;
  }
  return fail("the manager lease " + (plan.manager_state_dir / agent::kLeaseFile).string() + " is unreadable: " +
              found.decision.reason + "; if no manager of " + plan.identity + " runs, remove it");
}

}  // namespace

Result<std::string> read_token(const InstallOptions& o, std::istream* input) {
  if (!o.token_file.empty() && o.token_stdin) return fail("give the token with --token-file or --token-stdin, not both");
  if (o.token_file.empty() && !o.token_stdin)
    return fail("no token: give it with --token-file FILE or --token-stdin (never on the command line)");
  if (o.token_stdin) {
    if (!input) return fail("--token-stdin: no standard input");
    std::string data;
    char buf[4096];
    while (data.size() <= 65536 && input->read(buf, sizeof buf).gcount() > 0)
      data.append(buf, static_cast<std::size_t>(input->gcount()));
    return check_token(data, "standard input");
  }
  auto data = read_small_file(o.token_file, "token file", kMaxTokenFileBytes);
  if (!data) return data.error();
  return check_token(*data, "file " + o.token_file);
}

Result<InstallOutcome> run_install(const InstallOptions& o, const InstallContext& ctx, UlidGenerator& ids) {
  auto id = ids.next();
  if (!id) return id.error();
  auto fragment = read_fragment(o.config_fragment);
  if (!fragment) return fragment.error();
  auto plan = make_install_plan(o, ctx.host, *id, *fragment);
  if (!plan) return plan.error();
  if (auto r = check_profile_scripts(*plan); !r) return r.error();
  if (auto r = check_launch_dir(plan->site.launch_dir); !r) return r.error();
  auto token = read_token(o, ctx.token_input);
  if (!token) return token.error();
  InstallOutcome out{.plan = *plan, .dry_run = o.dry_run,
                     .token_source = o.token_stdin ? "standard input" : "file " + o.token_file};
  if (o.dry_run) return out;

  if (!plan->site.launch_dir.empty()) {
    auto type = prepare_launch_dir(plan->site.launch_dir);
    if (!type) return type.error();
    out.launch_dir_filesystem = *type;
  }
  if (plan->mode == LaunchMode::local)
    if (auto r = check_manager_lease(*plan, o, ctx); !r) return r.error();
  auto record = record_for(*plan, ctx.host);
  if (auto r = write_launch_dir(*plan, *token, record); !r) return r.error();
  if (auto r = create_log(plan->log_path); !r) {
    remove_launch(*plan);
    return r.error();
  }
  if (plan->mode == LaunchMode::local) {
    auto pid = start_local(*plan, record, ctx);
    if (!pid) return pid.error();
    out.pid = *pid;
  } else {
    auto job = submit_slurm(*plan, record, ctx);
    if (!job) return job.error();
    out.slurm_job_id = *job;
  }
  return out;
}

namespace {

std::string launch_dir_warning(const InstallOutcome& oc) {
  return "--launch-dir " + oc.plan.site.launch_dir + " is on " + oc.launch_dir_filesystem +
         ", which compute nodes do not see: Slurm jobs will not find their job directories";
}

json::object site_json(const SiteConfig& site) {
  auto text = [](const std::string& v) { return v.empty() ? json::value(nullptr) : json::value(v); };
  json::array keys;
  for (const auto& k : site.fragment_keys) keys.emplace_back(k);
  return json::object{{"account", text(site.account)},
                      {"qos", text(site.qos)},
                      {"partition", text(site.partition)},
                      {"launchDir", text(site.launch_dir)},
                      {"profilesOnly", site.profiles_only},
                      {"maxJobs", site.max_jobs ? json::value(*site.max_jobs) : json::value(nullptr)},
                      {"maxPollDuration", text(site.max_poll_duration)},
                      {"drainGrace", text(site.drain_grace)},
                      {"configFragment", text(site.config_fragment)},
                      {"fragmentKeys", std::move(keys)}};
}

std::string site_text(const SiteConfig& site) {
  std::string s;
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty()) s += (s.empty() ? "" : ", ") + std::string(name) + " " + value;
  };
  add("account", site.account);
  add("qos", site.qos);
  add("partition", site.partition);
  add("launch_dir", site.launch_dir);
  if (site.profiles_only) add("profiles-only", "yes");
  if (site.max_jobs) add("max_jobs", std::to_string(*site.max_jobs));
  add("max_poll_duration", site.max_poll_duration);
  add("drain_grace", site.drain_grace);
  if (!site.config_fragment.empty())
    add("fragment", site.config_fragment + " (" + std::to_string(site.fragment_keys.size()) + " key(s))");
  return s;
}

}  // namespace

json::object outcome_json(const InstallOutcome& oc) {
  const auto& p = oc.plan;
  json::object o;
  if (oc.dry_run) o["dryRun"] = true;
  o["launchId"] = p.launch_id;
  o["workerLabel"] = p.worker_label;
  o["mode"] = p.mode == LaunchMode::slurm ? "slurm" : "local";
  o["launchDir"] = p.launch_dir.native();
  o["logPath"] = p.log_path.native();
  if (oc.pid) o["pid"] = *oc.pid;
  if (!oc.slurm_job_id.empty()) o["slurmJobId"] = oc.slurm_job_id;
  if (p.mode == LaunchMode::local) {
    o["identity"] = p.identity;
    o["managerStateDir"] = p.manager_state_dir.native();
  }
  o["tail"] = tail_line(p);
  if (p.mode == LaunchMode::slurm) {
    o["jobName"] = p.job_name;
    o["squeue"] = squeue_line(p);
    o["warning"] = p.keep ? kKeptWarning : kSlurmWarning;
    o["keep"] = p.keep;
  }
  if (oc.dry_run) {
    json::array files;
    files.push_back({{"path", p.config_path.native()}, {"mode", "0600"}, {"content", p.config_toml}});
    files.push_back({{"path", (p.launch_dir / kTokenFile).native()}, {"mode", "0600"}, {"from", oc.token_source}});
    files.push_back({{"path", (p.launch_dir / kLaunchFile).native()}, {"mode", "0600"}});
    if (p.keep) {
      files.push_back({{"path", p.chain_script.native()}, {"mode", "0600"}, {"content", p.sbatch_script}});
      files.push_back({{"path", (p.launch_dir / agent::kChainFile).native()}, {"mode", "0600"}});
    }
    files.push_back({{"path", p.log_path.native()}, {"mode", "0600"}});
    o["files"] = std::move(files);
    json::array argv;
    for (const auto& a : p.daemon_argv) argv.emplace_back(a);
    o["command"] = std::move(argv);
    if (p.mode == LaunchMode::slurm) o["sbatchScript"] = p.sbatch_script;
  }
  if (!p.profiles.empty()) {
    json::object profiles;
    for (const auto& [name, script] : p.profiles) profiles[name] = script;
    o["trainingProfiles"] = std::move(profiles);
  }
  auto site = site_json(p.site);
  if (!oc.launch_dir_filesystem.empty()) site["launchDirFilesystem"] = oc.launch_dir_filesystem;
  if (is_node_local(oc.launch_dir_filesystem)) site["warning"] = launch_dir_warning(oc);
  o["siteConfig"] = std::move(site);
  return o;
}

std::string outcome_text(const InstallOutcome& oc) {
  const auto& p = oc.plan;
  std::ostringstream s;
  if (oc.dry_run) s << "dry run: nothing was written, started or submitted\n";
  s << "launch ID:    " << p.launch_id << "\n"
    << "worker label: " << p.worker_label << "\n"
    << "launch dir:   " << p.launch_dir.native() << "\n"
    << "log:          " << p.log_path.native() << "\n";
  if (p.mode == LaunchMode::local)
    s << "manager:      " << p.identity << " (state " << p.manager_state_dir.native() << ")\n";
  if (auto site = site_text(p.site); !site.empty()) s << "site config:  " << site << "\n";
  if (!oc.launch_dir_filesystem.empty())
    s << "launch_dir:   on " << oc.launch_dir_filesystem
      << (is_node_local(oc.launch_dir_filesystem) ? " (warning: " + launch_dir_warning(oc) + ")" : "") << "\n";
  if (oc.pid) s << "pid:          " << *oc.pid << "\n";
  if (!oc.slurm_job_id.empty()) s << "Slurm job:    " << oc.slurm_job_id << "\n";
  if (oc.dry_run) {
    s << "\nwould create " << p.launch_dir.native() << "/ (0700) with\n"
      << "  " << kConfigFile << " (0600):\n";
    std::istringstream lines(p.config_toml);
    for (std::string line; std::getline(lines, line);) s << "    " << line << "\n";
    s << "  " << kTokenFile << " (0600): the token from " << oc.token_source << " (not shown)\n"
      << "  " << kLaunchFile << " (0600): what was started\n";
    if (p.keep)
      s << "  " << agent::kChainScript << " (0600): the script below, which every generation is submitted from\n"
        << "  " << agent::kChainFile << " (0600): the chain's record\n";
    s << "and the log " << p.log_path.native() << " (0600)\n\n";
    if (p.mode == LaunchMode::local) {
      s << "would start, detached (new session, stdin /dev/null, output appended to the log, in the launch dir):\n"
        << "  " << shell_join(p.daemon_argv) << "\n";
    } else {
      s << "would submit:\n  "
        << (p.keep ? "sbatch --parsable " + p.chain_script.native() + " 1, where the script is:\n"
                   : std::string("sbatch --parsable <<'EOF'\n"));
      std::istringstream script(p.sbatch_script);
      for (std::string line; std::getline(script, line);) s << "  " << line << "\n";
      if (!p.keep) s << "  EOF\n";
    }
  }
  s << "\n";
  if (p.mode == LaunchMode::slurm) s << "find the job:    " << squeue_line(p) << "\n";
  s << "follow the log:  " << tail_line(p) << "\n";
  if (p.mode == LaunchMode::slurm) s << "\nwarning: " << (p.keep ? kKeptWarning : kSlurmWarning) << "\n";
  return s.str();
}

}  // namespace nymph::installer
