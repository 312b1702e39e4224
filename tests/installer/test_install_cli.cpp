// `nymph install / launches / kill` through the real binary, with a temporary HOME. The daemon is the real
// `nymph run`, pointed at a closed loopback port: it stays up retrying its registration, which is all these
// tests need (registration against a real control plane is tested elsewhere).
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/files.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using nymph::test::CommandOutput;
using nymph::test::read_file;
using nymph::test::run_command;

namespace {

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// A loopback port with nothing listening on it.
int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// True while `pid` exists and is not a zombie (an exited daemon waits for init to reap it).
bool running(int pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Parses stdout that must be exactly one JSON object (and a newline).
json::object one_object(const CommandOutput& r) {
  boost::system::error_code ec;
  auto v = json::parse(r.out, ec);
  EXPECT_FALSE(ec) << "stdout is not one JSON value: " << r.out;
  EXPECT_TRUE(v.is_object()) << r.out;
  return v.is_object() ? v.as_object() : json::object{};
}

// Every process's command line, joined, for "the token never appears in argv".
std::string all_cmdlines() {
  std::string all;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    all += read_file(fs::path("/proc") / e->d_name / "cmdline") + "\n";
  }
  if (d) ::closedir(d);
  return all;
}

class InstallCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nymph-cli-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    home_ = root_ / "home";
    fs::create_directories(home_);
    if (const char* h = std::getenv("HOME")) old_home_ = h;
    ::setenv("HOME", home_.c_str(), 1);
    ::unsetenv("XDG_DATA_HOME");  // the manager state directory follows HOME
    token_file_ = write_token("tok", "cli-secret-token-7f3a9c\n");
    server_ = "http://127.0.0.1:" + std::to_string(closed_port());
  }

  void TearDown() override {
    // Stop whatever a failing test left running, through the product's own kill.
    auto list = one_object(run({"launches", "--json"}));
    for (const auto& l : list["launches"].as_array())
      if (l.at("state") == "running") run({"kill", std::string(l.at("launchId").as_string()), "--timeout", "30"});
    ::setenv("HOME", old_home_.c_str(), 1);
    fs::remove_all(root_);
  }

  fs::path write_token(const std::string& name, const std::string& token) {
    auto p = root_ / name;
    std::ofstream(p) << token;
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
    return p;
  }

  CommandOutput run(std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), NYMPH_BINARY);
    return run_command(args, input);
  }

  std::vector<std::string> install_args() {
    return {"install", "--server", server_, "--token-file", token_file_.native(), "--label", "cli"};
  }

  fs::path state_dir() const { return home_ / ".local" / "share" / "nymph"; }

  // True when nothing was created under HOME (no launch, no log, no directories).
  bool home_untouched() const { return fs::is_empty(home_); }

  fs::path root_, home_, token_file_;
  std::string old_home_, server_;
};

}  // namespace

TEST_F(InstallCli, DryRunPrintsThePlanAndTouchesNothing) {
  auto args = install_args();
  args.insert(args.end(), {"--tag", "site=lab", "--idle-exit", "30m", "--dry-run"});
  auto r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (auto what : {"dry run", "launch ID:", "worker label: cli-", "[server]", "[worker.tags]", "idle_exit = '30m'",
                    "token (0600)", " run --config ", "tail -f "})
    EXPECT_NE(r.out.find(what), std::string::npos) << what << " missing in\n" << r.out;
  EXPECT_EQ(r.out.find("cli-secret-token"), std::string::npos);
  EXPECT_TRUE(home_untouched());
}

TEST_F(InstallCli, DryRunJsonIsOneObject) {
  auto args = install_args();
  args.insert(args.end(), {"--slurm", "--slurm-partition", "debug", "--slurm-time", "10", "--json", "--dry-run"});
  auto r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = one_object(r);
  EXPECT_EQ(o["dryRun"], true);
  std::string id(o["launchId"].as_string());
  EXPECT_EQ(o["workerLabel"].as_string(), "cli-" + id);
  EXPECT_EQ(o["squeue"].as_string(), "squeue --name=\"lakeshore-nymph-" + id + "\" -o '%.18i %.48j %.10T'");
  std::string script(o["sbatchScript"].as_string());
  EXPECT_NE(script.find("#SBATCH --job-name=lakeshore-nymph-" + id + "\n"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --signal=B:USR1@120\n"), std::string::npos) << script;
  EXPECT_EQ(r.out.find("cli-secret-token"), std::string::npos);
  EXPECT_TRUE(home_untouched());
}

TEST_F(InstallCli, SiteOptionsAppearInJsonAndDryRunAndAConflictIsOneError) {
  auto script = root_ / "smoke.sh";
  std::ofstream(script) << "#!/bin/sh\n#SBATCH --mem=10M\nexit 0\n";
  fs::permissions(script, fs::perms::owner_all);
  std::ofstream(root_ / "site.toml") << "[runners.slurm]\npoll_interval = \"5s\"\n";
  auto args = install_args();
  args.insert(args.end(), {"--account", "A2", "--qos", "Q2", "--partition", "debug", "--launch-dir",
                           (root_ / "jobs").native(), "--training-profile", "smoke=" + script.native(),
                           "--profiles-only", "--max-jobs", "5", "--max-poll-duration", "12h", "--drain-grace", "2m",
                           "--config-fragment", (root_ / "site.toml").native(), "--cluster", "lab"});
  auto text = args;
  text.emplace_back("--dry-run");
  auto r = run(text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (auto what : {"site config:  account A2, qos Q2, partition debug", "[runners.slurm]", "account = 'A2'",
                    "qos = 'Q2'", "max_jobs = 5", "max_poll_duration = '12h'", "drain_grace = '2m'",
                    "allow_commands = false", "poll_interval = '5s'"})
    EXPECT_NE(r.out.find(what), std::string::npos) << what << " missing in\n" << r.out;
  args.insert(args.end(), {"--json", "--dry-run"});
  r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto site = one_object(r)["siteConfig"].as_object();
  EXPECT_EQ(site["account"], "A2");
  EXPECT_EQ(site["qos"], "Q2");
  EXPECT_EQ(site["partition"], "debug");
  EXPECT_EQ(site["launchDir"], json::value((root_ / "jobs").native()));
  EXPECT_EQ(site["profilesOnly"], true);
  EXPECT_EQ(site["maxJobs"], 5);
  EXPECT_EQ(site["maxPollDuration"], "12h");
  EXPECT_EQ(site["drainGrace"], "2m");
  EXPECT_EQ(site["fragmentKeys"], json::array{"runners.slurm.poll_interval"});
  EXPECT_FALSE(fs::exists(root_ / "jobs"));
  EXPECT_TRUE(home_untouched());

  std::ofstream(root_ / "site.toml", std::ios::trunc) << "[runners.slurm]\naccount = \"B\"\n";
  r = run(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("runners.slurm.account conflicts with --account"), std::string::npos) << r.err;
  EXPECT_TRUE(home_untouched());
}

TEST_F(InstallCli, BadOptionsFailClearlyAndLeaveNothing) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  auto with = [&](std::vector<std::string> extra) {
    auto a = install_args();
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::vector<Case> cases{
      {{"install", "--token-file", token_file_.native()}, "--server"},
      {{"install", "--server", server_, "--token-file", (root_ / "missing").native()},
       "token file " + (root_ / "missing").native() + ": No such file"},
      {{"install", "--server", server_}, "--token-stdin"},
      {with({"--token-stdin"}), "--token-stdin"},
      {with({"--slurm", "--slurm-partition", "debug\n#SBATCH --uid=0"}), "--slurm-partition"},
      {with({"--slurm", "--slurm-partition", "a;rm -rf /"}), "--slurm-partition"},
      {with({"--slurm", "--slurm-account", "$(id)"}), "--slurm-account"},
      {with({"--slurm", "--slurm-time", "10", "--slurm-signal-lead", "900"}), "--slurm-signal-lead"},
      {with({"--slurm-partition", "debug"}), "--slurm"},
      {with({"--frobnicate"}), "frobnicate"},
      {with({"--tag", "novalue"}), "--tag"},
      {with({"--label", "bad label"}), "--label"},
      {{"install", "--server", "https://user:pw@cp.example.org", "--token-file", token_file_.native()}, "credentials"},
  };
  ::chmod(write_token("unreadable", "x").c_str(), 0);
  if (::geteuid() != 0)  // root reads mode-000 files anyway
    cases.push_back({{"install", "--server", server_, "--token-file", (root_ / "unreadable").native()}, "token file"});
  for (const auto& c : cases) {
    auto r = run(c.args);
    std::string shown;
    for (const auto& a : c.args) shown += a + " ";
    EXPECT_NE(r.exit_code, 0) << shown;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << shown << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.find("cli-secret-token"), std::string::npos) << r.err;
    EXPECT_TRUE(home_untouched()) << shown;
  }
}

TEST_F(InstallCli, JsonErrorIsOneObject) {
  auto args = install_args();
  args.insert(args.end(), {"--slurm", "--slurm-qos", "a b", "--json"});
  auto r = run(args);
  EXPECT_EQ(r.exit_code, 1);
  auto o = one_object(r);
  ASSERT_TRUE(o.contains("error") && o["error"].is_object()) << r.out;
  EXPECT_EQ(o["error"].at("code"), "installFailed") << r.out;
  EXPECT_NE(std::string(o["error"].at("message").as_string()).find("--slurm-qos"), std::string::npos);
}

TEST_F(InstallCli, InstallStartsAPrivateDaemonThatKillStops) {
  auto args = install_args();
  args.emplace_back("--json");
  auto r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto o = one_object(r);
  std::string id(o["launchId"].as_string());
  int pid = static_cast<int>(o["pid"].as_int64());
  fs::path dir = state_dir() / "launches" / id;
  fs::path log = home_ / ".local" / "share" / ("nymph-" + id + ".log");
  EXPECT_EQ(o["launchDir"].as_string(), dir.native());
  EXPECT_EQ(o["logPath"].as_string(), log.native());
  EXPECT_EQ(mode_of(dir), 0700u);
  for (auto f : {"config.toml", "token", "launch.json"}) EXPECT_EQ(mode_of(dir / f), 0600u) << f;
  EXPECT_EQ(mode_of(log), 0600u);
  EXPECT_EQ(read_file(dir / "token"), "cli-secret-token-7f3a9c");
  EXPECT_TRUE(running(pid));
  EXPECT_EQ(all_cmdlines().find("cli-secret-token"), std::string::npos);
  EXPECT_EQ(read_file("/proc/" + std::to_string(pid) + "/environ").find("cli-secret-token"), std::string::npos);

  auto list = run({"launches", "--json"});
  ASSERT_EQ(list.exit_code, 0);
  auto launches = one_object(list)["launches"].as_array();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].at("state"), "running");
  EXPECT_EQ(launches[0].at("pid"), pid);

  auto prune = run({"launches", "prune"});
  EXPECT_EQ(prune.exit_code, 0);
  EXPECT_NE(prune.out.find("kept"), std::string::npos) << prune.out;
  EXPECT_TRUE(fs::exists(dir));

  auto k = run({"kill", "cli-" + id});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_NE(k.out.find("exitReason: sigterm"), std::string::npos) << k.out;
  EXPECT_FALSE(running(pid));
  auto after = one_object(run({"launches", "--json"}))["launches"].as_array();
  EXPECT_EQ(after[0].at("state"), "exited");
  EXPECT_EQ(after[0].at("exitReason"), "sigterm");

  prune = run({"launches", "prune", "--json"});
  EXPECT_EQ(prune.exit_code, 0) << prune.err;
  EXPECT_EQ(one_object(prune)["removed"].as_array().size(), 1u);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(log));
}

TEST_F(InstallCli, TwoInstallsKeepSeparateLabelsAndTokens) {
  // Two managers at once need two identities: one cluster each.
  auto first = install_args();
  first.insert(first.end(), {"--json", "--cluster", "one"});
  auto a = run(first);
  auto b = run({"install", "--server", server_, "--token-stdin", "--label", "cli", "--json", "--cluster", "two"},
               "second-token-99\n");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto oa = one_object(a), ob = one_object(b);
  EXPECT_NE(oa["launchId"], ob["launchId"]);
  EXPECT_NE(oa["workerLabel"], ob["workerLabel"]);
  fs::path da(std::string(oa["launchDir"].as_string())), db(std::string(ob["launchDir"].as_string()));
  EXPECT_EQ(read_file(da / "token"), "cli-secret-token-7f3a9c");
  EXPECT_EQ(read_file(db / "token"), "second-token-99");
  EXPECT_NE(read_file(da / "config.toml").find(std::string(oa["workerLabel"].as_string())), std::string::npos);
  EXPECT_NE(read_file(db / "config.toml").find(std::string(ob["workerLabel"].as_string())), std::string::npos);
  auto list = one_object(run({"launches", "--json"}))["launches"].as_array();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].at("state"), "running") << "the second install did not stop the first";
  EXPECT_EQ(list[1].at("state"), "running");
  for (const auto& o : {oa, ob}) {
    auto k = run({"kill", std::string(o.at("launchId").as_string()), "--json"});
    EXPECT_EQ(k.exit_code, 0) << k.err;
    EXPECT_EQ(one_object(k)["exitReason"], "sigterm");
  }
}

TEST_F(InstallCli, KillAndLaunchesOnNothing) {
  auto list = run({"launches"});
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_EQ(list.out, "no launches\n");
  auto k = run({"kill", "01ARZ3NDEKTSV4RRFFQ69G5FAV"});
  EXPECT_EQ(k.exit_code, 3) << "notFound (docs/lakeshore.md)";
  EXPECT_NE(k.err.find("no launch with ID, worker label or worker ID"), std::string::npos) << k.err;
  EXPECT_EQ(k.out, "");
  auto kj = run({"kill", "wrk_01ARZ3NDEKTSV4RRFFQ69G5FAV", "--json"});
  EXPECT_EQ(kj.exit_code, 3);
  EXPECT_EQ(one_object(kj)["error"].at("code"), "notFound") << kj.out;
  EXPECT_NE(run({"kill"}).exit_code, 0);
}

TEST_F(InstallCli, SecondManagerOfTheIdentityIsRefusedAndReplaceTakesOver) {
  auto args = install_args();
  args.insert(args.end(), {"--json", "--cluster", "lab"});
  auto first = run(args);
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  auto a = one_object(first);
  EXPECT_EQ(a["identity"].as_string().ends_with("@lab"), true) << first.out;
  int pid = static_cast<int>(a["pid"].as_int64());

  auto refused = run(args);
  EXPECT_EQ(refused.exit_code, 1);
  auto e = one_object(refused);
  ASSERT_TRUE(e.contains("error")) << refused.out;
  ASSERT_TRUE(e["error"].is_object()) << refused.out;
  std::string message(e["error"].at("message").as_string());
  EXPECT_NE(message.find("is already running: host "), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(pid) + " launch " + std::string(a["launchId"].as_string())),
            std::string::npos)
      << message;
  EXPECT_EQ(one_object(run({"launches", "--json"}))["launches"].as_array().size(), 1u) << "nothing written";

  args.emplace_back("--replace");
  auto replaced = run(args);
  ASSERT_EQ(replaced.exit_code, 0) << replaced.err << replaced.out;
  EXPECT_FALSE(running(pid));
  auto list = one_object(run({"launches", "--json"}))["launches"].as_array();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].at("state"), "exited");
  EXPECT_EQ(list[0].at("exitReason"), "sigterm");
  EXPECT_EQ(list[1].at("state"), "running");
}
