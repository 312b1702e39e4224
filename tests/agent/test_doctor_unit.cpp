// nymph doctor's pure pieces: logind parsing, verdict rules, HTTP dates, clock skew, disk, token, launch dir,
// rendering, the control-plane URL rule. No child processes, no sockets.
#include <gtest/gtest.h>

#include <algorithm>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "agent/doctor.hpp"
#include "tests/support/run_coro.hpp"
#include "tests/deploy/deploy_support.hpp"

namespace doctor = nymph::agent::doctor;
using doctor::Verdict;
using nymph::test::deploy::TempDir;
using nymph::test::deploy::write_file;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(DoctorLogind, ParsesKillUserProcessesOnlyInTheLoginSection) {
  EXPECT_EQ(doctor::parse_kill_user_processes("[Login]\n#KillUserProcesses=yes\n"), std::nullopt);
  EXPECT_EQ(doctor::parse_kill_user_processes("[Login]\nKillUserProcesses=yes\n"), true);
  EXPECT_EQ(doctor::parse_kill_user_processes("[Login]\n KillUserProcesses = off \n"), false);
  EXPECT_EQ(doctor::parse_kill_user_processes("[Other]\nKillUserProcesses=yes\n"), std::nullopt);
  EXPECT_EQ(doctor::parse_kill_user_processes("[Login]\nKillUserProcesses=1\nKillUserProcesses=no\n"), false);
  EXPECT_EQ(doctor::parse_kill_user_processes("[Login]\nKillUserProcesses=maybe\n"), std::nullopt);
}

TEST(DoctorLogind, DropInsOverrideTheMainFileInFileNameOrder) {
  TempDir root;
  fs::create_directories(root / "etc/systemd/logind.conf.d");
  fs::create_directories(root / "usr/lib/systemd/logind.conf.d");
  EXPECT_EQ(doctor::effective_kill_user_processes(root.path()), std::nullopt);
  write_file(root / "etc/systemd/logind.conf", "[Login]\nKillUserProcesses=no\n");
  EXPECT_EQ(doctor::effective_kill_user_processes(root.path()), false);
  write_file(root / "usr/lib/systemd/logind.conf.d/50-site.conf", "[Login]\nKillUserProcesses=yes\n");
  EXPECT_EQ(doctor::effective_kill_user_processes(root.path()), true);
  // Same file name in /etc replaces the /usr/lib one; a later name wins over an earlier one.
  write_file(root / "etc/systemd/logind.conf.d/50-site.conf", "[Login]\nKillUserProcesses=no\n");
  EXPECT_EQ(doctor::effective_kill_user_processes(root.path()), false);
  write_file(root / "usr/lib/systemd/logind.conf.d/90-late.conf", "[Login]\nKillUserProcesses=yes\n");
  EXPECT_EQ(doctor::effective_kill_user_processes(root.path()), true);
}

TEST(DoctorLogind, LogoutAndLingerVerdicts) {
  EXPECT_EQ(doctor::logout_check(std::nullopt, false, true).verdict, Verdict::ok);
  EXPECT_EQ(doctor::logout_check(false, false, true).verdict, Verdict::ok);
  auto killed = doctor::logout_check(true, false, true);
  EXPECT_EQ(killed.verdict, Verdict::fail);
  EXPECT_NE(killed.fix.find("enable-linger"), std::string::npos) << killed.fix;
  auto unit = doctor::logout_check(true, true, true);
  EXPECT_EQ(unit.verdict, Verdict::warn);
  EXPECT_NE(unit.fix.find("nymph.service"), std::string::npos) << unit.fix;
  EXPECT_EQ(doctor::logout_check(true, false, false).verdict, Verdict::ok);  // no systemd, no logind

  auto off = doctor::linger_check(false, true, "alice");
  EXPECT_EQ(off.verdict, Verdict::warn);
  EXPECT_NE(off.fix.find("loginctl enable-linger alice"), std::string::npos) << off.fix;
  EXPECT_EQ(doctor::linger_check(true, true, "alice").verdict, Verdict::ok);
}

TEST(DoctorClock, ParsesImfFixdateOnly) {
  auto t = doctor::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT");
  ASSERT_TRUE(t);
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 784111777);
  EXPECT_FALSE(doctor::parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"));
  EXPECT_FALSE(doctor::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT trailing"));
  EXPECT_FALSE(doctor::parse_http_date(""));
}

// Found by fuzz/text_values: a server Date in the year 5285 overflowed system_clock (undefined behaviour).
TEST(DoctorClock, DatesSystemClockCannotHoldAreNotDates) {
  EXPECT_FALSE(doctor::parse_http_date("Sun, 06 Nov 5285 08:49:37 GMT"));
  EXPECT_FALSE(doctor::parse_http_date("Sun, 06 Nov 1500 08:49:37 GMT"));
  EXPECT_TRUE(doctor::parse_http_date("Sun, 06 Nov 2261 08:49:37 GMT"));
}

TEST(DoctorClock, SkewVerdictsUseTheMiddleOfTheExchange) {
  auto server = *doctor::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT");
  auto date = std::optional<std::string>("Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(doctor::clock_skew_check(date, server - 1s, server + 1s).verdict, Verdict::ok);
  auto ahead = doctor::clock_skew_check(date, server + 20s, server + 20s);
  EXPECT_EQ(ahead.verdict, Verdict::warn);
  EXPECT_NE(ahead.detail.find("20s ahead"), std::string::npos) << ahead.detail;
  auto behind = doctor::clock_skew_check(date, server - 5min, server - 5min);
  EXPECT_EQ(behind.verdict, Verdict::fail);
  EXPECT_NE(behind.detail.find("behind"), std::string::npos) << behind.detail;
  EXPECT_EQ(doctor::clock_skew_check(std::nullopt, server, server).verdict, Verdict::warn);
  EXPECT_EQ(doctor::clock_skew_check(std::string("yesterday"), server, server).verdict, Verdict::warn);
}

TEST(DoctorDisk, Thresholds) {
  constexpr std::uintmax_t mib = 1024 * 1024;
  EXPECT_EQ(doctor::disk_check("/x", 50 * mib).verdict, Verdict::fail);
  EXPECT_EQ(doctor::disk_check("/x", 500 * mib).verdict, Verdict::warn);
  EXPECT_EQ(doctor::disk_check("/x", 5000 * mib).verdict, Verdict::ok);
  EXPECT_EQ(doctor::disk_check("/x", std::nullopt).verdict, Verdict::warn);
}

TEST(DoctorToken, FollowsReadTokenFileRules) {
  TempDir d;
  write_file(d / "ok", "secret-token\n", fs::perms(0600));
  write_file(d / "open", "secret-token\n", fs::perms(0644));
  EXPECT_EQ(doctor::token_check(d / "ok").verdict, Verdict::ok);
  auto open = doctor::token_check(d / "open");
  EXPECT_EQ(open.verdict, Verdict::fail);
  EXPECT_NE(open.detail.find("0644"), std::string::npos) << open.detail;
  EXPECT_EQ(open.detail.find("secret-token"), std::string::npos);
  EXPECT_EQ(doctor::token_check(d / "missing").verdict, Verdict::fail);
}

TEST(DoctorControl, AUrlTheRuleRefusesFailsBeforeAnyConnection) {
  // Boost.URL reads this as host 127.0.0.1 with path ".example.com:8470": a prefix check let it through
  // and the doctor then connected to 127.0.0.1:80.
  doctor::Inputs in;
  in.config.emplace();
  in.config->server.url = "http://127.0.0.1.example.com:8470";
  in.config->server.allow_insecure_http = true;
  boost::asio::io_context ioc;
  auto checks = nymph::test::run_coro(ioc, doctor::control_plane_checks(in));
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "control.url");
  EXPECT_EQ(checks[0].verdict, Verdict::fail);
  EXPECT_NE(checks[0].detail.find("http://127.0.0.1.example.com:8470"), std::string::npos) << checks[0].detail;
}

TEST(DoctorLaunchDir, WritableOrNot) {
  TempDir d;
  EXPECT_EQ(doctor::launch_dir_check(d.path()).verdict, Verdict::ok);
  EXPECT_TRUE(fs::is_empty(d.path()));  // the probe file is removed
  EXPECT_EQ(doctor::launch_dir_check(d / "missing").verdict, Verdict::fail);
  if (::geteuid() != 0) {  // root writes through mode 0500
    fs::create_directory(d / "ro");
    fs::permissions(d / "ro", fs::perms(0500));
    EXPECT_EQ(doctor::launch_dir_check(d / "ro").verdict, Verdict::fail);
  }
}

// A manager keeps its Slurm job directories in <[manager] state_dir>/slurm, not in its working directory (issue
// 15): that is what the check looks at, unless [runners.slurm] launch_dir says otherwise.
TEST(DoctorLaunchDir, AManagerChecksItsIdentitysStateDirectory) {
  TempDir work, state;
  doctor::Inputs in;
  in.config = nymph::agent::AgentConfig{};
  in.working_dir = work.path();
  in.manager_state_dir = state.path();
  auto c = doctor::launch_dir_for(in);
  EXPECT_EQ(c.verdict, Verdict::ok);
  EXPECT_NE(c.detail.find(state.path().string()), std::string::npos) << c.detail;
  EXPECT_EQ(c.detail.find(work.path().string()), std::string::npos) << c.detail;

  in.config->slurm.launch_dir = work.path();
  EXPECT_NE(doctor::launch_dir_for(in).detail.find(work.path().string()), std::string::npos);
}

TEST(DoctorReport, JsonAndTextRendering) {
  doctor::Report r;
  r.checks.push_back({"a.one", Verdict::ok, "fine", ""});
  r.checks.push_back({"b", Verdict::fail, "broken", "do this"});
  EXPECT_TRUE(r.failed());
  ASSERT_NE(r.find("b"), nullptr);
  auto j = doctor::to_json(r).as_object();
  EXPECT_EQ(j.at("ok"), false);
  ASSERT_EQ(j.at("checks").as_array().size(), 2u);
  EXPECT_EQ(j.at("checks").as_array()[1].as_object().at("verdict"), "fail");
  EXPECT_EQ(j.at("checks").as_array()[1].as_object().at("fix"), "do this");
  auto text = doctor::to_text(r);
  EXPECT_NE(text.find("FAIL  b"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: do this"), std::string::npos) << text;
  EXPECT_NE(text.find("1 ok, 0 warning(s), 1 failure(s)"), std::string::npos) << text;
  r.checks.pop_back();
  EXPECT_FALSE(r.failed());
}

// --- Slurm submission checks, with fake command output --------------------------------------------------

namespace {

using nymph::Result;
using nymph::slurm::CommandResult;

// sbatch, squeue, sacct, scancel on a PATH of their own (found by name; the fake runner answers for them).
struct FakeSlurmBin {
  TempDir dir;
  FakeSlurmBin() {
    for (const char* tool : {"sbatch", "squeue", "sacct", "scancel"})
      write_file(dir / tool, "#!/bin/sh\nexit 0\n", fs::perms::owner_all);
  }
};

CommandResult answer(int code, std::string out, std::string err = {}) {
  CommandResult r;
  r.exit_code = code;
  r.out = std::move(out);
  r.err = std::move(err);
  return r;
}

// Answers by command and flags; records every command line.
struct ScriptedSlurm : nymph::slurm::CommandRunner {
  CommandResult test_only = answer(0, "", "sbatch: Job 77 to start at 2026-12-01T07:00:00 using 1 processors on nodes c1 in partition debug\n");
  CommandResult held = answer(0, "4242\n");
  CommandResult scancel = answer(0, "");
  std::vector<std::vector<std::string>> calls;

  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv, std::optional<nymph::slurm::Environment>,
                                                   std::chrono::milliseconds) override {
    calls.push_back(argv);
    auto has = [&](std::string_view flag) { return std::find(argv.begin(), argv.end(), flag) != argv.end(); };
    std::string tool = fs::path(argv[0]).filename();
    if (has("--version")) co_return answer(0, "slurm 23.02.1\n");
    if (tool == "sbatch" && has("--test-only")) co_return test_only;
    if (tool == "sbatch" && has("--hold")) co_return held;
    if (tool == "scancel") co_return scancel;
    if (tool == "squeue") co_return answer(0, "");
    co_return answer(0, "");
  }

  const std::vector<std::string>* call_with(std::string_view flag) const {
    for (const auto& c : calls)
      if (std::find(c.begin(), c.end(), flag) != c.end()) return &c;
    return nullptr;
  }
};

doctor::Inputs slurm_inputs(const FakeSlurmBin& bin, std::string site_toml = {}) {
  doctor::Inputs in;
  in.path_env = bin.dir.path().string();
  in.user = "alice";
  if (!site_toml.empty()) {
    write_file(bin.dir / "config.toml",
               "[server]\nurl = \"http://127.0.0.1:1\"\ntoken_file = \"/nonexistent\"\n[runners.slurm]\n" + site_toml);
    auto c = nymph::agent::load_config(bin.dir / "config.toml");
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
    if (c) in.config = *c;
  }
  return in;
}

doctor::Report slurm_report(doctor::Inputs in, ScriptedSlurm& slurm) {
  boost::asio::io_context ioc;
  doctor::Report r;
  r.checks = nymph::test::run_coro(ioc, doctor::slurm_checks(in, slurm), 10s);
  return r;
}

}  // namespace

TEST(DoctorSlurmSubmit, ADefaultPartitionAndATestOnlySubmitPass) {
  FakeSlurmBin bin;
  ScriptedSlurm slurm;
  auto r = slurm_report(slurm_inputs(bin), slurm);
  ASSERT_TRUE(r.find("slurm.partition")) << doctor::to_text(r);
  EXPECT_EQ(r.find("slurm.partition")->verdict, Verdict::ok);
  EXPECT_NE(r.find("slurm.partition")->detail.find("default partition: debug"), std::string::npos);
  EXPECT_EQ(r.find("slurm.submit")->verdict, Verdict::ok);
  EXPECT_EQ(r.find("slurm.cancel"), nullptr) << "only with --deep";
  const auto* argv = slurm.call_with("--test-only");
  ASSERT_TRUE(argv);
  EXPECT_NE(std::find(argv->begin(), argv->end(), "--wrap=true"), argv->end());
  EXPECT_EQ(slurm.call_with("--hold"), nullptr) << "nothing is queued without --deep";
}

// Issue 18: kept launches submit successors from their compute node; inside an allocation the test submit decides
// whether they can, on a login node the check says where to look.
TEST(DoctorSlurmSubmit, InsideAnAllocationTheTestSubmitSaysWhetherAKeptLaunchCanRenew) {
  FakeSlurmBin bin;
  ScriptedSlurm login;
  auto r = slurm_report(slurm_inputs(bin), login);
  ASSERT_TRUE(r.find("chain.successor")) << doctor::to_text(r);
  EXPECT_EQ(r.find("chain.successor")->verdict, Verdict::ok);
  EXPECT_NE(r.find("chain.successor")->detail.find("srun nymph doctor"), std::string::npos);
  EXPECT_NE(r.find("chain.successor")->detail.find("a manager of this user on this login node"), std::string::npos);
  auto in = slurm_inputs(bin);
  in.in_allocation = true;
  ScriptedSlurm node;
  EXPECT_EQ(slurm_report(in, node).find("chain.successor")->verdict, Verdict::ok);
  ScriptedSlurm refusing;
  refusing.test_only = answer(1, "", "sbatch: error: Batch job submission failed: Access/permission denied\n");
  auto refused = slurm_report(in, refusing);
  EXPECT_EQ(refused.find("chain.successor")->verdict, Verdict::fail) << doctor::to_text(refused);
  EXPECT_NE(refused.find("chain.successor")->detail.find("Access/permission denied"), std::string::npos);
}

TEST(DoctorSlurmSubmit, NoDefaultPartitionFailsWithTheFix) {
  FakeSlurmBin bin;
  ScriptedSlurm slurm;
  slurm.test_only = answer(1, "", "sbatch: error: Batch job submission failed: No partition specified or system default partition\n");
  auto r = slurm_report(slurm_inputs(bin), slurm);
  EXPECT_EQ(r.find("slurm.partition")->verdict, Verdict::fail) << doctor::to_text(r);
  EXPECT_NE(r.find("slurm.partition")->fix.find("--partition"), std::string::npos);
  EXPECT_EQ(r.find("slurm.submit")->verdict, Verdict::fail);
  EXPECT_TRUE(r.failed());
}

TEST(DoctorSlurmSubmit, TheSiteConfigurationIsWhatTheTestSubmitCarries) {
  FakeSlurmBin bin;
  ScriptedSlurm slurm;
  auto r = slurm_report(slurm_inputs(bin, "partition = \"gpu\"\naccount = \"a2\"\nqos = \"q2\"\n"), slurm);
  EXPECT_EQ(r.find("slurm.partition")->verdict, Verdict::ok) << doctor::to_text(r);
  EXPECT_NE(r.find("slurm.partition")->detail.find("partition gpu ([runners.slurm] partition)"), std::string::npos);
  EXPECT_NE(r.find("slurm.submit")->detail.find("with partition gpu, account a2, qos q2"), std::string::npos)
      << r.find("slurm.submit")->detail;
  const auto* argv = slurm.call_with("--test-only");
  ASSERT_TRUE(argv);
  for (auto want : {"--partition=gpu", "--account=a2", "--qos=q2"})
    EXPECT_NE(std::find(argv->begin(), argv->end(), want), argv->end()) << want;
}

TEST(DoctorSlurmSubmit, ARefusedAccountFailsSubmitButNotPartition) {
  FakeSlurmBin bin;
  ScriptedSlurm slurm;
  slurm.test_only = answer(1, "", "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n");
  auto r = slurm_report(slurm_inputs(bin, "account = \"nope\"\n"), slurm);
  EXPECT_EQ(r.find("slurm.submit")->verdict, Verdict::fail) << doctor::to_text(r);
  EXPECT_NE(r.find("slurm.submit")->detail.find("Invalid account"), std::string::npos);
}

TEST(DoctorSlurmSubmit, DeepSubmitsAHeldJobAndCancelsIt) {
  FakeSlurmBin bin;
  ScriptedSlurm slurm;
  auto in = slurm_inputs(bin);
  in.deep = true;
  auto r = slurm_report(in, slurm);
  ASSERT_TRUE(r.find("slurm.cancel")) << doctor::to_text(r);
  EXPECT_EQ(r.find("slurm.cancel")->verdict, Verdict::ok);
  EXPECT_NE(r.find("slurm.cancel")->detail.find("4242"), std::string::npos);
  const auto* held = slurm.call_with("--hold");
  ASSERT_TRUE(held);
  EXPECT_NE(std::find(held->begin(), held->end(), "--parsable"), held->end());
  bool cancelled = false;
  for (const auto& c : slurm.calls)
    cancelled |= fs::path(c[0]).filename() == "scancel" && c.size() == 2 && c[1] == "4242";
  EXPECT_TRUE(cancelled);
}

TEST(DoctorSlurmSubmit, DeepReportsACancelThatFailsWithTheJobToCancel) {
  FakeSlurmBin bin;
  ScriptedSlurm slurm;
  slurm.scancel = answer(1, "", "scancel: error: Kill job error on job id 4242: Access/permission denied\n");
  auto in = slurm_inputs(bin);
  in.deep = true;
  auto r = slurm_report(in, slurm);
  ASSERT_TRUE(r.find("slurm.cancel"));
  EXPECT_EQ(r.find("slurm.cancel")->verdict, Verdict::fail);
  EXPECT_NE(r.find("slurm.cancel")->fix.find("scancel 4242"), std::string::npos);
  EXPECT_NE(r.find("slurm.cancel")->detail.find("permission denied"), std::string::npos);
}

TEST(DoctorSlurmSubmit, PartitionNamedByTestOnly) {
  EXPECT_EQ(doctor::partition_in_test_only("sbatch: Job 1 to start at X using 1 processors on nodes c1 in partition gpu\n"), "gpu");
  EXPECT_EQ(doctor::partition_in_test_only("Submitted batch job 1"), "");
}
