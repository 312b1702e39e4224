// SlurmRunner driven through a scripted FakeSlurm: submission, tracking, output, cancel, detach and resume.
// Poll and output intervals are milliseconds; every test runs under run_coro's hang guard and checks that
// the io_context runs dry (the poll loop ends with the last tracked job).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "tests/runners/slurm/fake_slurm.hpp"
#include "tests/support/run_coro.hpp"

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace nymph::runners;
using namespace nymph::runners::slurm;
using namespace std::chrono_literals;
using asio::experimental::awaitable_operators::operator&&;
using nymph::test::FakeJob;
using nymph::test::FakeSlurm;
using nymph::test::Forward;
using nymph::test::Recorder;
using nymph::test::run_coro;

// Runs three attempts concurrently on one runner (a named coroutine: GCC 12 and braced temporaries in co_await).
asio::awaitable<std::tuple<JobUpdate, JobUpdate, JobUpdate>> run_three(SlurmRunner* runner, JobSpec a, Recorder* ra,
                                                                      JobSpec b, Recorder* rb, JobSpec c, Recorder* rc) {
  co_return co_await (runner->run(std::move(a), *ra) && runner->run(std::move(b), *rb) && runner->run(std::move(c), *rc));
}

struct RunnerTest : ::testing::Test {
  fs::path launch = fs::temp_directory_path() / ("nymph-slurm-runner-test-" + std::to_string(::getpid()) + "-" +
                                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
  asio::io_context ioc;
  FakeSlurm fake;

  void SetUp() override { fs::remove_all(launch); }
  void TearDown() override { fs::remove_all(launch); }

  SlurmRunnerConfig config() {
    SlurmRunnerConfig c;
    c.launch_dir = launch;
    c.poll_interval = 1ms;
    c.output_interval = 1ms;
    c.output_chunk = 1000;
    c.partition = "debug";
    return c;
  }
  std::unique_ptr<SlurmRunner> make_runner(SlurmRunnerConfig c) {
    return std::make_unique<SlurmRunner>(ioc.get_executor(), std::move(c), std::make_unique<Forward>(fake),
                                         nymph::null_logger());
  }
  static JobSpec spec(std::string id, std::vector<std::string> argv = {"/bin/true"}) {
    JobSpec s;
    s.job_id = std::move(id);
    s.lease_id = "lease-" + s.job_id;
    s.argv = std::move(argv);
    return s;
  }
};

TEST_F(RunnerTest, CompletedJobReportsPendingRunningOutputAndSucceeded) {
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SBATCH_PARTITION", "evil", 1);
  std::string big(5000, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 256);
  fake.on_submit = [&](const fs::path&) {
    FakeJob j;
    j.squeue = {"PENDING|Priority", "RUNNING|None", "RUNNING|None", ""};
    j.stdout_bytes = big;
    j.stderr_bytes = "warn\n";
    return j;
  };
  auto runner = make_runner(config());
  Recorder rec;
  rec.on_update = [&](const JobUpdate& u) {
    if (u.state != JobState::running || !rec.updates.empty()) return;
    // The journal holds the submission before `running` is reported.
    auto j = read_journal(launch / kJournalFile).value();
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0].slurm_job_id, "1000");
    EXPECT_EQ(j[0].lease_id, "lease-a");
  };
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SBATCH_PARTITION");

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(final.slurm_job_id, "1000");
  EXPECT_EQ(rec.states(), (std::vector<JobState>{JobState::running, JobState::pending, JobState::running}));
  EXPECT_EQ(rec.updates[0].slurm_job_id, "1000");
  EXPECT_NE(rec.updates[1].message.find("Priority"), std::string::npos);
  EXPECT_EQ(rec.out, big) << "output arrives byte-exact";
  EXPECT_EQ(rec.err, "warn\n");

  const auto& sbatch = fake.calls.at(0);
  EXPECT_EQ(sbatch, (std::vector<std::string>{"sbatch", "--parsable", (launch / "a-1" / "job.sbatch").string()}));
  ASSERT_TRUE(fake.envs.at(0));
  EXPECT_FALSE(fake.envs[0]->count("SLURM_JOB_ID")) << "the manager's allocation does not leak into sbatch";
  EXPECT_FALSE(fake.envs[0]->count("SBATCH_PARTITION"));
  EXPECT_EQ(fake.count("sacct"), 1);
  EXPECT_EQ(fake.count("scancel"), 0);

  // release() marks the journal entry done and removes the job directory, on the runner's I/O threads: done
  // by the time the runner is gone.
  EXPECT_TRUE(fs::exists(launch / "a-1" / "job.sbatch"));
  runner->release("a");
  runner.reset();
  EXPECT_FALSE(fs::exists(launch / "a-1"));
  EXPECT_TRUE(read_journal(launch / kJournalFile).value().empty());
}

// A job waiting in Slurm's queue is a record of the runner's, without a coroutine (ten thousand of them hold no
// frame each): its coroutine starts once Slurm runs it, and ships its output.
TEST_F(RunnerTest, OnlyAJobSlurmRunsOrEndedHasACoroutineOfItsOwn) {
  fake.on_submit = [&](const fs::path&) {
    FakeJob j;
    j.squeue = {"PENDING|Priority", "PENDING|Resources", "RUNNING|None", ""};
    j.stdout_bytes = "hello\n";
    return j;
  };
  auto runner = make_runner(config());
  Recorder rec;
  std::vector<std::size_t> while_pending, while_running;  // following() as each pending update, each output arrives
  rec.on_update = [&](const JobUpdate& u) {
    if (u.state == JobState::pending) while_pending.push_back(runner->following());
  };
  rec.on_output = [&] { while_running.push_back(runner->following()); };
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(while_pending, (std::vector<std::size_t>{0, 0}));
  ASSERT_FALSE(while_running.empty());
  EXPECT_EQ(while_running.front(), 1u);
  EXPECT_EQ(rec.out, "hello\n");
  EXPECT_EQ(runner->following(), 0u);
}

TEST_F(RunnerTest, SbatchFailureFailsWithItsStderrAndTracksNothing) {
  fake.sbatch_answer = CommandResult{1, "", "sbatch: error: invalid partition specified: nope\n"};
  auto runner = make_runner(config());
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("invalid partition specified: nope"), std::string::npos) << final.message;
  EXPECT_TRUE(rec.updates.empty());
  EXPECT_EQ(fake.count("squeue"), 0);
  EXPECT_TRUE(read_journal(launch / kJournalFile).value().empty());
  runner->release("a");
  runner.reset();
  EXPECT_FALSE(fs::exists(launch / "a-1"));
}

TEST_F(RunnerTest, BadRunConfigSubmitsNothing) {
  auto runner = make_runner(config());
  Recorder rec;
  JobSpec s = spec("a");
  s.slurm_options["partition"] = "debug\n#SBATCH --uid=0";
  auto final = run_coro(ioc, runner->run(s, rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("runConfig.slurm.partition"), std::string::npos) << final.message;
  EXPECT_NE(final.message.find("\\n#SBATCH --uid=0"), std::string::npos) << final.message;
  EXPECT_TRUE(fake.calls.empty());
  EXPECT_FALSE(fs::exists(launch / "a-1"));
}

TEST_F(RunnerTest, ManyJobsShareOneSqueuePerCycle) {
  fake.on_submit = [&](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None", "RUNNING|None", ""};
    return j;
  };
  // The three job directories are prepared on the runner's I/O threads, so the submissions are a moment apart:
  // a poll interval longer than that moment puts all three into the first cycle.
  auto c = config();
  c.poll_interval = 100ms;
  c.poll_jitter = 0;
  c.max_array_tasks = 1;  // three plain Slurm ids (arrays: test_runner_arrays.cpp)
  auto runner = make_runner(c);
  Recorder ra, rb, rc;
  auto [a, b, c3] = run_coro(ioc, run_three(runner.get(), spec("a"), &ra, spec("b"), &rb, spec("c"), &rc), 10s);
  EXPECT_EQ(a.state, JobState::succeeded);
  EXPECT_EQ(b.state, JobState::succeeded);
  EXPECT_EQ(c3.state, JobState::succeeded);
  int squeue_with_all = 0;
  for (const auto& call : fake.calls)
    if (call[0] == "squeue" && call.back() == "1000,1001,1002") ++squeue_with_all;
  EXPECT_GE(squeue_with_all, 1);
  EXPECT_LE(fake.count("squeue"), 4) << "never one squeue per job";
  EXPECT_EQ(fake.count("sacct"), 1) << "one sacct for all jobs that left squeue together";
}

TEST_F(RunnerTest, StopScancelsAndEndsCancelled) {
  fake.on_submit = [&](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None"};
    return j;
  };
  auto runner = make_runner(config());
  fake.on_squeue = [&](int n) {
    if (n == 2) runner->stop("a", StopReason::user_cancel);
  };
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("a"), rec), 10s);
  EXPECT_EQ(final.state, JobState::cancelled) << final.message;
  ASSERT_EQ(fake.count("scancel"), 1);
  for (const auto& call : fake.calls) {
    if (call[0] == "scancel") {
      EXPECT_EQ(call, (std::vector<std::string>{"scancel", "1000"}));
    }
  }
}

TEST_F(RunnerTest, ShutdownLeavesTheJobRunningAndANewRunnerResumesIt) {
  fake.on_submit = [&](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None"};
    j.stdout_bytes = "hello\n";
    return j;
  };
  int finals = 0;
  {
    auto runner = make_runner(config());
    fake.on_squeue = [&](int n) {
      if (n == 2) runner->stop("a", StopReason::shutdown);
    };
    Recorder rec;
    auto u = run_coro(ioc, runner->run(spec("a"), rec), 10s);
    EXPECT_EQ(u.state, JobState::running) << "detached: not a final update";
    EXPECT_EQ(u.slurm_job_id, "1000");
    finals += is_final(u.state);
    runner->release("a");  // ignored for a detached attempt
    EXPECT_TRUE(fs::exists(launch / "a-1" / "job.sbatch"));
  }
  EXPECT_EQ(fake.count("scancel"), 0);
  fake.on_squeue = nullptr;
  fake.jobs["1000"].squeue = {"RUNNING|None", ""};

  auto runner = make_runner(config());
  ASSERT_EQ(runner->in_flight().size(), 1u);
  JournalEntry e = runner->journaled()[0];
  EXPECT_EQ(e.job_id, "a");
  EXPECT_EQ(e.slurm_job_id, "1000");
  Recorder again;
  auto refused = run_coro(ioc, runner->run(spec("a"), again), 10s);
  EXPECT_EQ(refused.state, JobState::failed);
  EXPECT_NE(refused.message.find("resume() it instead"), std::string::npos) << refused.message;
  auto listed = runner->in_flight();  // the runner-neutral records the agent sees
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].job_id, "a");
  EXPECT_EQ(listed[0].lease_id, "lease-a");
  EXPECT_EQ(listed[0].attempt, 1);
  Recorder rec;
  auto u = run_coro(ioc, runner->resume(listed[0], rec), 10s);
  finals += is_final(u.state);
  EXPECT_EQ(u.state, JobState::succeeded);
  EXPECT_EQ(finals, 1) << "exactly one final update across the restart";
  EXPECT_EQ(rec.out, "hello\n");
  runner->release("a");
  runner.reset();
  EXPECT_TRUE(make_runner(config())->in_flight().empty());
}

TEST_F(RunnerTest, AbandonScancelsAJournaledAttempt) {
  {
    auto runner = make_runner(config());
    fake.on_submit = [&](const fs::path&) {
      FakeJob j;
      j.squeue = {"PENDING|Priority"};
      return j;
    };
    fake.on_squeue = [&](int) { runner->stop("a", StopReason::shutdown); };
    Recorder rec;
    run_coro(ioc, runner->run(spec("a"), rec), 10s);
  }
  auto runner = make_runner(config());
  ASSERT_EQ(runner->in_flight().size(), 1u);
  auto r = run_coro(ioc, runner->abandon(runner->in_flight()[0]), 10s);
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ(fake.count("scancel"), 1);
  EXPECT_FALSE(fs::exists(launch / "a-1"));
  EXPECT_TRUE(make_runner(config())->in_flight().empty());
}

TEST_F(RunnerTest, SurvivesTheAgentAndRefusesRecordsItDidNotJournal) {
  auto runner = make_runner(config());
  EXPECT_EQ(runner->lifetime(), Lifetime::survives_agent);
  EXPECT_EQ(runner->resumable(), static_cast<ResumableRunner*>(runner.get()));
  InFlightAttempt foreign{"x", "lease-x", 1, std::string("not a journal entry")};
  Recorder rec;
  auto u = run_coro(ioc, runner->resume(foreign, rec), 10s);
  EXPECT_EQ(u.state, JobState::failed);
  auto r = run_coro(ioc, runner->abandon(foreign), 10s);
  EXPECT_FALSE(r);
  EXPECT_EQ(fake.count("scancel"), 0);

  std::vector<JobUpdate> done;
  runner->relaunch(ioc.get_executor(), foreign, rec, [&](JobUpdate u) { done.push_back(std::move(u)); });
  EXPECT_TRUE(done.empty()) << "never from inside relaunch()";
  ioc.restart();
  ioc.run();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].state, JobState::failed);
}

TEST_F(RunnerTest, MaxJobsAndDuplicateAttemptsFailAtOnce) {
  auto c = config();
  c.max_jobs = 1;
  fake.on_submit = [&](const fs::path&) {
    FakeJob j;
    j.squeue = {"RUNNING|None", ""};
    return j;
  };
  auto runner = make_runner(c);
  Recorder ra, rb, rc;
  auto [a, b, dup] = run_coro(ioc, run_three(runner.get(), spec("a"), &ra, spec("b"), &rb, spec("a"), &rc), 10s);
  EXPECT_EQ(a.state, JobState::succeeded);
  EXPECT_EQ(b.state, JobState::failed);
  EXPECT_NE(b.message.find("max_jobs"), std::string::npos);
  EXPECT_EQ(dup.state, JobState::failed);
}

// kind=training through the fake Slurm: the profile script itself is submitted, parameters only reach
// input.json, and result.json is read only once sacct says COMPLETED.
struct TrainingTest : RunnerTest {
  fs::path script = launch.string() + "-profile.sh";
  void SetUp() override {
    RunnerTest::SetUp();
    std::ofstream(script) << "#!/bin/sh\n#SBATCH --mem=10M\nexit 0\n";
    fs::permissions(script, fs::perms(0755));
  }
  void TearDown() override {
    RunnerTest::TearDown();
    fs::remove(script);
  }
  SlurmRunnerConfig training_config(std::vector<std::string> allowed = {}) {
    auto c = config();  // partition = "debug": a site default that must not reach a profile's sbatch
    c.profiles = ProfileCatalog({Profile{"smoke", script, std::move(allowed), 4096}});
    return c;
  }
  static JobSpec training(std::string id, boost::json::object parameters, std::string profile = "smoke") {
    JobSpec s;
    s.job_id = std::move(id);
    s.lease_id = "lease-" + s.job_id;
    s.kind = "training";
    s.profile = std::move(profile);
    s.parameters = std::move(parameters);
    return s;
  }
  // The job "runs": squeue shows it RUNNING once, then not at all; sacct says `sacct`.
  void job_ends(std::string sacct, std::optional<std::string> result) {
    fake.on_submit = [this, sacct, result](const fs::path& dir) {
      FakeJob j;
      j.squeue = {"RUNNING|None", ""};
      j.sacct = sacct;
      if (result) std::ofstream(dir / "result.json") << *result;
      submitted_input = std::ifstream(dir / "input.json") ? read(dir / "input.json") : "<none>";
      return j;
    };
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string submitted_input;
};

TEST_F(TrainingTest, SubmitsTheProfileItselfWithInputAndResultPaths) {
  const std::string hostile = "$(touch /tmp/nymph-pwned) `id`; echo 'x' \"y\"\nz";
  job_ends("COMPLETED|0:0", R"({"ok":true,"n":[1,2]})");
  auto runner = make_runner(training_config());
  Recorder rec;
  auto s = training("t1", {{"message", hostile}});
  s.timeout = std::chrono::seconds(90);
  s.slurm_options["cpus-per-task"] = 2;
  auto final = run_coro(ioc, runner->run(s, rec), 10s);
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  ASSERT_TRUE(final.result);
  EXPECT_EQ(*final.result, boost::json::parse(R"({"ok":true,"n":[1,2]})"));
  EXPECT_EQ(submitted_input, boost::json::serialize(boost::json::object{{"message", hostile}}));

  ASSERT_EQ(fake.count("sbatch"), 1);
  const fs::path dir = launch / "t1-1";
  std::vector<std::string> expected{"sbatch", "--parsable", "--job-name=nymph-t1", "--chdir=" + dir.string(),
                                    "--output=" + (dir / "stdout.log").string(), "--error=" + (dir / "stderr.log").string(),
                                    "--partition=debug", "--cpus-per-task=2", "--time=2", script.string(),
                                    (dir / "input.json").string(), (dir / "result.json").string()};
  EXPECT_EQ(fake.calls[0], expected) << "the site's partition applies: the profile's #SBATCH lines do not set one";
  ASSERT_TRUE(fake.envs[0]);
  EXPECT_EQ(fake.envs[0]->at("NYMPH_INPUT"), (dir / "input.json").string());
  EXPECT_EQ(fake.envs[0]->at("NYMPH_RESULT"), (dir / "result.json").string());
  EXPECT_EQ(fake.envs[0]->at("NYMPH_JOB_ID"), "t1");
  for (const auto& call : fake.calls)
    for (const auto& arg : call) EXPECT_EQ(arg.find("pwned"), std::string::npos) << arg;
  for (const auto& u : rec.updates) EXPECT_FALSE(u.result) << "only the final update carries the result";
  runner->release("t1");
  runner.reset();
  EXPECT_FALSE(fs::exists(dir)) << "the job directory is cleaned after completion";
}

// Precedence of account/qos/partition for a profile's sbatch, one level at a time: runConfig.slurm (command
// line) > the profile's own #SBATCH lines (no site default on the command line, which would override them) >
// the site's [runners.slurm] defaults > Slurm's own defaults (nothing passed).
struct SiteDefaultsTest : TrainingTest {
  // The sbatch options of one submitted training job (what comes between --error=... and the script).
  std::vector<std::string> options_of(const std::string& profile_text, boost::json::object run_config,
                                      SlurmRunnerConfig c) {
    std::ofstream(script, std::ios::trunc) << profile_text;
    fs::permissions(script, fs::perms(0755));
    job_ends("COMPLETED|0:0", R"({"ok":true})");
    fake.calls.clear();
    auto runner = make_runner(std::move(c));
    Recorder rec;
    auto s = training("d" + std::to_string(++n), {});
    s.slurm_options = std::move(run_config);
    auto final = run_coro(ioc, runner->run(s, rec), 10s);
    EXPECT_EQ(final.state, JobState::succeeded) << final.message;
    runner->release(s.job_id);
    EXPECT_GE(fake.count("sbatch"), 1);
    if (fake.calls.empty()) return {};
    const auto& argv = fake.calls[0];
    auto first = std::find_if(argv.begin(), argv.end(), [](const auto& a) { return a.starts_with("--error="); });
    auto last = std::find(argv.begin(), argv.end(), script.string());
    EXPECT_TRUE(first != argv.end() && last != argv.end());
    return {first + 1, last};
  }
  SlurmRunnerConfig training_config_without_partition() {
    auto c = training_config();
    c.partition.clear();
    return c;
  }
  SlurmRunnerConfig site() {
    auto c = training_config();
    c.account = "site-acct";
    c.qos = "site-qos";
    c.partition = "debug";
    return c;
  }
  int n = 0;
  using V = std::vector<std::string>;
};

TEST_F(SiteDefaultsTest, SiteDefaultsApplyWhenNeitherJobNorProfileSetsThem) {
  EXPECT_EQ(options_of("#!/bin/sh\n#SBATCH --mem=10M\nexit 0\n", {}, site()),
            (V{"--partition=debug", "--account=site-acct", "--qos=site-qos"}));
}

TEST_F(SiteDefaultsTest, WithoutSiteDefaultsSlurmDecides) {
  EXPECT_EQ(options_of("#!/bin/sh\nexit 0\n", {}, training_config_without_partition()), V{});
}

TEST_F(SiteDefaultsTest, ProfileSbatchLinesWinOverSiteDefaults) {
  const std::string profile =
      "#!/bin/bash\n# reviewed by the site\n\n#SBATCH -A prof-acct\n#SBATCH --partition gpu\nexit 0\n";
  EXPECT_EQ(options_of(profile, {}, site()), V{"--qos=site-qos"})
      << "a site default on the command line would override the profile's #SBATCH line";
  EXPECT_EQ(options_of("#!/bin/sh\n#SBATCH --qos=prof-qos # long jobs\n", {}, site()),
            (V{"--partition=debug", "--account=site-acct"}));
}

TEST_F(SiteDefaultsTest, SbatchLinesAfterTheFirstCommandAreNotDirectives) {
  EXPECT_EQ(options_of("#!/bin/sh\necho start\n#SBATCH --account=late\n", {}, site()),
            (V{"--partition=debug", "--account=site-acct", "--qos=site-qos"}))
      << "sbatch stops reading #SBATCH lines at the first command";
}

TEST_F(SiteDefaultsTest, RunConfigWinsOverProfileAndSite) {
  const std::string profile = "#!/bin/sh\n#SBATCH -A prof-acct -q prof-qos\n#SBATCH -p gpu\nexit 0\n";
  EXPECT_EQ(options_of(profile, {{"account", "job-acct"}}, site()), V{"--account=job-acct"})
      << "the job's account on the command line; the profile's qos and partition stay";
  EXPECT_EQ(options_of("#!/bin/sh\nexit 0\n", {{"qos", "job-qos"}, {"partition", "big"}}, site()),
            (V{"--partition=big", "--account=site-acct", "--qos=job-qos"}));
}

TEST_F(SiteDefaultsTest, ABadSiteDefaultFailsTheJobNamingTheConfig) {
  auto c = site();
  c.account = "bad account";
  std::ofstream(script, std::ios::trunc) << "#!/bin/sh\nexit 0\n";
  auto runner = make_runner(c);
  Recorder rec;
  auto final = run_coro(ioc, runner->run(training("bad", {}), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("[runners.slurm] default"), std::string::npos) << final.message;
  EXPECT_TRUE(fake.calls.empty());
}

TEST_F(TrainingTest, FailedJobHasNoResultEvenIfItWroteOne) {
  job_ends("FAILED|3:0", R"({"partial":true})");
  auto runner = make_runner(training_config());
  Recorder rec;
  auto final = run_coro(ioc, runner->run(training("t2", {{"message", "hi"}}), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_EQ(final.exit_code, 3);
  EXPECT_FALSE(final.result);
}

TEST_F(TrainingTest, CompletedWithoutOrWithABadResultFails) {
  struct Case {
    std::optional<std::string> result;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{{std::nullopt, "wrote no result.json"},
                                         {std::string("{\"truncated\":"), "not valid JSON"},
                                         {std::string(kMaxResultBytes + 1, ' '), "at most"}}) {
    job_ends("COMPLETED|0:0", c.result);
    auto runner = make_runner(training_config());
    Recorder rec;
    auto final = run_coro(ioc, runner->run(training("t3", {}), rec), 10s);
    EXPECT_EQ(final.state, JobState::failed) << c.says;
    EXPECT_FALSE(final.result);
    EXPECT_NE(final.message.find("COMPLETED"), std::string::npos) << final.message;
    EXPECT_NE(final.message.find(c.says), std::string::npos) << final.message;
    runner->release("t3");
  }
}

TEST_F(TrainingTest, UnknownProfileBadParametersAndEnvSubmitNothing) {
  auto runner = make_runner(training_config({"message"}));
  struct Case {
    JobSpec spec;
    std::string says;
  };
  std::vector<Case> cases{{training("u1", {}, "nope"), "unknown training profile 'nope'"},
                          {training("u2", {{"other", 1}}), "parameter 'other' is not allowed"},
                          {training("u3", {{"message", std::string(5000, 'x')}}), "at most 4096"}};
  cases.push_back({training("u4", {}), "not environment variables"});
  cases.back().spec.env["LD_PRELOAD"] = "/tmp/x.so";
  cases.push_back({training("u5", {}), "runConfig"});
  cases.back().spec.slurm_options["wrap"] = "id";
  for (auto& c : cases) {
    Recorder rec;
    auto final = run_coro(ioc, runner->run(c.spec, rec), 10s);
    EXPECT_EQ(final.state, JobState::failed) << c.says;
    EXPECT_NE(final.message.find(c.says), std::string::npos) << final.message;
    EXPECT_FALSE(fs::exists(launch / (c.spec.job_id + "-1"))) << "nothing written for " << c.says;
  }
  EXPECT_TRUE(fake.calls.empty()) << "nothing reached Slurm";
}

TEST_F(TrainingTest, ProfilesOnlyRunnerRefusesCommandJobs) {
  auto c = training_config();
  c.profiles_only = true;
  auto runner = make_runner(c);
  Recorder rec;
  auto final = run_coro(ioc, runner->run(spec("c1", {"/bin/true"}), rec), 10s);
  EXPECT_EQ(final.state, JobState::failed);
  EXPECT_NE(final.message.find("allow_commands = false"), std::string::npos) << final.message;
  EXPECT_TRUE(fake.calls.empty());
}

TEST_F(TrainingTest, ResumedTrainingAttemptReadsItsResult) {
  job_ends("COMPLETED|0:0", R"({"resumed":1})");
  fake.jobs.clear();
  {
    auto runner = make_runner(training_config());
    fake.on_squeue = [&](int) { runner->stop("r1", StopReason::shutdown); };
    Recorder rec;
    auto u = run_coro(ioc, runner->run(training("r1", {}), rec), 10s);
    EXPECT_EQ(u.state, JobState::running) << u.message;
  }
  fake.on_squeue = nullptr;
  fake.jobs["1000"].squeue = {""};
  auto runner = make_runner(training_config());
  ASSERT_EQ(runner->in_flight().size(), 1u);
  Recorder rec;
  auto u = run_coro(ioc, runner->resume(runner->in_flight()[0], rec), 10s);
  ASSERT_EQ(u.state, JobState::succeeded) << u.message;
  ASSERT_TRUE(u.result);
  EXPECT_EQ(*u.result, boost::json::parse(R"({"resumed":1})"));
}

TEST_F(TrainingTest, WithoutAccountingACompletedProfileSeenInSqueueSucceeds) {
  // No sacct, no exit-status file (a profile script has no EXIT trap): squeue's COMPLETED is the only word.
  fake.accounting = false;
  fake.on_submit = [](const fs::path& dir) {
    FakeJob j;
    j.squeue = {"RUNNING|None", "COMPLETED|None"};
    std::ofstream(dir / "result.json") << R"({"loss":0.5})";
    return j;
  };
  auto runner = make_runner(training_config());
  Recorder rec;
  auto final = run_coro(ioc, runner->run(training("t6", {}), rec), 10s);
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  ASSERT_TRUE(final.result);
  EXPECT_EQ(*final.result, boost::json::parse(R"({"loss":0.5})"));
  EXPECT_EQ(fake.count("sacct"), 0) << "squeue settled it";
  runner->release("t6");
}

TEST_F(RunnerTest, BadLaunchDirIsAStartUpError) {
  auto c = config();
  c.launch_dir = "relative";
  EXPECT_THROW(make_runner(c), std::runtime_error);
  c.launch_dir = "/tmp/with space";
  EXPECT_THROW(make_runner(c), std::runtime_error);
}

}  // namespace
