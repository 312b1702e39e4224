// The Slurm runner against the real lab cluster, as the unprivileged lab user. These tests share the lab's
// two CPUs, so ctest runs them one at a time (RESOURCE_LOCK); the slow ones live in
// test_slurm_runner_slow.cpp and run alongside.
#include <fstream>
#include <set>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "slurm/listing.hpp"
#include "tests/slurm/lab/lab_runner_support.hpp"

namespace {

using namespace nymph::test::lab;
using nymph::test::run_command;
using nymph::test::run_coro;

TEST(SlurmRunnerLab, CompletedWithByteExactOutput) {
  Lab lab("completed");
  Recorder rec;
  auto s = spec("completed", {NYMPH_TEST_CHILD, "--binary", "--write", "300000", "--write-err", "5000"});
  auto final = lab.run(s, rec);
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  ASSERT_TRUE(final.slurm_job_id);
  EXPECT_EQ(final.exit_code, 0);
  // (JobName is not compared: slurmdbd may show the placeholder "allocation" for a second or so.)
  EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "State,ExitCode", "COMPLETED|0:0"), "COMPLETED|0:0");
  ASSERT_FALSE(rec.updates.empty());
  EXPECT_EQ(rec.updates[0].state, JobState::running);
  EXPECT_EQ(rec.updates[0].slurm_job_id, final.slurm_job_id);

  auto local = run_command({NYMPH_TEST_CHILD, "--binary", "--write", "300000", "--write-err", "5000"});
  ASSERT_EQ(local.out.size(), 256u + 300000u);
  EXPECT_TRUE(rec.out == local.out) << "stdout differs: " << rec.out.size() << " bytes received";
  EXPECT_TRUE(rec.err == local.err) << "stderr differs: " << rec.err.size() << " bytes received";

  EXPECT_TRUE(fs::exists(lab.launch / (s.job_id + "-1")));
  lab.runner->release(s.job_id);
  lab.runner.reset();  // release() removes the directory on the runner's I/O threads; the destructor waits for it
  EXPECT_FALSE(fs::exists(lab.launch / (s.job_id + "-1")));
}

TEST(SlurmRunnerLab, FailedWithExitThree) {
  Lab lab("failed");
  Recorder rec;
  auto final = lab.run(spec("failed", {"/bin/sh", "-c", "echo before; exit 3"}), rec);
  EXPECT_EQ(final.state, JobState::failed) << final.message;
  EXPECT_EQ(final.exit_code, 3);
  EXPECT_NE(final.message.find("FAILED"), std::string::npos) << final.message;
  EXPECT_EQ(rec.out, "before\n");
  EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "State,ExitCode", "FAILED|3:0"), "FAILED|3:0");
}

TEST(SlurmRunnerLab, UserCancelEndsCancelled) {
  Lab lab("cancel");
  Recorder rec;
  auto s = spec("cancel", {"/bin/sleep", "300"});
  rec.on_update = [&](const JobUpdate& u) {
    if (u.message.find("is RUNNING") != std::string::npos) lab.runner->stop(s.job_id, StopReason::user_cancel);
  };
  auto final = lab.run(s, rec);
  EXPECT_EQ(final.state, JobState::cancelled) << final.message;
  EXPECT_EQ(lab.count("scancel"), 1);
  EXPECT_TRUE(sacct_fields(*final.slurm_job_id, "State").starts_with("CANCELLED")) << sacct_fields(*final.slurm_job_id, "State");
}

TEST(SlurmRunnerLab, PartitionAndCpusPerTaskAreHonoured) {
  Lab lab("options");
  Recorder rec;
  auto s = spec("options", {"/bin/true"});
  s.slurm_options["partition"] = "long";
  s.slurm_options["cpus-per-task"] = 2;
  auto final = lab.run(s, rec, 200s);  // may wait for a CPU held by a parallel slow test
  ASSERT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "Partition,ReqCPUS,AllocCPUS", "long|2|2"), "long|2|2");
}

TEST(SlurmRunnerLab, InjectionAttemptsAreRejectedAndNothingReachesSlurm) {
  Lab lab("inject");
  std::vector<JobSpec> specs;
  auto add = [&](const char* id, const char* key, boost::json::value v) {
    JobSpec s = spec(id, {"/usr/bin/touch", "/tmp/nymph-pwned"});
    s.slurm_options[key] = v;
    specs.push_back(s);
  };
  add("inj1", "partition", "debug\n#SBATCH --uid=0");
  add("inj2", "account", "$(touch /tmp/nymph-pwned)");
  add("inj3", "time", "10;id");
  add("inj4", "wrap", "id");
  add("inj5", "constraint", "a` touch /tmp/nymph-pwned`");
  add("inj6", "qos", boost::json::value(boost::json::string(std::string("normal\0x", 8))));
  specs.push_back(spec("inj7$(id)", {"/bin/true"}));
  JobSpec env_spec = spec("inj8", {"/bin/true"});
  env_spec.env["A;touch /tmp/nymph-pwned"] = "x";
  specs.push_back(env_spec);
  for (auto& s : specs) {
    Recorder rec;
    auto final = lab.run(s, rec);
    EXPECT_EQ(final.state, JobState::failed) << s.job_id;
    EXPECT_FALSE(final.message.empty());
    EXPECT_TRUE(rec.updates.empty());
  }
  EXPECT_TRUE(lab.calls->empty()) << "no Slurm command at all";
  for (auto& s : specs) {
    auto r = run_command({"sacct", "-X", "-n", "-P", "-S", "now-1hours", "--name=nymph-" + s.job_id, "-o", "JobID"});
    EXPECT_EQ(r.out, "") << s.job_id;
  }
}

TEST(SlurmRunnerLab, AccountingDisabledSettlesFromSqueuesFinalState) {
  // Slurm without accounting storage answers every sacct with this message and exit status 1 (measured
  // with SLURM_LAB_ACCOUNTING=none, see tests/slurm-lab/README.md). Restarting the shared lab without
  // slurmdbd would disturb other suites, so sacct is pointed at a stand-in that fails the same way. With
  // `squeue -t all` the finished job is still listed (MinJobAge) with its exit code: that settles it.
  fs::path fake_dir = fs::path(env_or("SLURM_LAB_JOBS_DIR", "/var/lib/nymph-slurm-lab/jobs")) /
                      ("nymph-test-noacct-" + std::to_string(::getpid()));
  fs::create_directories(fake_dir);
  fs::path fake_sacct = fake_dir / "sacct";
  std::ofstream(fake_sacct) << "#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n";
  fs::permissions(fake_sacct, fs::perms::owner_all);
  {
    Lab lab("noacct", [&](SlurmRunnerConfig& c) { c.sacct = fake_sacct.string(); });
    Recorder rec;
    auto final = lab.run(spec("noacct", {"/bin/sh", "-c", "exit 3"}), rec);
    EXPECT_EQ(final.state, JobState::failed) << final.message;
    EXPECT_EQ(final.exit_code, 3) << "squeue's exit_code 768 read as exit 3";
    EXPECT_NE(final.message.find("FAILED"), std::string::npos) << final.message;
    EXPECT_EQ(lab.count(fake_sacct.string()), 0) << "squeue settled it";
    EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "State,ExitCode", "FAILED|3:0"), "FAILED|3:0") << "the real record agrees";
    // The journal held the job's identity: its name and the cluster (scontrol's ClusterName on this lab).
    for (const auto& c : *lab.calls) {
      if (c.argv[0] != "squeue" || !c.result) continue;
      EXPECT_NE(c.result->out.find("|" + env_or("SLURM_LAB_CLUSTER", "nymphlab") + "|nymph-" + "noacct-"),
                std::string::npos) << c.result->out;
    }
    EXPECT_EQ(lab.count("scontrol"), 1);
  }
  fs::remove_all(fake_dir);
}

TEST(SlurmRunnerLab, AJobQueuedLongerThanMaxQueueDurationIsCancelledAndFails) {
  // sbatch through a wrapper that submits held (JobHeldUser): the job never starts, uses no CPU, and queue
  // time is all it has. max_poll_duration is short too: it must not count before Slurm starts the job.
  fs::path wrap_dir = fs::path(env_or("SLURM_LAB_JOBS_DIR", "/var/lib/nymph-slurm-lab/jobs")) /
                      ("nymph-test-held-" + std::to_string(::getpid()));
  fs::create_directories(wrap_dir);
  fs::path held_sbatch = wrap_dir / "sbatch";
  std::ofstream(held_sbatch) << "#!/bin/sh\nexec sbatch --hold \"$@\"\n";
  fs::permissions(held_sbatch, fs::perms::owner_all);
  {
    Lab lab("queued", [&](SlurmRunnerConfig& c) {
      c.sbatch = held_sbatch.string();
      c.max_queue_duration = 3s;
      c.max_poll_duration = 1s;
    });
    Recorder rec;
    auto final = lab.run(spec("queued", {"/bin/true"}), rec);
    EXPECT_EQ(final.state, JobState::failed) << final.message;
    EXPECT_NE(final.message.find("queued longer than max_queue_duration (3s)"), std::string::npos) << final.message;
    ASSERT_TRUE(final.slurm_job_id);
    EXPECT_EQ(lab.count("scancel"), 1);
    bool held = false;
    for (const auto& u : rec.updates) held = held || u.message.find("JobHeldUser") != std::string::npos;
    EXPECT_TRUE(held) << "it was pending, held, until cancelled";
    EXPECT_EQ(sacct_fields_settled(*final.slurm_job_id, "State", "CANCELLED by " + std::to_string(::getuid())),
              "CANCELLED by " + std::to_string(::getuid()));
  }
  fs::remove_all(wrap_dir);
}

TEST(SlurmRunnerLab, ManagerDiesMidJobAndANewRunnerResumesFromTheJournal) {
  Lab lab("restart");
  auto s = spec("restart", {"/bin/sh", "-c", "echo started; sleep 8; echo finished"});
  auto config = [&] {
    SlurmRunnerConfig c;
    c.launch_dir = lab.launch;
    c.poll_interval = 1s;
    c.output_interval = 200ms;
    return c;
  };
  Recorder first;
  std::string slurm_id;
  {
    auto ioc = std::make_unique<asio::io_context>();
    auto runner = std::make_unique<SlurmRunner>(ioc->get_executor(), config(), std::make_unique<ChildCommandRunner>(),
                                                nymph::null_logger());
    bool returned = false;
    first.on_update = [&](const JobUpdate& u) {
      if (u.message.find("is RUNNING") != std::string::npos) ioc->stop();
    };
    asio::co_spawn(*ioc, runner->run(s, first), [&](std::exception_ptr, JobUpdate) { returned = true; });
    ioc->run_for(60s);
    ASSERT_FALSE(returned);
    ASSERT_FALSE(first.updates.empty());
    slurm_id = first.updates[0].slurm_job_id.value();
    runner.reset();  // the manager goes away mid-job: no stop(), no scancel
    ioc.reset();     // and every coroutine frame with it
  }
  auto q = run_command({"squeue", "--noheader", "-j", slurm_id, "-o", "%T"});
  EXPECT_EQ(q.out, "RUNNING\n") << "the job survives the manager";

  Recorder second;
  lab.runner = std::make_unique<SlurmRunner>(lab.ioc.get_executor(), config(), std::make_unique<ChildCommandRunner>(),
                                             nymph::null_logger());
  ASSERT_EQ(lab.runner->in_flight().size(), 1u);
  JournalEntry entry = lab.runner->journaled()[0];
  EXPECT_EQ(entry.job_id, s.job_id);
  EXPECT_EQ(entry.slurm_job_id, slurm_id);
  EXPECT_EQ(entry.lease_id, s.lease_id);
  auto final = run_coro(lab.ioc, lab.runner->resume(entry, second), 60s);
  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(second.out, "started\nfinished\n");
  int finals = 1;
  for (const auto& u : first.updates) finals += is_final(u.state);
  for (const auto& u : second.updates) finals += is_final(u.state);
  EXPECT_EQ(finals, 1) << "exactly one final update";
  lab.runner->release(s.job_id);
  lab.runner.reset();  // its journal line is written by the time the runner is gone
  lab.runner = std::make_unique<SlurmRunner>(lab.ioc.get_executor(), config(), std::make_unique<ChildCommandRunner>(),
                                             nymph::null_logger());
  EXPECT_TRUE(lab.runner->in_flight().empty());
}

// Eight attempts: the first one's sbatch is held open while the other seven come and wait for it. They go to
// Slurm as one job array, and each task is its own job: its own id, output and final state in squeue and sacct,
// and scancel of one task ends that task alone.
asio::awaitable<std::vector<JobUpdate>> run_array_burst(Lab* lab, std::vector<JobSpec> specs, std::vector<Recorder>* recs,
                                                        std::size_t cancelled) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<std::optional<JobUpdate>> ended(specs.size());
  std::size_t done = 0;
  auto start = [&](std::size_t i) {
    asio::co_spawn(ex, lab->runner->run(specs[i], (*recs)[i]), [&ended, &done, i](std::exception_ptr e, JobUpdate u) {
      if (e) std::rethrow_exception(e);
      ended[i] = std::move(u);
      ++done;
    });
  };
  asio::steady_timer tick(ex);
  boost::system::error_code ec;
  auto wait_until = [&](auto&& condition) -> asio::awaitable<void> {
    while (!condition()) {
      tick.expires_after(20ms);
      co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  };
  lab->gate->holding = true;
  start(0);
  co_await wait_until([&] { return lab->gate->in_flight == 1; });
  for (std::size_t i = 1; i < specs.size(); ++i) start(i);
  co_await wait_until([&] { return lab->runner->waiting_submissions() == specs.size() - 1; });
  lab->gate->open();
  // The long task is cancelled once it has printed, so it is RUNNING as its siblings are.
  co_await wait_until([&] { return (*recs)[cancelled].out.find("task") != std::string::npos; });
  lab->runner->stop(specs[cancelled].job_id, StopReason::user_cancel);
  co_await wait_until([&] { return done == specs.size(); });
  std::vector<JobUpdate> out;
  for (auto& u : ended) out.push_back(std::move(*u));
  co_return out;
}

TEST(SlurmRunnerLab, ABurstGoesAsOneJobArrayAndEachTaskIsItsOwnJob) {
  Lab lab("arrays");
  constexpr std::size_t kJobs = 8, kCancelled = 3;
  std::vector<JobSpec> specs;
  for (std::size_t i = 0; i < kJobs; ++i)
    specs.push_back(spec("array" + std::to_string(i),
                         {"/bin/sh", "-c", "echo task $0; sleep $1", std::to_string(i), i == kCancelled ? "300" : "1"}));
  std::vector<Recorder> recs(kJobs);
  auto ended = run_coro(lab.ioc, run_array_burst(&lab, specs, &recs, kCancelled), 180s);

  EXPECT_EQ(lab.count("sbatch"), 2) << "the first alone, the seven that waited for it as one array";
  std::set<std::string> ids;
  const std::string array_id = ended[1].slurm_job_id.value_or("").substr(0, ended[1].slurm_job_id.value_or("").find('_'));
  for (const auto& u : ended) ids.insert(u.slurm_job_id.value_or(""));
  std::set<std::string> expected{ended[0].slurm_job_id.value_or("")};
  for (std::size_t k = 0; k < kJobs - 1; ++k) expected.insert(array_id + "_" + std::to_string(k));
  EXPECT_EQ(ids, expected) << "the first alone, and seven tasks of one array (in the order the I/O threads prepared them)";
  EXPECT_EQ(ended[0].slurm_job_id.value_or("_").find('_'), std::string::npos);
  for (std::size_t i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(ended[i].slurm_job_id) << i;
    const std::string& id = *ended[i].slurm_job_id;
    EXPECT_EQ(recs[i].out, "task " + std::to_string(i) + "\n") << id << ": its own output";
    if (i == kCancelled) {
      EXPECT_EQ(ended[i].state, JobState::cancelled) << ended[i].message;
      EXPECT_TRUE(sacct_fields(id, "State").starts_with("CANCELLED")) << sacct_fields(id, "State");
    } else {
      EXPECT_EQ(ended[i].state, JobState::succeeded) << id << ": " << ended[i].message;
      EXPECT_EQ(sacct_fields_settled(id, "State,ExitCode", "COMPLETED|0:0"), "COMPLETED|0:0") << id;
    }
  }
  int scancelled = 0;
  for (const auto& call : *lab.calls) {
    if (call.argv[0] != "scancel") continue;
    ++scancelled;
    EXPECT_EQ(call.argv, (std::vector<std::string>{"scancel", *ended[kCancelled].slurm_job_id})) << "the task alone";
  }
  EXPECT_EQ(scancelled, 1);
}

TEST(SlurmRunnerLab, ListingShowsOurHeldJob) {
  const std::string name = "nymph-list-" + std::to_string(::getpid());
  auto sub = run_command({"sbatch", "--parsable", "--hold", "--job-name=" + name, "--chdir=/tmp", "--output=/dev/null",
                          "--wrap=true"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  std::string id = sub.out.substr(0, sub.out.find_first_of(";\n"));
  ChildCommandRunner commands;
  asio::io_context ioc;
  auto rows = run_coro(ioc, list_slurm_jobs(commands, {}), 60s);
  run_command({"scancel", id});
  ASSERT_TRUE(rows) << rows.error().message;
  auto it = std::find_if(rows->begin(), rows->end(), [&](const SlurmJobRow& r) { return r.id == id; });
  ASSERT_NE(it, rows->end());
  EXPECT_EQ(it->state, "starting");
  EXPECT_EQ(it->slurm_state, "PENDING");
  EXPECT_EQ(it->type, "debug");
  EXPECT_EQ(it->name, name);
  EXPECT_EQ(it->tags.at("account"), "nymph");
  EXPECT_EQ(it->submitted.size(), 19u);
}

}  // namespace
