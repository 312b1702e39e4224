// run_install / list / kill / prune against a fake daemon and a fake Slurm (tests/installer/fake_daemon.cpp):
// files and permissions, how the daemon is started, confirmation of start-up, failures leaving nothing running.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <thread>

#include "agent/manager_lease.hpp"
#include "installer/install.hpp"
#include "installer/launches.hpp"
#include "installer/process.hpp"
#include "runners/slurm/journal.hpp"
#include "tests/support/files.hpp"

using nymph::test::read_file;

using namespace nymph::installer;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

class InstallExec : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nymph-install-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "home");
    fs::create_directories(root_ / "slurm");
    std::ofstream(root_ / "tok") << "  secret-token-0123456789\n";
    fs::permissions(root_ / "tok", fs::perms::owner_read | fs::perms::owner_write);
    for (auto tool : {"sbatch", "squeue", "scancel"}) fs::create_symlink(NYMPH_FAKE_DAEMON, root_ / "slurm" / tool);
    ::setenv("NYMPH_FAKE_SLURM_DIR", (root_ / "slurm").c_str(), 1);
    ::unsetenv("NYMPH_FAKE_DAEMON");
    ::unsetenv("NYMPH_FAKE_SBATCH");
    ctx_.host = {.home = root_ / "home", .hostname = "testhost", .nymph_exe = NYMPH_FAKE_DAEMON};
    ctx_.start_timeout = std::chrono::seconds(10);
    ctx_.sbatch = (root_ / "slurm" / "sbatch").native();
    manage_ = {.state_dir = root_ / "state", .hostname = "testhost", .squeue = (root_ / "slurm" / "squeue").native(),
               .scancel = (root_ / "slurm" / "scancel").native()};
    opts_.server = "https://cp.example.org";
    opts_.token_file = (root_ / "tok").native();
    opts_.label = "box";
    opts_.state_dir = (root_ / "state").native();
  }

  void TearDown() override {
    for (pid_t pid : started_) {
      if (alive(pid)) ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    fs::remove_all(root_);
  }

  nymph::Result<InstallOutcome> install() {
    auto r = run_install(opts_, ctx_, ids_);
    if (r && r->pid) started_.push_back(*r->pid);
    return r;
  }

  fs::path root_;
  InstallOptions opts_;
  InstallContext ctx_;
  ManageContext manage_;
  nymph::UlidGenerator ids_;
  std::vector<pid_t> started_;
};

}  // namespace

TEST_F(InstallExec, WritesPrivateFilesAndStartsDetachedDaemon) {
  int leaked = ::open("/dev/null", O_RDONLY);  // not close-on-exec: must not reach the daemon
  auto out = install();
  ::close(leaked);
  ASSERT_TRUE(out) << out.error().message;
  ASSERT_TRUE(out->pid);
  const auto& p = out->plan;
  EXPECT_EQ(mode_of(p.launch_dir), 0700u);
  EXPECT_EQ(mode_of(p.launch_dir / "config.toml"), 0600u);
  EXPECT_EQ(mode_of(p.launch_dir / "token"), 0600u);
  EXPECT_EQ(mode_of(p.launch_dir / "launch.json"), 0600u);
  EXPECT_EQ(mode_of(p.log_path), 0600u);
  EXPECT_EQ(read_file(p.launch_dir / "token"), "secret-token-0123456789");
  EXPECT_EQ(read_file(p.config_path), p.config_toml);
  EXPECT_EQ(p.log_path.parent_path(), root_ / "home" / ".local" / "share");

  auto probe = read_file(p.launch_dir / "probe.txt");
  EXPECT_NE(probe.find("arg run\narg --config\narg " + p.config_path.native() + "\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("cwd " + p.launch_dir.native() + "\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("stdin /dev/null\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("stdout " + p.log_path.native() + "\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("stderr " + p.log_path.native() + "\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("sid " + std::to_string(*out->pid) + " pid"), std::string::npos) << "new session\n" << probe;
  EXPECT_EQ(probe.find("fd 3"), std::string::npos) << "only fds 0-2\n" << probe;

  auto cmd = read_cmdline(*out->pid);
  ASSERT_TRUE(cmd);
  for (const auto& a : *cmd) EXPECT_EQ(a.find("secret-token"), std::string::npos) << a;
  EXPECT_NE(read_file(p.log_path).find("fake daemon"), std::string::npos);
}

TEST_F(InstallExec, ListKillAndPrune) {
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  auto list = list_launches(manage_);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].launch_id, out->plan.launch_id);
  EXPECT_EQ(list[0].state, LaunchState::running);
  EXPECT_EQ(list[0].record->pid, *out->pid);
  EXPECT_EQ(launches_json(list)["launches"].as_array()[0].as_object().at("state").as_string(), "running");

  auto refused = prune_launches(manage_);
  EXPECT_TRUE(refused.removed.empty());
  ASSERT_EQ(refused.kept.size(), 1u);
  EXPECT_TRUE(fs::exists(out->plan.launch_dir));

  auto killed = kill_launch(manage_, out->plan.worker_label, std::chrono::seconds(10));
  ASSERT_TRUE(killed) << killed.error().message;
  EXPECT_TRUE(killed->was_running);
  EXPECT_TRUE(killed->stopped);
  EXPECT_EQ(killed->exit_reason, "sigterm");
  EXPECT_EQ(list_launches(manage_)[0].state, LaunchState::exited);

  auto again = kill_launch(manage_, out->plan.launch_id, std::chrono::seconds(1));
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->was_running);

  auto pruned = prune_launches(manage_);
  ASSERT_EQ(pruned.removed.size(), 1u);
  EXPECT_EQ(pruned.removed[0], out->plan.launch_id);
  EXPECT_FALSE(fs::exists(out->plan.launch_dir));
  EXPECT_FALSE(fs::exists(out->plan.log_path));
  EXPECT_TRUE(list_launches(manage_).empty());
}

TEST_F(InstallExec, KillNeverSignalsAPidRunningSomethingElse) {
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  // The recorded pid now "belongs" to another program: launch.json names a different command line.
  auto record = read_launch_record(out->plan.launch_dir).value();
  record.command.back() = "/elsewhere/config.toml";
  ASSERT_TRUE(write_launch_record(out->plan.launch_dir, record));
  auto killed = kill_launch(manage_, out->plan.launch_id, std::chrono::seconds(1));
  ASSERT_TRUE(killed) << killed.error().message;
  EXPECT_FALSE(killed->was_running);
  EXPECT_TRUE(alive(*out->pid));
  EXPECT_EQ(read_status(out->plan.launch_dir).value().state, "serving");
}

TEST_F(InstallExec, KillByUnknownTargetOrFromAnotherHostFails) {
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_FALSE(kill_launch(manage_, "nope", std::chrono::seconds(1)));
  auto other = manage_;
  other.hostname = "otherhost";
  auto r = kill_launch(other, out->plan.launch_id, std::chrono::seconds(1));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("testhost"), std::string::npos) << r.error().message;
  EXPECT_EQ(list_launches(other)[0].state, LaunchState::unknown);
  EXPECT_TRUE(alive(*out->pid));
}

TEST_F(InstallExec, TwoInstallsAreSeparate) {
  auto a = install();
  auto b = install();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->plan.launch_id, b->plan.launch_id);
  EXPECT_NE(a->plan.worker_label, b->plan.worker_label);
  EXPECT_NE(a->plan.launch_dir / "token", b->plan.launch_dir / "token");
  EXPECT_NE(a->plan.log_path, b->plan.log_path);
  EXPECT_TRUE(alive(*a->pid) && alive(*b->pid));
  auto list = list_launches(manage_);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].state, LaunchState::running);
  EXPECT_EQ(list[1].state, LaunchState::running);
}

TEST_F(InstallExec, DaemonThatExitsAtOnceFailsWithLogTail) {
  ::setenv("NYMPH_FAKE_DAEMON", "exit", 1);
  auto out = install();
  ASSERT_FALSE(out);
  const auto& m = out.error().message;
  EXPECT_NE(m.find("exited with status 3"), std::string::npos) << m;
  EXPECT_NE(m.find("refusing to start (bad token)"), std::string::npos) << m;
  auto list = list_launches(manage_);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state, LaunchState::exited);
  EXPECT_FALSE(list[0].record->start_error.empty());
  EXPECT_FALSE(alive(*list[0].record->pid));
}

TEST_F(InstallExec, DaemonThatNeverReportsIsStopped) {
  ::setenv("NYMPH_FAKE_DAEMON", "silent", 1);
  ctx_.start_timeout = std::chrono::milliseconds(300);
  auto out = install();
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("did not write"), std::string::npos) << out.error().message;
  auto list = list_launches(manage_);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_FALSE(alive(*list[0].record->pid)) << "the daemon was stopped and reaped";
  EXPECT_EQ(list[0].state, LaunchState::exited);
}

TEST_F(InstallExec, BadOptionsOrTokenLeaveNothingBehind) {
  auto bad = opts_;
  bad.slurm = true;
  bad.slurm_partition = "debug\n#SBATCH --uid=0";
  EXPECT_FALSE(run_install(bad, ctx_, ids_));
  bad = opts_;
  bad.token_file = (root_ / "missing").native();
  auto r = run_install(bad, ctx_, ids_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("No such file"), std::string::npos) << r.error().message;
  bad.token_file.clear();
  EXPECT_NE(run_install(bad, ctx_, ids_).error().message.find("--token-file"), std::string::npos);
  std::ofstream(root_ / "empty-tok") << "\n";
  bad.token_file = (root_ / "empty-tok").native();
  EXPECT_FALSE(run_install(bad, ctx_, ids_));
  EXPECT_FALSE(fs::exists(root_ / "state"));
  EXPECT_FALSE(fs::exists(root_ / "home" / ".local"));
}

TEST_F(InstallExec, DryRunTouchesNothing) {
  opts_.dry_run = true;
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_FALSE(out->pid);
  EXPECT_FALSE(fs::exists(root_ / "state"));
  EXPECT_FALSE(fs::exists(root_ / "home" / ".local"));
  auto text = outcome_text(*out);
  EXPECT_EQ(text.find("secret-token"), std::string::npos);
  EXPECT_NE(text.find("[server]"), std::string::npos) << text;
}

TEST_F(InstallExec, TokenFromStandardInput) {
  std::istringstream in("stdin-token-42\n");
  ctx_.token_input = &in;
  opts_.token_file.clear();
  opts_.token_stdin = true;
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(read_file(out->plan.launch_dir / "token"), "stdin-token-42");
}

TEST_F(InstallExec, SlurmSubmitListAndCancel) {
  opts_.slurm = true;
  opts_.slurm_partition = "debug";
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->slurm_job_id, "4242");
  EXPECT_EQ(read_file(root_ / "slurm" / "script"), out->plan.sbatch_script);
  EXPECT_EQ(mode_of(out->plan.log_path), 0600u);
  auto json = outcome_json(*out);
  EXPECT_EQ(json.at("slurmJobId").as_string(), "4242");
  EXPECT_EQ(json.at("squeue").as_string(),
            "squeue --name=\"lakeshore-nymph-" + out->plan.launch_id + "\" -o '%.18i %.48j %.10T'");
  EXPECT_NE(outcome_text(*out).find("nothing renews this allocation"), std::string::npos);

  EXPECT_EQ(list_launches(manage_)[0].state, LaunchState::queued);
  auto killed = kill_launch(manage_, out->plan.launch_id, std::chrono::seconds(5));
  ASSERT_TRUE(killed) << killed.error().message;
  EXPECT_TRUE(killed->was_running);
  EXPECT_TRUE(killed->stopped);
  EXPECT_EQ(list_launches(manage_)[0].state, LaunchState::exited);
}

TEST_F(InstallExec, FailedSbatchRemovesTheLaunch) {
  ::setenv("NYMPH_FAKE_SBATCH", "fail", 1);
  opts_.slurm = true;
  auto out = install();
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("invalid partition specified"), std::string::npos) << out.error().message;
  EXPECT_TRUE(fs::is_empty(root_ / "state" / "launches"));
  EXPECT_TRUE(fs::is_empty(root_ / "home" / ".local" / "share"));
}

TEST_F(InstallExec, PruneRemovesOnlyOldLeftoversOfInterruptedInstalls) {
  auto launches = root_ / "state" / "launches";
  std::array<std::uint8_t, 10> r{};
  auto old_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch() - std::chrono::hours(2)).count());
  auto old_dir = launches / (".tmp-" + nymph::make_ulid(old_ms, r).value().str() + "-abcdef");
  auto new_dir = launches / (".tmp-" + ids_.next().value().str() + "-abcdef");
  fs::create_directories(old_dir);
  fs::create_directories(new_dir);
  std::ofstream(old_dir / "token") << "x";
  auto out = prune_launches(manage_);
  EXPECT_TRUE(out.errors.empty());
  EXPECT_FALSE(fs::exists(old_dir));
  EXPECT_TRUE(fs::exists(new_dir)) << "may belong to an install running right now";
  EXPECT_TRUE(list_launches(manage_).empty()) << "temporary directories are not launches";
}

TEST_F(InstallExec, TrainingProfileScriptIsCheckedAsNymphRunChecksIt) {
  auto script = root_ / "profile.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_write);
  opts_.training_profiles = {"smoke=" + script.native()};
  auto refused = run_install(opts_, ctx_, ids_);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("profile smoke"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("writable by group"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(fs::exists(root_ / "state"));

  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read);
  opts_.dry_run = true;
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_NE(out->plan.config_toml.find("smoke = '" + script.native() + "'"), std::string::npos)
      << out->plan.config_toml;
}

TEST_F(InstallExec, TokenFileThatIsAFifoOrHugeIsRefusedAtOnce) {
  auto fifo = root_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  opts_.token_file = fifo.native();  // used to block forever in open()
  auto r = run_install(opts_, ctx_, ids_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  std::ofstream(root_ / "huge") << std::string(128 * 1024, 'x');
  opts_.token_file = (root_ / "huge").native();
  r = run_install(opts_, ctx_, ids_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("larger than"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(root_ / "state"));
}

namespace {
// Writes manager.json for the identity `cluster` of the fixture's state directory, held by `pid` on testhost.
void write_lease(const fs::path& state_dir, const std::string& cluster, pid_t pid, const std::string& launch) {
  auto dir = state_dir / "managers" / cluster;
  fs::create_directories(dir);
  auto now = std::chrono::system_clock::now();
  nymph::agent::ManagerLease l{.host = "testhost", .pid = pid, .pid_start_time = *nymph::agent::process_start_time(pid),
                               .launch_id = launch, .started_at = now, .heartbeat_at = now};
  std::ofstream(dir / nymph::agent::kLeaseFile) << nymph::agent::lease_json(l);
}
}  // namespace

TEST_F(InstallExec, RefusedWhileALiveManagerHoldsTheIdentity) {
  write_lease(root_ / "state", "testhost", ::getpid(), "01HOLDER");  // this test process stands in for it
  auto out = install();
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("is already running: host testhost pid " + std::to_string(::getpid()) +
                                     " launch 01HOLDER"),
            std::string::npos)
      << out.error().message;
  EXPECT_NE(out.error().message.find("--replace"), std::string::npos) << out.error().message;
  EXPECT_TRUE(list_launches(manage_).empty()) << "nothing written";
  opts_.cluster = "other";  // another cluster is another identity
  auto other = install();
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(other->plan.manager_state_dir, root_ / "state" / "managers" / "other");
  EXPECT_NE(read_file(other->plan.config_path).find("cluster = 'other'"), std::string::npos);
}

TEST_F(InstallExec, ReplaceMakesTheHolderGoFirstAndPassesThrough) {
  pid_t holder = ::fork();
  if (holder == 0) {
    ::pause();
    ::_exit(0);
  }
  write_lease(root_ / "state", "testhost", holder, "01HOLDER");
  std::thread reaper([holder] { ::waitpid(holder, nullptr, 0); });
  opts_.replace = true;
  auto out = install();
  reaper.join();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_FALSE(alive(holder));
  auto probe = read_file(out->plan.launch_dir / "probe.txt");
  EXPECT_NE(probe.find("arg --replace\n"), std::string::npos) << probe;
}

TEST_F(InstallExec, PruneKeepsALaunchWhoseSlurmJobsMayStillRun) {
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  ASSERT_TRUE(kill_launch(manage_, out->plan.launch_id, std::chrono::seconds(10)));
  // The layout before manager identities: the journal in the launch directory, a job still in Slurm.
  using nymph::runners::slurm::Journal;
  using nymph::runners::slurm::JournalEntry;
  auto journal_path = out->plan.launch_dir / nymph::runners::slurm::kJournalFile;
  JournalEntry e{.job_id = "job-1", .attempt = 1, .lease_id = "lease-1", .slurm_job_id = "77",
                 .dir = out->plan.launch_dir / "nymph-job-1-1"};
  {
    auto j = Journal::open(journal_path);
    ASSERT_TRUE(j) << j.error().message;
    ASSERT_TRUE(j->append(e));
  }
  auto kept = prune_launches(manage_);
  EXPECT_TRUE(kept.removed.empty());
  ASSERT_EQ(kept.kept.size(), 1u);
  EXPECT_NE(kept.kept[0].find("Slurm job(s)"), std::string::npos) << kept.kept[0];
  EXPECT_TRUE(fs::exists(out->plan.launch_dir));

  // The job is done there, but a manager identity's journal points into the directory.
  {
    auto j = Journal::open(journal_path);
    ASSERT_TRUE(j->mark_done("job-1", 1));
  }
  auto identity_journal = root_ / "state" / "managers" / "lab" / "slurm" / nymph::runners::slurm::kJournalFile;
  fs::create_directories(identity_journal.parent_path());
  {
    auto j = Journal::open(identity_journal);
    ASSERT_TRUE(j->append(e));
  }
  EXPECT_TRUE(prune_launches(manage_).removed.empty());
  {
    auto j = Journal::open(identity_journal);
    ASSERT_TRUE(j->mark_done("job-1", 1));
  }
  auto pruned = prune_launches(manage_);
  ASSERT_EQ(pruned.removed.size(), 1u);
  EXPECT_FALSE(fs::exists(out->plan.launch_dir));
  EXPECT_TRUE(fs::exists(identity_journal)) << "identity state is never pruned";
}

// Site configuration: the fragment is read from a file, --launch-dir is checked (dry run) and then created and
// written to, and --json carries every site key.
TEST_F(InstallExec, SiteConfigurationIsCheckedWrittenAndReported) {
  auto script = root_ / "smoke.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  fs::permissions(script, fs::perms::owner_all);
  std::ofstream(root_ / "site.toml") << "[runners.slurm]\npoll_interval = \"5s\"\n";
  opts_.account = "A2";
  opts_.qos = "Q2";
  opts_.launch_dir = (root_ / "shared" / "jobs").native();
  opts_.training_profiles = {"smoke=" + script.native()};
  opts_.profiles_only = true;
  opts_.max_jobs = 3;
  opts_.config_fragment = (root_ / "site.toml").native();
  opts_.dry_run = true;
  auto dry = install();
  ASSERT_TRUE(dry) << dry.error().message;
  EXPECT_FALSE(fs::exists(root_ / "shared")) << "a dry run creates nothing";
  auto j = outcome_json(*dry);
  const auto& site = j.at("siteConfig").as_object();
  EXPECT_EQ(site.at("account"), "A2");
  EXPECT_EQ(site.at("qos"), "Q2");
  EXPECT_TRUE(site.at("partition").is_null());
  EXPECT_EQ(site.at("launchDir"), boost::json::value(opts_.launch_dir));
  EXPECT_EQ(site.at("profilesOnly"), true);
  EXPECT_EQ(site.at("maxJobs"), 3);
  EXPECT_TRUE(site.at("maxPollDuration").is_null());
  EXPECT_EQ(site.at("configFragment"), boost::json::value((root_ / "site.toml").native()));
  EXPECT_EQ(site.at("fragmentKeys"), boost::json::array{"runners.slurm.poll_interval"});
  EXPECT_NE(outcome_text(*dry).find("site config:  account A2, qos Q2"), std::string::npos) << outcome_text(*dry);

  opts_.dry_run = false;
  auto out = install();
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE(fs::is_directory(root_ / "shared" / "jobs"));
  EXPECT_EQ(mode_of(root_ / "shared" / "jobs"), 0700u);
  EXPECT_TRUE(fs::is_empty(root_ / "shared" / "jobs")) << "the write probe is removed";
  EXPECT_FALSE(out->launch_dir_filesystem.empty()) << "this test's /tmp is a known filesystem";
  auto config = read_file(out->plan.config_path);
  EXPECT_NE(config.find("account = 'A2'"), std::string::npos) << config;
  EXPECT_NE(config.find("poll_interval = '5s'"), std::string::npos) << config;
}

TEST_F(InstallExec, LaunchDirThatIsNoDirectoryOrAMissingFragmentIsRefusedBeforeAnythingIsWritten) {
  std::ofstream(root_ / "file") << "x";
  opts_.launch_dir = (root_ / "file" / "jobs").native();
  auto r = run_install(opts_, ctx_, ids_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exists and is not a directory"), std::string::npos) << r.error().message;
  opts_.launch_dir.clear();
  opts_.config_fragment = (root_ / "missing.toml").native();
  r = run_install(opts_, ctx_, ids_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--config-fragment"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(root_ / "state"));
}

// `nymph launches --json` carries what status.json says is wrong with a runner's backend, so lakeshore can show it.
TEST(LaunchJson, ARunnersTroubleIsShownAndOmittedWhenThereIsNone) {
  LaunchInfo l{.launch_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV", .state = LaunchState::running};
  l.status = StatusSnapshot{.pid = 12, .state = "serving"};
  EXPECT_FALSE(launch_json(l).contains("runnerTrouble"));
  l.status->runner_trouble["slurm"] = "slurmctld: squeue: error: Rate limit exceeded";
  EXPECT_EQ(launch_json(l).at("runnerTrouble"),
            (boost::json::object{{"slurm", "slurmctld: squeue: error: Rate limit exceeded"}}));
}
