// Install planning: options -> paths, config.toml, daemon command line, sbatch script; every bad value rejected.
#include <gtest/gtest.h>

#include <toml++/toml.h>

#include <functional>

#include "agent/config.hpp"

#include "installer/plan.hpp"
#include "installer/slurm_values.hpp"

using namespace nymph::installer;

namespace {

const nymph::Ulid kId = nymph::parse_ulid("01ARZ3NDEKTSV4RRFFQ69G5FAV").value();

HostFacts host() { return {.home = "/home/ada", .hostname = "login1", .nymph_exe = "/opt/nymph/bin/nymph"}; }

InstallOptions base() {
  InstallOptions o;
  o.server = "https://cp.example.org";
  o.token_file = "/home/ada/tok";
  return o;
}

InstallOptions slurm_base() {
  auto o = base();
  o.slurm = true;
  o.slurm_partition = "debug";
  o.slurm_time = "1:00:00";
  o.slurm_account = "proj-1";
  o.slurm_qos = "normal";
  return o;
}

InstallPlan plan_ok(const InstallOptions& o, const HostFacts& h = host()) {
  auto p = make_install_plan(o, h, kId);
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  return p ? *p : InstallPlan{};
}

std::string plan_error(const InstallOptions& o, const HostFacts& h = host()) {
  auto p = make_install_plan(o, h, kId);
  EXPECT_FALSE(p) << "accepted";
  return p ? "" : p.error().message;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(InstallPlan, DefaultLocalPlan) {
  auto p = plan_ok(base());
  EXPECT_EQ(p.launch_id, "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(p.worker_label, "login1-01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(p.mode, LaunchMode::local);
  EXPECT_EQ(p.state_dir, "/home/ada/.local/share/nymph");
  EXPECT_EQ(p.launch_dir, "/home/ada/.local/share/nymph/launches/01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(p.config_path, p.launch_dir / "config.toml");
  EXPECT_EQ(p.log_path, "/home/ada/.local/share/nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV.log");
  EXPECT_EQ(p.daemon_argv, (std::vector<std::string>{"/opt/nymph/bin/nymph", "run", "--config",
                                                      p.config_path.native()}));
  EXPECT_TRUE(p.sbatch_script.empty());
  EXPECT_TRUE(p.job_name.empty());
}

TEST(InstallPlan, ConfigIsSectionedTomlWithTheLaunchIdentity) {
  auto o = base();
  o.tags = {"site=lab", "gpu=a100"};
  o.idle_exit = "600";
  auto p = plan_ok(o);
  auto t = toml::parse(p.config_toml);
  EXPECT_EQ(t["server"]["url"].value_or(std::string{}), "https://cp.example.org");
  EXPECT_EQ(t["server"]["token_file"].value_or(std::string{}), "token");
  EXPECT_EQ(t["worker"]["label"].value_or(std::string{}), "login1-01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(t["worker"]["launch_id"].value_or(std::string{}), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(t["worker"]["idle_exit"].value_or(std::string{}), "10m");
  EXPECT_EQ(t["worker"]["tags"]["site"].value_or(std::string{}), "lab");
  EXPECT_EQ(t["worker"]["tags"]["gpu"].value_or(std::string{}), "a100");
  EXPECT_EQ(t["log"]["level"].value_or(std::string{}), "info");
  for (auto section : {"[server]\n", "[worker]\n", "[worker.tags]\n", "[log]\n"})
    EXPECT_TRUE(contains(p.config_toml, section)) << p.config_toml;
}

TEST(InstallPlan, NoIdleExitOrTagsUnlessGiven) {
  auto t = toml::parse(plan_ok(base()).config_toml);
  EXPECT_FALSE(t["worker"]["idle_exit"]);
  EXPECT_FALSE(t["worker"]["tags"]);
}

TEST(InstallPlan, TagValuesAreQuotedNotPasted) {
  auto o = base();
  o.tags = {"note=a \"b\" \\ [server] url = 'x'"};
  auto p = plan_ok(o);
  auto t = toml::parse(p.config_toml);
  EXPECT_EQ(t["worker"]["tags"]["note"].value_or(std::string{}), "a \"b\" \\ [server] url = 'x'");
  EXPECT_EQ(t["server"]["url"].value_or(std::string{}), "https://cp.example.org");
}

TEST(InstallPlan, BadTagsRejected) {
  for (std::string tag : {"novalue", "=v", "bad key=v", "k\n=v", "k=line\nbreak", "k=\x7f", "k.[x]=v"}) {
    auto o = base();
    o.tags = {tag};
    EXPECT_TRUE(contains(plan_error(o), "--tag")) << tag;
  }
  auto o = base();
  o.tags = {"a=1", "a=2"};
  EXPECT_TRUE(contains(plan_error(o), "given twice"));
  o.tags = {"a="};
  EXPECT_TRUE(make_install_plan(o, host(), kId)) << "an empty value is allowed";
}

TEST(InstallPlan, LabelRules) {
  auto o = base();
  o.label = "gpu-box_1.a";
  EXPECT_EQ(plan_ok(o).worker_label, "gpu-box_1.a-01ARZ3NDEKTSV4RRFFQ69G5FAV");
  for (const std::string& bad : std::vector<std::string>{"-x", "a b", "a/b", "x\ny", std::string(65, 'a'), "é"}) {
    o.label = bad;
    EXPECT_TRUE(contains(plan_error(o), "--label")) << bad;
  }
  auto h = host();
  h.hostname = "";
  EXPECT_TRUE(contains(plan_error(base(), h), "pass --label"));
}

TEST(InstallPlan, ServerRules) {
  auto o = base();
  for (std::string good : {"https://cp.example.org", "https://cp.example.org:8443/prefix", "http://127.0.0.1:8080",
                           "http://localhost:1234", "http://[::1]:80"}) {
    o.server = good;
    EXPECT_TRUE(make_install_plan(o, host(), kId)) << good;
  }
  o.server = "";
  EXPECT_TRUE(contains(plan_error(o), "--server is required"));
  for (std::string bad : {"cp.example.org", "ftp://cp.example.org", "http://cp.example.org", "https://",
                          "https://user:pw@cp.example.org", "https://cp.example.org/?a=b",
                          "https://cp.example.org\n[server]", "https://cp example.org"}) {
    o.server = bad;
    EXPECT_TRUE(contains(plan_error(o), "--server")) << bad;
  }
}

TEST(InstallPlan, ServerUsesTheOneParsedUrlRule) {
  auto o = base();
  for (std::string bad : {"http://127.attacker.example:8470", "http://127.0.0.1.example.com:8470",
                          "http://10.0.0.5:8470", "https://cp.example.org:99999"}) {
    o.server = bad;
    auto message = plan_error(o);
    EXPECT_TRUE(contains(message, "--server")) << message;
    EXPECT_TRUE(contains(message, bad)) << message;
  }
  o.server = "http://127.1.2.3:1";
  EXPECT_TRUE(make_install_plan(o, host(), kId));
}

TEST(InstallPlan, StateDirMovesTheLaunchButNotTheLog) {
  auto o = base();
  o.state_dir = "/scratch/ada/nymph/";
  auto p = plan_ok(o);
  EXPECT_EQ(p.launch_dir, "/scratch/ada/nymph/launches/01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(p.log_path, "/home/ada/.local/share/nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV.log");
  o.state_dir = "relative/dir";
  EXPECT_TRUE(contains(plan_error(o), "absolute"));
  o.state_dir = "/tmp/a\nb";
  EXPECT_TRUE(contains(plan_error(o), "control characters"));
}

TEST(InstallPlan, IdleExit) {
  auto o = base();
  o.idle_exit = "90s";
  EXPECT_EQ(toml::parse(plan_ok(o).config_toml)["worker"]["idle_exit"].value_or(std::string{}), "90s");
  for (std::string bad : {"0s", "soon", "-5m", "5 m"}) {
    o.idle_exit = bad;
    EXPECT_TRUE(contains(plan_error(o), "--idle-exit")) << bad;
  }
}

TEST(InstallPlan, SlurmScript) {
  auto o = slurm_base();
  o.slurm_signal_lead = 300;
  auto p = plan_ok(o);
  EXPECT_EQ(p.mode, LaunchMode::slurm);
  EXPECT_EQ(p.job_name, "lakeshore-nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV");
  const std::string expected =
      "#!/bin/sh\n"
      "#SBATCH --job-name=lakeshore-nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV\n"
      "#SBATCH --partition=debug\n"
      "#SBATCH --time=1:00:00\n"
      "#SBATCH --account=proj-1\n"
      "#SBATCH --qos=normal\n"
      "#SBATCH --output=/home/ada/.local/share/nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV.log\n"
      "#SBATCH --open-mode=append\n"
      "#SBATCH --chdir=/home/ada/.local/share/nymph/launches/01ARZ3NDEKTSV4RRFFQ69G5FAV\n"
      "#SBATCH --signal=B:USR1@300\n"
      "# nymph launch 01ARZ3NDEKTSV4RRFFQ69G5FAV (worker login1-01ARZ3NDEKTSV4RRFFQ69G5FAV)\n"
      "exec /opt/nymph/bin/nymph run --config "
      "/home/ada/.local/share/nymph/launches/01ARZ3NDEKTSV4RRFFQ69G5FAV/config.toml\n";
  EXPECT_EQ(p.sbatch_script, expected);
}

TEST(InstallPlan, SlurmOptionalDirectivesLeftOut) {
  auto o = base();
  o.slurm = true;
  auto p = plan_ok(o);
  EXPECT_FALSE(contains(p.sbatch_script, "--partition"));
  EXPECT_FALSE(contains(p.sbatch_script, "--time"));
  EXPECT_TRUE(contains(p.sbatch_script, "#SBATCH --signal=B:USR1@120\n"));
}

TEST(InstallPlan, SlurmExecutableIsShellQuoted) {
  auto h = host();
  h.nymph_exe = "/opt/it's mine/nymph";
  auto p = plan_ok(slurm_base(), h);
  EXPECT_TRUE(contains(p.sbatch_script, "exec '/opt/it'\\''s mine/nymph' run --config ")) << p.sbatch_script;
}

TEST(InstallPlan, HostileSlurmValuesRejected) {
  for (const std::string& bad : std::vector<std::string>{"debug\n#SBATCH --uid=0", "a;rm -rf /", "$(reboot)", "a b",
                                                         "debug,", ",debug", "a'b", "`id`", std::string(129, 'p')}) {
    auto o = slurm_base();
    o.slurm_partition = bad;
    auto e = plan_error(o);
    EXPECT_TRUE(e.starts_with("--slurm-partition: invalid value")) << bad << " -> " << e;
    EXPECT_FALSE(contains(e, "\n")) << "the message stays on one line: " << e;
  }
  auto o = slurm_base();
  o.slurm_partition = "debug,long";
  EXPECT_TRUE(contains(plan_ok(o).sbatch_script, "--partition=debug,long\n"));
  for (std::string bad : {"acct\n#SBATCH --uid=0", "a,b", "a;b", ""}) {
    auto a = slurm_base();
    a.slurm_account = bad;
    if (!bad.empty()) {
      EXPECT_TRUE(contains(plan_error(a), "--slurm-account")) << bad;
    }
    auto q = slurm_base();
    q.slurm_qos = bad.empty() ? "q q" : bad;
    EXPECT_TRUE(contains(plan_error(q), "--slurm-qos")) << bad;
  }
}

TEST(InstallPlan, SlurmTimeGrammar) {
  using std::chrono::seconds;
  auto t = [](std::string v) { return parse_slurm_time("--slurm-time", v); };
  EXPECT_EQ(t("30").value(), seconds(1800));
  EXPECT_EQ(t("30:15").value(), seconds(1815));
  EXPECT_EQ(t("2:00:00").value(), seconds(7200));
  EXPECT_EQ(t("1-0").value(), seconds(86400));
  EXPECT_EQ(t("1-2:30").value(), seconds(86400 + 9000));
  EXPECT_EQ(t("1-2:30:05").value(), seconds(86400 + 9005));
  // The Slurm runner's grammar: bounded fields after the first, a positive total, no INFINITE.
  for (std::string bad : {"INFINITE", "UNLIMITED", "1-24", "1:60", "1:00:60", "0:00", "", "0", "1h", "1:2:3:4",
                          "1-", "-1", "1--2", "a", "1-2:3:4:5", "1:", ":1", "1 ", "+5", "1\n#SBATCH"}) {
    EXPECT_FALSE(t(bad)) << bad;
  }
}

TEST(InstallPlan, SignalLeadMustFitTheWalltime) {
  auto o = slurm_base();
  o.slurm_time = "2";  // two minutes
  o.slurm_signal_lead = 120;
  EXPECT_TRUE(contains(plan_error(o), "must be shorter than --slurm-time"));
  o.slurm_signal_lead = 119;
  EXPECT_TRUE(make_install_plan(o, host(), kId));
  o.slurm_signal_lead = 0;
  EXPECT_TRUE(contains(plan_error(o), "--slurm-signal-lead"));
  o.slurm_signal_lead = 65536;
  o.slurm_time = "2-0";
  EXPECT_TRUE(contains(plan_error(o), "--slurm-signal-lead"));
}

TEST(InstallPlan, SlurmOptionsNeedSlurm) {
  auto o = base();
  o.slurm_partition = "debug";
  EXPECT_TRUE(contains(plan_error(o), "need --slurm"));
}

TEST(InstallPlan, SlurmPathsMustBeSbatchSafe) {
  auto h = host();
  h.home = "/home/ada lovelace";
  EXPECT_TRUE(make_install_plan(base(), h, kId)) << "a local launch copes with spaces";
  EXPECT_TRUE(contains(plan_error(slurm_base(), h), "#SBATCH"));
  h.home = "/home/ada%j";
  EXPECT_TRUE(contains(plan_error(slurm_base(), h), "#SBATCH"));
}

TEST(Token, CheckedAndTrimmed) {
  EXPECT_EQ(check_token("  abc.DEF-123_x\n", "stdin").value(), "abc.DEF-123_x");
  EXPECT_TRUE(contains(check_token(" \n", "stdin").error().message, "empty"));
  auto e = check_token("secret token", "/t");
  ASSERT_FALSE(e);
  EXPECT_FALSE(contains(e.error().message, "secret"));
  EXPECT_FALSE(check_token("a\x01" "b", "/t"));
  EXPECT_FALSE(check_token(std::string(4097, 'a'), "/t"));
  EXPECT_TRUE(check_token(std::string(4096, 'a'), "/t"));
}

TEST(ShellQuote, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(shell_quote("/usr/bin/nymph"), "/usr/bin/nymph");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(x);`y`|&>"), "'$(x);`y`|&>'");
  EXPECT_EQ(shell_join({"tail", "-f", "/a b/c"}), "tail -f '/a b/c'");
}

TEST(InstallPlan, TrainingProfilesGoIntoTheConfig) {
  auto o = base();
  o.training_profiles = {"smoke=/opt/nymph/profiles/slurm-smoke.sh", "fit.v2=/opt/p/fit.sh"};
  auto p = plan_ok(o);
  auto config = toml::parse(p.config_toml);
  EXPECT_EQ(config["profiles"]["smoke"].value<std::string>(), "/opt/nymph/profiles/slurm-smoke.sh");
  EXPECT_EQ(config["profiles"]["fit.v2"].value<std::string>(), "/opt/p/fit.sh");
  EXPECT_FALSE(contains(plan_ok(base()).config_toml, "[profiles]"));
}

TEST(InstallPlan, BadTrainingProfilesAreRefusedNamingTheOption) {
  for (const std::string& bad : std::vector<std::string>{"smoke", "=/abs", "smoke=", "smoke=relative/x.sh", "-x=/abs", "a b=/abs",
                          "smoke=/abs\n#x", std::string(65, 'n') + "=/abs"}) {
    auto o = base();
    o.training_profiles = {bad};
    EXPECT_TRUE(contains(plan_error(o), "--training-profile")) << bad;
  }
  auto o = base();
  o.training_profiles = {"smoke=/a.sh", "smoke=/b.sh"};
  EXPECT_TRUE(contains(plan_error(o), "given twice"));
}

TEST(InstallPlan, LocalLaunchIsAManagerOfTheIdentity) {
  auto h = host();
  h.cluster = "nymphlab";
  h.user = "ada";
  auto p = plan_ok(base(), h);
  EXPECT_EQ(p.identity, "ada@nymphlab");
  EXPECT_EQ(p.manager_state_dir, "/home/ada/.local/share/nymph/managers/nymphlab");
  auto t = toml::parse(p.config_toml);
  EXPECT_EQ(t["manager"]["cluster"].value_or(std::string{}), "nymphlab");
  EXPECT_EQ(t["manager"]["state_dir"].value_or(std::string{}), "/home/ada/.local/share/nymph/managers/nymphlab");

  h.data_home = "/data/ada";  // XDG_DATA_HOME, as `nymph run` resolves its default
  EXPECT_EQ(plan_ok(base(), h).manager_state_dir, "/data/ada/nymph/managers/nymphlab");
  auto o = base();
  o.state_dir = "/scratch/ada/nymph";  // --state-dir wins
  o.cluster = "other-1";               // --cluster wins over scontrol
  p = plan_ok(o, h);
  EXPECT_EQ(p.manager_state_dir, "/scratch/ada/nymph/managers/other-1");
  EXPECT_EQ(p.identity, "ada@other-1");
  h.cluster = "";  // no ClusterName: the host name
  EXPECT_EQ(plan_ok(base(), h).identity, "ada@login1");
}

TEST(InstallPlan, ReplacePassesThroughAndManagerOptionsNeedALocalLaunch) {
  auto o = base();
  o.replace = true;
  EXPECT_EQ(plan_ok(o).daemon_argv.back(), "--replace");
  auto s = slurm_base();
  EXPECT_FALSE(contains(plan_ok(s).config_toml, "[manager]"));
  s.replace = true;
  EXPECT_TRUE(contains(plan_error(s), "--replace"));
  s = slurm_base();
  s.cluster = "lab";
  EXPECT_TRUE(contains(plan_error(s), "--cluster"));
  o = base();
  o.cluster = "../etc";
  EXPECT_TRUE(contains(plan_error(o), "--cluster '../etc'"));
}

// Site configuration (issue 16): every option becomes the config key `nymph run` reads, checked with its grammar.
namespace {

InstallOptions site_base() {
  auto o = base();
  o.account = "A2";
  o.qos = "Q2";
  o.partition = "debug,gpu";
  o.launch_dir = "/scratch/ada/nymph-jobs/";
  o.training_profiles = {"smoke=/opt/profiles/smoke.sh"};
  o.profiles_only = true;
  o.max_jobs = 7;
  o.max_poll_duration = "2h";
  o.drain_grace = "90";
  return o;
}

nymph::Result<InstallPlan> with_fragment(const InstallOptions& o, std::string text) {
  return make_install_plan(o, host(), kId, ConfigFragment{"/etc/nymph/site.toml", std::move(text)});
}

}  // namespace

TEST(InstallSite, OptionsBecomeTheKeysNymphRunReads) {
  auto p = plan_ok(site_base());
  auto c = nymph::agent::parse_config(p.config_toml, "config.toml");
  ASSERT_TRUE(c) << c.error().message << "\n" << p.config_toml;
  EXPECT_EQ(c->slurm.account, "A2");
  EXPECT_EQ(c->slurm.qos, "Q2");
  EXPECT_EQ(c->slurm.partition, "debug,gpu");
  EXPECT_EQ(c->slurm.launch_dir, "/scratch/ada/nymph-jobs/");
  EXPECT_EQ(c->slurm.max_jobs, 7);
  EXPECT_EQ(c->slurm.max_poll_duration, std::chrono::hours(2));
  EXPECT_EQ(c->worker.drain_grace, std::chrono::seconds(90));
  EXPECT_FALSE(c->process.allow_commands) << "--profiles-only";
  ASSERT_EQ(c->profiles.size(), 1u);
  EXPECT_EQ(c->profiles[0].script, "/opt/profiles/smoke.sh");
  EXPECT_EQ(p.site.drain_grace, "90s") << "normalised";
  EXPECT_EQ(p.site.max_poll_duration, "2h");
  for (auto section : {"[server]\n", "[worker]\n", "[profiles]\n", "[runners.process]\n", "[runners.slurm]\n",
                       "[manager]\n", "[log]\n"})
    EXPECT_TRUE(contains(p.config_toml, section)) << section << "\n" << p.config_toml;
  EXPECT_LT(p.config_toml.find("[server]"), p.config_toml.find("[runners.slurm]")) << "a readable order";
}

TEST(InstallSite, NothingSetWritesNoRunnerSection) {
  auto p = plan_ok(base());
  EXPECT_FALSE(contains(p.config_toml, "[runners")) << p.config_toml;
  EXPECT_FALSE(p.site.max_jobs);
  EXPECT_TRUE(p.site.account.empty());
}

TEST(InstallSite, ValuesAreCheckedWithTheRunnerGrammarNamingTheOption) {
  struct Case {
    std::function<void(InstallOptions&)> set;
    std::string says;
  };
  std::vector<Case> cases{
      {[](auto& o) { o.account = "a b"; }, "--account: invalid value"},
      {[](auto& o) { o.account = "-A"; }, "--account"},
      {[](auto& o) { o.qos = "q\n#SBATCH --wrap=id"; }, "--qos: invalid value"},
      {[](auto& o) { o.partition = "debug;rm"; }, "--partition: invalid value"},
      {[](auto& o) { o.launch_dir = "jobs"; }, "--launch-dir 'jobs': must be an absolute path"},
      {[](auto& o) { o.launch_dir = "/scratch/my jobs"; },
       "--launch-dir '/scratch/my jobs': job directories go into sbatch"},
      {[](auto& o) { o.launch_dir = "/scratch/%u"; }, "--launch-dir"},
      {[](auto& o) { o.max_jobs = 0; }, "--max-jobs 0: expected 1 to 100000"},
      {[](auto& o) { o.max_jobs = 100001; }, "--max-jobs 100001"},
      {[](auto& o) { o.max_poll_duration = "forever"; }, "--max-poll-duration 'forever': invalid duration"},
      {[](auto& o) { o.max_poll_duration = "0s"; }, "--max-poll-duration '0s': must be longer than zero"},
      {[](auto& o) { o.drain_grace = "-5s"; }, "--drain-grace '-5s'"},
  };
  for (const auto& c : cases) {
    auto o = site_base();
    c.set(o);
    auto message = plan_error(o);
    EXPECT_TRUE(contains(message, c.says)) << c.says << " | " << message;
  }
}

TEST(InstallSite, ProfilesOnlyWithoutAnyProfileIsRefused) {
  auto o = base();
  o.profiles_only = true;
  EXPECT_TRUE(contains(plan_error(o), "--profiles-only: this worker would have no training profile"));
  EXPECT_TRUE(with_fragment(o, "[profiles]\nsmoke = \"/opt/p/smoke.sh\"\n")) << "a fragment's profile counts";
}

TEST(InstallSite, ASlurmDaemonsAllocationUsesTheSiteAccountUnlessSlurmAccountIsGiven) {
  auto o = base();
  o.slurm = true;
  o.account = "A2";
  o.qos = "Q2";
  auto p = plan_ok(o);
  EXPECT_TRUE(contains(p.sbatch_script, "#SBATCH --account=A2\n")) << p.sbatch_script;
  EXPECT_TRUE(contains(p.sbatch_script, "#SBATCH --qos=Q2\n")) << p.sbatch_script;
  o.slurm_account = "alloc";
  EXPECT_TRUE(contains(plan_ok(o).sbatch_script, "#SBATCH --account=alloc\n"));
}

TEST(InstallFragment, IsMergedKeyByKey) {
  auto o = base();
  o.account = "A2";
  o.tags = {"site=lab"};
  auto p = with_fragment(o, R"(
[runners.slurm]
poll_interval = "5s"
sacct = "/opt/slurm/bin/sacct"
[worker.tags]
rack = "r1"
[profiles]
big = { script = "/opt/p/big.sh", parameters = ["message"] }
[log]
level = "debug"
)");
  ASSERT_TRUE(p) << p.error().message;
  auto c = nymph::agent::parse_config(p->config_toml, "config.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->slurm.account, "A2");
  EXPECT_EQ(c->slurm.poll_interval, std::chrono::seconds(5));
  EXPECT_EQ(c->slurm.sacct, "/opt/slurm/bin/sacct");
  EXPECT_EQ(c->worker.tags, (std::map<std::string, std::string>{{"rack", "r1"}, {"site", "lab"}}));
  ASSERT_EQ(c->profiles.size(), 1u);
  EXPECT_EQ(c->profiles[0].allowed_parameters, std::vector<std::string>{"message"});
  EXPECT_EQ(c->log.level, "debug") << "the installer's default log level may be changed";
  EXPECT_EQ(p->site.config_fragment, "/etc/nymph/site.toml");
  EXPECT_EQ(p->site.fragment_keys,
            (std::vector<std::string>{"log.level", "profiles.big.parameters", "profiles.big.script",
                                      "runners.slurm.poll_interval", "runners.slurm.sacct", "worker.tags.rack"}));
  ASSERT_EQ(p->profiles.size(), 1u) << "the fragment's profiles are the launch's profiles (checked at install)";
  EXPECT_EQ(p->profiles[0].first, "big");
  EXPECT_TRUE(contains(p->config_toml, "# Merged with the site fragment /etc/nymph/site.toml"));
}

TEST(InstallFragment, AKeyAnOptionSetsIsAConflict) {
  struct Case {
    std::string fragment;
    std::string says;
  };
  auto o = base();
  o.account = "A2";
  o.tags = {"site=lab"};
  o.training_profiles = {"smoke=/opt/p/smoke.sh"};
  o.drain_grace = "30s";
  for (const auto& c : std::vector<Case>{
           {"[runners.slurm]\naccount = \"B\"\n", "site.toml:2: runners.slurm.account conflicts with --account"},
           {"[worker]\nlabel = \"x\"\n", "worker.label conflicts with --label"},
           {"[worker]\ndrain_grace = \"1s\"\n", "worker.drain_grace conflicts with --drain-grace"},
           {"[worker.tags]\nsite = \"other\"\n", "worker.tags.site conflicts with --tag"},
           {"[profiles]\nsmoke = \"/opt/p/other.sh\"\n", "profiles.smoke conflicts with --training-profile"},
           {"[server]\nurl = \"https://evil.example.org\"\n", "server.url conflicts with --server"},
           {"[server]\ntoken_file = \"/tmp/t\"\n", "server.token_file conflicts with --token-file"},
           {"[manager]\nstate_dir = \"/tmp/m\"\n", "manager.state_dir conflicts with --state-dir"},
           {"worker = \"x\"\n", "worker conflicts with"},
       }) {
    auto p = with_fragment(o, c.fragment);
    ASSERT_FALSE(p) << c.fragment;
    EXPECT_TRUE(contains(p.error().message, c.says)) << c.says << " | " << p.error().message;
    EXPECT_TRUE(contains(p.error().message, "--config-fragment /etc/nymph/site.toml")) << p.error().message;
  }
}

TEST(InstallFragment, TheMergedResultMustPassTheConfigParser) {
  struct Case {
    std::string fragment;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{
           {"[runners.slurm]\npoll_interval = \"never\"\n", "runners.slurm.poll_interval: invalid duration"},
           {"[runners.slurm]\nqos = \"a b\"\n", "runners.slurm.qos: invalid value"},
           {"[worker]\nmax_proces_jobs = 3\n", "unknown key worker.max_proces_jobs"},
           {"[sever]\nurl = \"x\"\n", "unknown key sever"},
           {"[profiles]\nrel = \"smoke.sh\"\n", "profiles.rel: script path must be absolute"},
           {"[runners.slurm\n", "site.toml:1: invalid TOML"},
       }) {
    auto p = with_fragment(base(), c.fragment);
    ASSERT_FALSE(p) << c.fragment;
    EXPECT_TRUE(contains(p.error().message, c.says)) << c.says << " | " << p.error().message;
  }
}

TEST(InstallFragment, ValuesKeepTheirTypeAndAreQuotedByToml) {
  auto p = with_fragment(base(), "[worker.tags]\nodd = \"a'b\\\"c\\\\d\\n[log]\"\n");
  ASSERT_TRUE(p) << p.error().message;
  auto t = toml::parse(p->config_toml);
  EXPECT_EQ(t["worker"]["tags"]["odd"].value_or(std::string{}), "a'b\"c\\d\n[log]");
}

// Issue 18: a kept launch writes [chain] (read back by `nymph run`'s parser), the daemon's own walltime lead equal
// to Slurm's signal lead, and a script that passes each generation its number.
TEST(InstallKeep, AKeptLaunchWritesItsChainAndAScriptThatTakesTheGeneration) {
  auto o = slurm_base();
  o.keep = true;
  o.keep_min = 2;
  o.keep_max = 5;
  o.keep_idle = "10m";
  o.slurm_signal_lead = 90;
  auto p = plan_ok(o);
  EXPECT_TRUE(p.keep);
  EXPECT_EQ(p.chain_script, p.launch_dir / "chain.sbatch");
  auto config = nymph::agent::parse_config(p.config_toml, "config.toml");
  ASSERT_TRUE(config) << config.error().message << "\n" << p.config_toml;
  EXPECT_TRUE(config->chain.keep);
  EXPECT_EQ(config->chain.script, "chain.sbatch");
  EXPECT_EQ(config->chain.min_generations, 2);
  EXPECT_EQ(config->chain.max_generations, 5);
  EXPECT_EQ(config->chain.idle_end, std::chrono::minutes(10));
  EXPECT_EQ(config->worker.walltime_lead, std::chrono::seconds(90));
  EXPECT_TRUE(contains(p.sbatch_script, " --generation \"${1:-1}\"\n")) << p.sbatch_script;
  EXPECT_TRUE(contains(p.sbatch_script, "#SBATCH --job-name=lakeshore-nymph-01ARZ3NDEKTSV4RRFFQ69G5FAV")) << p.sbatch_script;
  // Without --keep: no [chain], the same lead, no generation argument.
  auto single = plan_ok(slurm_base());
  EXPECT_FALSE(single.keep);
  EXPECT_FALSE(nymph::agent::parse_config(single.config_toml, "c")->chain.keep);
  EXPECT_EQ(nymph::agent::parse_config(single.config_toml, "c")->worker.walltime_lead, std::chrono::seconds(120));
  EXPECT_FALSE(contains(single.sbatch_script, "--generation"));
}

TEST(InstallKeep, KeepNeedsASlurmLaunchWithAWalltimeAndSaneBounds) {
  auto o = base();
  o.keep = true;
  EXPECT_TRUE(contains(plan_error(o), "--keep needs --slurm"));
  auto untimed = slurm_base();
  untimed.slurm_time.clear();
  untimed.keep = true;
  EXPECT_TRUE(contains(plan_error(untimed), "--keep needs --slurm-time"));
  auto bounds = slurm_base();
  bounds.keep = true;
  bounds.keep_min = 3;
  bounds.keep_max = 2;
  EXPECT_TRUE(contains(plan_error(bounds), "--keep-max 2 is below --keep-min 3"));
  bounds.keep_max = 0;
  EXPECT_TRUE(plan_ok(bounds).keep) << "0: no limit";
  bounds.keep_idle = "soon";
  EXPECT_TRUE(contains(plan_error(bounds), "--keep-idle 'soon'"));
  auto loose = slurm_base();
  loose.keep_max = 4;
  EXPECT_TRUE(contains(plan_error(loose), "need --keep"));
}
