#include "agent/doctor.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <sstream>

#include <boost/asio/this_coro.hpp>
#include <boost/json.hpp>

#include "common/coroutine_warning.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "http/client.hpp"
#include "platform/environment.hpp"
#include "slurm/commands.hpp"
#include "slurm/parse.hpp"

namespace nymph::agent::doctor {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace json = boost::json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SysClock = std::chrono::system_clock;

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "fail";
  }
  return "?";
}

bool Report::failed() const {
  return std::any_of(checks.begin(), checks.end(), [](const Check& c) { return c.verdict == Verdict::fail; });
}

const Check* Report::find(std::string_view name) const {
  for (const auto& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// systemd's boolean grammar (parse_boolean): 1/yes/y/true/t/on and 0/no/n/false/f/off.
std::optional<bool> parse_systemd_bool(const std::string& value) {
  auto v = lower(value);
  if (v == "1" || v == "yes" || v == "y" || v == "true" || v == "t" || v == "on") return true;
  if (v == "0" || v == "no" || v == "n" || v == "false" || v == "f" || v == "off") return false;
  return std::nullopt;
}

// A logind configuration file's text; "" when it is missing or unreadable (then it sets nothing).
std::string logind_file_text(const fs::path& p) {
  auto text = read_small_file(p, "logind configuration", kMaxConfigFileBytes);
  return text ? *text : std::string();
}

Check make(std::string name, Verdict v, std::string detail, std::string fix = {}) {
  return Check{std::move(name), v, std::move(detail), std::move(fix)};
}

std::string seconds_text(milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

std::string first_line(const std::string& text) {
  auto t = trim(text);
  return std::string(t.substr(0, t.find('\n')));
}

std::string bytes_text(std::uintmax_t b) {
  constexpr double mib = 1024.0 * 1024.0;
  std::ostringstream s;
  s.precision(1);
  s << std::fixed;
  if (b >= 1024 * 1024 * 1024ull) s << (static_cast<double>(b) / (mib * 1024.0)) << " GiB";
  else s << (static_cast<double>(b) / mib) << " MiB";
  return s.str();
}

// The nearest existing ancestor of `p` (p itself when it exists).
fs::path existing_ancestor(fs::path p) {
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return p.empty() ? fs::path("/") : p;
}

fs::path resolve(const fs::path& p, const fs::path& base) { return p.is_absolute() ? p : (base / p).lexically_normal(); }

// A one-check list (GCC 12: no braced lists inside coroutines).
std::vector<Check> just(Check c) {
  std::vector<Check> v;
  v.push_back(std::move(c));
  return v;
}

}  // namespace

// --- logout and linger -----------------------------------------------------------------------------------

std::optional<bool> parse_kill_user_processes(std::string_view conf_text) {
  std::optional<bool> value;
  bool in_login = false;
  std::istringstream in{std::string(conf_text)};
  for (std::string raw; std::getline(in, raw);) {
    std::string line(trim(raw));
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      in_login = line == "[Login]";
      continue;
    }
    auto eq = line.find('=');
    if (!in_login || eq == std::string::npos || trim(line.substr(0, eq)) != "KillUserProcesses") continue;
    if (auto b = parse_systemd_bool(std::string(trim(line.substr(eq + 1))))) value = b;
  }
  return value;
}

std::optional<bool> effective_kill_user_processes(const fs::path& root) {
  std::optional<bool> value = parse_kill_user_processes(logind_file_text(root / "etc/systemd/logind.conf"));
  // Drop-ins: one file name overrides the same name in an earlier directory; all sorted by file name.
  std::map<std::string, fs::path> dropins;
  for (const char* dir : {"usr/lib/systemd/logind.conf.d", "usr/local/lib/systemd/logind.conf.d",
                          "run/systemd/logind.conf.d", "etc/systemd/logind.conf.d"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / dir, ec))
      if (e.path().extension() == ".conf") dropins[e.path().filename().string()] = e.path();
  }
  for (const auto& [name, path] : dropins)
    if (auto v = parse_kill_user_processes(logind_file_text(path))) value = v;
  return value;
}

Check logout_check(std::optional<bool> kill_user_processes, bool lingering, bool systemd) {
  const std::string name = "session.logout";
  if (!systemd)
    return make(name, Verdict::ok, "no systemd-logind: processes started with `nymph install` survive logout");
  if (!kill_user_processes.value_or(false))
    return make(name, Verdict::ok,
                std::string("logind KillUserProcesses=no") + (kill_user_processes ? "" : " (default)") +
                    ": a manager started with `nymph install` survives logout");
  std::string detail = "logind KillUserProcesses=yes: whatever a login session started is killed at logout";
  if (lingering)
    return make(name, Verdict::warn, detail + "; services of your lingering systemd user manager survive",
                "run the manager as the systemd user unit (packaging/systemd/nymph.service), not from a shell");
  return make(name, Verdict::fail, detail,
              "`loginctl enable-linger` and run the manager as the systemd user unit "
              "(packaging/systemd/nymph.service), or ask the admins for KillExcludeUsers");
}

Check linger_check(bool lingering, bool systemd, const std::string& user) {
  const std::string name = "session.linger";
  if (!systemd) return make(name, Verdict::ok, "no systemd: start the manager at boot with cron `@reboot` instead");
  if (lingering) return make(name, Verdict::ok, "linger is on for " + user + ": the systemd user unit starts at boot");
  return make(name, Verdict::warn, "linger is off for " + user + ": your systemd user manager stops at logout and "
              "does not start at boot",
              "loginctl enable-linger " + user + " (then `systemctl --user enable --now nymph`)");
}

// --- clock, disk, token, launch dir ---------------------------------------------------------------------

std::optional<SysClock::time_point> parse_http_date(std::string_view text) {
  std::tm tm{};
  std::string s(trim(text));
  const char* end = ::strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  time_t t = ::timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return time_from_ms(static_cast<std::int64_t>(t) * 1000);  // %Y has at most 4 digits: no overflow here
}

Check clock_skew_check(std::optional<std::string> date_header, SysClock::time_point sent, SysClock::time_point received) {
  const std::string name = "control.clock";
  auto server = date_header ? parse_http_date(*date_header) : std::nullopt;
  if (!server)
    return make(name, Verdict::warn,
                date_header ? "the server's Date header '" + *date_header + "' is not an HTTP date"
                            : "the server sent no Date header: clock skew not measured",
                "compare `date -u` here with the server's clock");
  auto middle = sent + (received - sent) / 2;
  // Date has a resolution of one second: allow for it before judging.
  auto skew = duration_cast<milliseconds>(middle - *server);
  auto magnitude = std::chrono::abs(skew) > seconds(1) ? std::chrono::abs(skew) - seconds(1) : milliseconds(0);
  std::string detail = "this host's clock is " + seconds_text(duration_cast<seconds>(std::chrono::abs(skew))) +
                       (skew.count() >= 0 ? " ahead of" : " behind") + " the control plane's";
  if (magnitude <= seconds(5)) return make(name, Verdict::ok, detail);
  std::string fix = "synchronise the clock (chronyd/ntpd); leases and walltimes are absolute times";
  if (magnitude <= seconds(60)) return make(name, Verdict::warn, detail, fix);
  return make(name, Verdict::fail, detail, fix);
}

Check disk_check(const fs::path& dir, std::optional<std::uintmax_t> available) {
  const std::string name = "state.disk";
  if (!available) return make(name, Verdict::warn, "cannot measure free space at " + dir.string());
  std::string detail = bytes_text(*available) + " free at " + dir.string();
  std::string fix = "free space there, or use another --state-dir / worker.work_dir";
  if (*available < 100ull * 1024 * 1024) return make(name, Verdict::fail, detail, fix);
  if (*available < 1024ull * 1024 * 1024) return make(name, Verdict::warn, detail, fix);
  return make(name, Verdict::ok, detail);
}

Check token_check(const fs::path& token_file) {
  auto token = read_token_file(token_file);
  if (token) return make("token.file", Verdict::ok, token_file.string() + ": owned by you, mode 0600, not empty");
  return make("token.file", Verdict::fail, token.error().message,
              "put the agent token there with `umask 077; cat > " + token_file.string() +
                  "` (a regular file you own, mode 0600)");
}

Check launch_dir_check(const fs::path& dir) {
  const std::string name = "slurm.launch_dir";
  std::string templ = (dir / ".nymph-doctor-XXXXXX").string();
  int fd = ::mkstemp(templ.data());
  if (fd < 0)
    return make(name, Verdict::fail, "cannot create a file in " + dir.string() + ": " + std::strerror(errno),
                "create it (mkdir -p) or set [runners.slurm] launch_dir to a writable directory that the compute "
                "nodes also see");
  ::close(fd);
  ::unlink(templ.c_str());
  return make(name, Verdict::ok, dir.string() + " is writable (it must also be visible from the compute nodes)");
}

// --- rendering -------------------------------------------------------------------------------------------

json::value to_json(const Report& r) {
  json::array checks;
  for (const auto& c : r.checks)
    checks.push_back(json::object{{"name", c.name}, {"verdict", to_string(c.verdict)}, {"detail", c.detail},
                                  {"fix", c.fix}});
  return json::object{{"ok", !r.failed()}, {"checks", std::move(checks)}};
}

std::string to_text(const Report& r) {
  std::size_t width = 0;
  for (const auto& c : r.checks) width = std::max(width, c.name.size());
  std::ostringstream out;
  for (const auto& c : r.checks) {
    out << (c.verdict == Verdict::ok ? "ok  " : c.verdict == Verdict::warn ? "WARN" : "FAIL") << "  " << c.name
        << std::string(width - c.name.size() + 2, ' ') << c.detail << "\n";
    if (c.verdict != Verdict::ok && !c.fix.empty()) out << std::string(width + 8, ' ') << "fix: " << c.fix << "\n";
  }
  auto count = [&](Verdict v) {
    return std::count_if(r.checks.begin(), r.checks.end(), [v](const Check& c) { return c.verdict == v; });
  };
  out << "\n" << count(Verdict::ok) << " ok, " << count(Verdict::warn) << " warning(s), " << count(Verdict::fail)
      << " failure(s)\n";
  return out.str();
}

// --- Slurm ---------------------------------------------------------------------------------------------

std::string partition_in_test_only(std::string_view text) {
  constexpr std::string_view key = " in partition ";
  auto at = text.rfind(key);
  if (at == std::string_view::npos) return {};
  auto rest = text.substr(at + key.size());
  auto end = rest.find_first_of(" \t\r\n");
  return std::string(rest.substr(0, end));
}

std::vector<Check> submit_checks(const Inputs& in, const Result<slurm::CommandResult>& test_only) {
  std::string configured = in.config ? in.config->slurm.partition : std::string();
  std::string site;  // what the probe carried beyond the defaults
  if (in.config) {
    const auto& s = in.config->slurm;
    for (auto [k, v] : {std::pair{"partition", &s.partition}, {"account", &s.account}, {"qos", &s.qos}})
      if (!v->empty()) site += std::string(site.empty() ? " with " : ", ") + k + " " + *v;
  }
  std::string said = test_only ? test_only->err + "\n" + test_only->out : test_only.error().message;
  std::string why = test_only ? first_line(test_only->err.empty() ? test_only->out : test_only->err) : said;
  bool accepted = test_only && test_only->exit_code == 0;
  std::vector<Check> out;
  // slurm.partition: a default partition exists, or [runners.slurm] partition names one that sbatch accepts.
  std::string lower = said;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  bool about_partition = lower.find("partition") != std::string::npos && !accepted;
  std::string partition = partition_in_test_only(said);
  const std::string set_it = "set [runners.slurm] partition (`nymph install --partition P`) to a partition you may use";
  if (!configured.empty()) {
    if (about_partition)
      out.push_back(make("slurm.partition", Verdict::fail, "sbatch refuses partition " + configured + ": " + why, set_it));
    else
      out.push_back(make("slurm.partition", Verdict::ok, "jobs use partition " + configured + " ([runners.slurm] partition)"));
  } else if (about_partition) {
    out.push_back(make("slurm.partition", Verdict::fail, "no default partition: " + why, set_it));
  } else if (!accepted) {
    out.push_back(make("slurm.partition", Verdict::warn, "unknown: sbatch --test-only failed (see slurm.submit)", set_it));
  } else {
    out.push_back(make("slurm.partition", Verdict::ok,
                       partition.empty() ? "the cluster has a default partition"
                                         : "default partition: " + partition));
  }
  // slurm.submit: this user may submit a job (as the manager will: same partition, account and qos).
  if (accepted)
    out.push_back(make("slurm.submit", Verdict::ok, "sbatch --test-only accepts a job of " + in.user + site));
  else
    out.push_back(make("slurm.submit", Verdict::fail,
                       "sbatch --test-only refuses a job of " + in.user + site + ": " +
                           (test_only ? "exit status " + std::to_string(test_only->exit_code) + (why.empty() ? "" : ": " + why) : why),
                       "check [runners.slurm] partition, account and qos against `sacctmgr show assoc user=" +
                           in.user + "`"));
  // chain.successor: a kept launch's generations submit their successors from the compute node they run on.
  if (!in.in_allocation)
    out.push_back(make("chain.successor", accepted ? Verdict::ok : Verdict::warn,
                       std::string("kept launches (--keep) submit each successor from inside its allocation (check "
                                   "there with `srun nymph doctor`); where a compute node has no sbatch, ") +
                           (accepted ? "a manager of this user on this login node submits them"
                                     : "a manager here could not submit them either (see slurm.submit)")));
  else if (accepted)
    out.push_back(make("chain.successor", Verdict::ok,
                       "this compute node can submit: a kept launch (--keep) renews itself from here"));
  else
    out.push_back(make("chain.successor", Verdict::fail,
                       "this compute node cannot submit, so a kept launch (--keep) would pause at its first "
                       "successor: " + why,
                       "install without --keep (a login-node manager), or ask the site to let compute nodes run "
                       "sbatch"));
  return out;
}

namespace {

struct SlurmCommand {
  std::string role;  // sbatch, squeue, sacct, scancel
  std::string configured;
  std::optional<std::string> path;
};

// Runs `argv` through `commands`; a start failure or a timeout becomes an Error naming the command.
asio::awaitable<Result<slurm::CommandResult>> run_bounded(slurm::CommandRunner& commands, std::vector<std::string> argv,
                                                          milliseconds timeout) {
  co_return co_await commands.run(std::move(argv), slurm::scrubbed_environment(), timeout);
}

std::string failure_text(const Result<slurm::CommandResult>& r) {
  if (!r) return r.error().message;
  std::string why = first_line(r->err.empty() ? r->out : r->err);
  return "exit status " + std::to_string(r->exit_code) + (why.empty() ? "" : ": " + why);
}

asio::awaitable<Check> version_check(const Inputs& in, slurm::CommandRunner& commands,
                                     const SlurmCommand& c) {
  const std::string name = "slurm." + c.role;
  if (!c.path)
    co_return make(name, Verdict::fail, "'" + c.configured + "' not found on PATH",
                   "add Slurm's bin directory to PATH (e.g. `module load slurm`) or set [runners.slurm] " + c.role +
                       " = \"/path/to/" + c.role + "\"");
  auto r = co_await run_bounded(commands, slurm::version_argv(*c.path), in.command_timeout);
  if (!r || r->exit_code != 0)
    co_return make(name, Verdict::fail, *c.path + " --version failed: " + failure_text(r),
                   "check that " + *c.path + " runs for this user (and its Slurm configuration: SLURM_CONF)");
  co_return make(name, Verdict::ok, *c.path + " (" + first_line(r->out) + ")");
}

asio::awaitable<Check> controller_check(const Inputs& in, slurm::CommandRunner& commands,
                                        const std::string& squeue) {
  auto r = co_await run_bounded(commands, slurm::squeue_user_argv(squeue, in.user), in.command_timeout);
  Result<std::vector<slurm::SqueueRow>> jobs = fail(failure_text(r));
  if (r && r->exit_code == 0) jobs = slurm::parse_squeue(r->out);
  if (!jobs)
    co_return make("slurm.controller", Verdict::fail, "squeue -u " + in.user + " failed: " + jobs.error().message,
                   "slurmctld must answer from this node: check `scontrol ping` and SLURM_CONF");
  co_return make("slurm.controller", Verdict::ok,
                 "slurmctld answers; Slurm user " + in.user + " has " + std::to_string(jobs->size()) + " job(s) in squeue");
}

asio::awaitable<Check> accounting_check(const Inputs& in, slurm::CommandRunner& commands,
                                        const std::string& sacct) {
  auto r = co_await run_bounded(commands, slurm::sacct_user_argv(sacct, in.user), in.command_timeout);
  if (!r || r->exit_code != 0)
    co_return make("slurm.accounting", Verdict::warn, "sacct failed: " + failure_text(r),
                   "without accounting, a job's final state and exit code are known only while squeue still "
                   "lists it; ask the admins whether slurmdbd is available");
  co_return make("slurm.accounting", Verdict::ok, "sacct answers (accounting storage is available)");
}

asio::awaitable<Check> account_check(const Inputs& in, slurm::CommandRunner& commands) {
  const std::string name = "slurm.account";
  std::string configured = in.config ? in.config->slurm.account : std::string();
  std::string using_text = configured.empty() ? "" : "; jobs use account " + configured + " ([runners.slurm] account)";
  auto sacctmgr = platform::find_on_path("sacctmgr", in.path_env);
  if (!sacctmgr)
    co_return make(name, configured.empty() ? Verdict::warn : Verdict::ok, "sacctmgr not found: default account unknown" + using_text,
                   "set [runners.slurm] account if your site requires one");
  auto r = co_await run_bounded(commands, slurm::default_account_argv(*sacctmgr, in.user), in.command_timeout);
  std::string account = r && r->exit_code == 0 ? slurm::parse_default_account(r->out) : "";
  if (account.empty())
    co_return make(name, configured.empty() ? Verdict::warn : Verdict::ok,
                   "no default account for " + in.user + (r ? "" : " (" + r.error().message + ")") + using_text,
                   "set [runners.slurm] account, or ask the admins to add you (sacctmgr add user)");
  co_return make(name, Verdict::ok, "default account of " + in.user + ": " + account + using_text);
}

// The options every probe submission carries: a one-minute `true` named nymph-doctor, no output file, and the
// site's [runners.slurm] partition, account and qos (the combination the manager's jobs will use).
std::vector<std::string> probe_job_argv(const Inputs& in, const std::string& sbatch, std::vector<std::string> extra) {
  std::vector<std::string> argv{sbatch};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--job-name=nymph-doctor", "--time=1", "--output=/dev/null", "--wrap=true"});
  if (in.config) {
    const auto& s = in.config->slurm;
    if (!s.partition.empty()) argv.push_back("--partition=" + s.partition);
    if (!s.account.empty()) argv.push_back("--account=" + s.account);
    if (!s.qos.empty()) argv.push_back("--qos=" + s.qos);
  }
  return argv;
}

asio::awaitable<std::vector<Check>> submit_test(const Inputs& in, slurm::CommandRunner& commands,
                                                const std::string& sbatch) {
  auto argv = probe_job_argv(in, sbatch, {"--test-only"});
  co_return submit_checks(in, co_await run_bounded(commands, std::move(argv), in.command_timeout));
}

asio::awaitable<Check> held_job_check(const Inputs& in, slurm::CommandRunner& commands, const std::string& sbatch,
                                      const std::string& scancel) {
  const std::string name = "slurm.cancel";
  auto argv = probe_job_argv(in, sbatch, {"--parsable", "--hold"});
  auto submitted = co_await run_bounded(commands, std::move(argv), in.command_timeout);
  if (!submitted || submitted->exit_code != 0)
    co_return make(name, Verdict::fail, "sbatch --hold failed: " + failure_text(submitted),
                   "check the partition, account and qos ([runners.slurm]) with `sbatch --test-only --wrap=true`");
  auto id = slurm::parse_sbatch_output(submitted->out);
  if (!id)
    co_return make(name, Verdict::fail, "cannot read the job id sbatch printed: " + id.error().message,
                   "report this with the output of `sbatch --parsable --hold --wrap=true`");
  std::vector<std::string> ids{*id};
  auto cancelled = co_await run_bounded(commands, slurm::scancel_argv(scancel, ids), in.command_timeout);
  if (!cancelled || cancelled->exit_code != 0)
    co_return make(name, Verdict::fail, "held job " + *id + " was submitted but scancel failed: " + failure_text(cancelled),
                   "cancel it yourself (`scancel " + *id + "`) and ask the admins why you may not cancel your own jobs");
  co_return make(name, Verdict::ok, "held job " + *id + " submitted and cancelled");
}

std::vector<SlurmCommand> slurm_commands(const Inputs& in) {
  SlurmSection s = in.config ? in.config->slurm : SlurmSection{};
  std::vector<SlurmCommand> out{{"sbatch", s.sbatch, {}}, {"squeue", s.squeue, {}}, {"sacct", s.sacct, {}},
                                {"scancel", s.scancel, {}}};
  for (auto& c : out) c.path = platform::find_on_path(c.configured, in.path_env);
  return out;
}

}  // namespace

asio::awaitable<std::vector<Check>> slurm_checks(const Inputs& in, slurm::CommandRunner& commands) {
  std::string enabled = in.config ? in.config->slurm.enabled : "auto";
  if (enabled == "false")
    co_return just(make("slurm", Verdict::ok, "the Slurm runner is disabled ([runners.slurm] enabled = false)"));
  auto cmds = slurm_commands(in);
  if (std::none_of(cmds.begin(), cmds.end(), [](const SlurmCommand& c) { return c.path.has_value(); }))
    co_return just(make("slurm", enabled == "true" ? Verdict::fail : Verdict::warn,
                        "no Slurm command on PATH: only the process runner is advertised",
                        "add Slurm's bin directory to PATH (e.g. `module load slurm`)"));
  std::vector<Check> out;
  out.reserve(cmds.size());
  for (const auto& c : cmds) out.push_back(co_await version_check(in, commands, c));
  if (cmds[1].path) out.push_back(co_await controller_check(in, commands, *cmds[1].path));
  if (cmds[2].path) out.push_back(co_await accounting_check(in, commands, *cmds[2].path));
  out.push_back(co_await account_check(in, commands));
  if (cmds[0].path) {
    for (auto& c : co_await submit_test(in, commands, *cmds[0].path)) out.push_back(std::move(c));
    if (in.deep && cmds[3].path) out.push_back(co_await held_job_check(in, commands, *cmds[0].path, *cmds[3].path));
  }
  co_return out;
}

// --- control plane ---------------------------------------------------------------------------------------

namespace {

std::string trust_text(const std::optional<fs::path>& ca_file) {
  std::string t = ca_file ? "ca_file " + ca_file->string() + " + " : "";
  const char* file = std::getenv("SSL_CERT_FILE");
  const char* dir = std::getenv("SSL_CERT_DIR");
  if (file || dir)
    return t + (file ? std::string("SSL_CERT_FILE=") + file : "") + (file && dir ? ", " : "") +
           (dir ? std::string("SSL_CERT_DIR=") + dir : "");
  return t + "system CAs (" + http::system_ca_bundle().value_or("no well-known bundle found") + ")";
}

Check tls_ok_check(const http::Endpoint& ep, const std::optional<fs::path>& ca_file) {
  if (!ep.tls) {
    if (ep.loopback) return make("control.tls", Verdict::ok, "plain http to loopback");
    return make("control.tls", Verdict::warn, "plain http: the token crosses the network unencrypted",
                "use an https:// URL");
  }
  return make("control.tls", Verdict::ok, "certificate of " + ep.host + " verified (trusting " + trust_text(ca_file) + ")");
}

std::vector<Check> unreachable(const std::string& url, const std::string& message, const http::Endpoint& ep,
                               const std::optional<fs::path>& ca_file) {
  std::vector<Check> out;
  // The client's messages say "TLS handshake ... failed" only once the TCP connection is up.
  if (ep.tls && message.find("TLS handshake") != std::string::npos) {
    out.push_back(make("control.reachable", Verdict::ok, url + " accepts connections"));
    out.push_back(make("control.tls", Verdict::fail, message + " (trusting " + trust_text(ca_file) + ")",
                       "a private CA: set [server] ca_file = \"/path/ca.pem\" (or SSL_CERT_FILE); a host-name "
                       "mismatch: use the name the certificate was issued for in [server] url"));
    return out;
  }
  out.push_back(make("control.reachable", Verdict::fail, message,
                     "check [server] url, that the control plane runs, and that this node may connect to it "
                     "(firewall, proxy)"));
  return out;
}

}  // namespace

asio::awaitable<std::vector<Check>> control_plane_checks(const Inputs& in) {
  const ServerConfig& server = in.config->server;
  if (auto ok = check_server_url(server); !ok)
    co_return just(make("control.url", Verdict::fail, ok.error().message, "fix [server] url"));
  std::optional<fs::path> ca_file;
  if (server.ca_file) ca_file = resolve(*server.ca_file, in.working_dir);
  http::ClientConfig cc{.ca_file = ca_file ? std::optional<std::string>(ca_file->string()) : std::nullopt,
                        .connect_timeout = in.http_timeout};
  auto client = http::Client::create(co_await asio::this_coro::executor, server.url, cc);
  if (!client) co_return just(make("control.tls", Verdict::fail, client.error().message, "fix [server] ca_file"));
  http::Request health{.method = http::Method::get, .target = "/healthz", .timeout = in.http_timeout};
  auto sent = SysClock::now();
  auto reply = co_await client->request(std::move(health));
  auto received = SysClock::now();
  if (!reply) co_return unreachable(server.url, reply.error().message, client->endpoint(), ca_file);
  std::vector<Check> out;
  auto took = duration_cast<milliseconds>(received - sent);
  if (reply->status != 200)
    out.push_back(make("control.reachable", Verdict::fail,
                       "GET " + server.url + "/healthz answered HTTP " + std::to_string(reply->status),
                       "is [server] url the control plane's base URL?"));
  else
    out.push_back(make("control.reachable", Verdict::ok, "GET " + server.url + "/healthz: 200 in " + seconds_text(took)));
  out.push_back(tls_ok_check(client->endpoint(), ca_file));
  out.push_back(clock_skew_check(reply->header("Date"), sent, received));
  co_return out;
}

// --- everything ------------------------------------------------------------------------------------------

namespace {

Check config_check(const Inputs& in) {
  if (!in.config_error.empty())
    return make("config", Verdict::fail, in.config_error, "fix the file (docs/config.md lists every key)");
  if (!in.config)
    return make("config", Verdict::warn, "no configuration file: control-plane and token checks skipped",
                "pass --config FILE (the file `nymph run --config` uses)");
  return make("config", Verdict::ok, in.config_source + " is valid");
}


Check disk_for(const Inputs& in) {
  fs::path dir = existing_ancestor(in.state_dir);
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return disk_check(dir, std::nullopt);
  return disk_check(dir, static_cast<std::uintmax_t>(st.f_bavail) * st.f_frsize);
}

}  // namespace

Check launch_dir_for(const Inputs& in) {
  if (in.config && !in.config->slurm.launch_dir.empty())
    return launch_dir_check(resolve(in.config->slurm.launch_dir, in.working_dir));
  if (in.config && !in.manager_state_dir.empty())
    return launch_dir_check(existing_ancestor(in.manager_state_dir / "slurm"));
  if (in.config) return launch_dir_check(in.working_dir);
  // Without a configuration: the state directory `nymph install` would create its launches in.
  return launch_dir_check(existing_ancestor(in.state_dir));
}

NYMPH_GCC_PR109224_BEGIN  // see common/coroutine_warning.hpp
asio::awaitable<Report> run_all(Inputs in, slurm::CommandRunner& commands) {
  Report r;
  r.checks.push_back(config_check(in));
  for (auto& c : co_await slurm_checks(in, commands)) r.checks.push_back(std::move(c));
  r.checks.push_back(launch_dir_for(in));
  std::error_code ec;
  bool systemd = fs::is_directory(in.systemd_runtime_dir, ec);
  bool lingering = fs::exists(in.linger_dir / in.user, ec);
  r.checks.push_back(logout_check(effective_kill_user_processes(in.logind_root), lingering, systemd));
  r.checks.push_back(linger_check(lingering, systemd, in.user));
  if (in.config) {
    for (auto& c : co_await control_plane_checks(in)) r.checks.push_back(std::move(c));
    r.checks.push_back(token_check(resolve(in.config->server.token_file, in.working_dir)));
  }
  r.checks.push_back(disk_for(in));
  co_return r;
}
NYMPH_GCC_PR109224_END

}  // namespace nymph::agent::doctor
