// nymph doctor's pure pieces: logind parsing, verdict rules, HTTP dates, clock skew, disk, token, launch dir,
// rendering, the control-plane URL rule. No child processes, no sockets.
#include <gtest/gtest.h>

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
