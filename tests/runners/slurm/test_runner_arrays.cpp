// Job arrays: command attempts of one shape that wait while an sbatch of theirs is in flight go to Slurm as the
// tasks of one array, each still its own attempt. Driven through FakeSlurm, whose sbatch can be held open
// (hold_sbatch) so that a test decides exactly which attempts are waiting when the next sbatch is made.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fstream>
#include <set>

#include "runners/slurm/array_batcher.hpp"
#include "runners/slurm/journal.hpp"
#include "runners/slurm/script.hpp"
#include "tests/runners/slurm/runner_fixture.hpp"
#include "tests/support/run_coro.hpp"

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace nymph::runners;
using namespace nymph::runners::slurm;
using namespace std::chrono_literals;
using nymph::test::FakeJob;
using nymph::test::FakeSlurm;
using nymph::test::Recorder;
using nymph::test::run_coro;

// ---- the batching policy, stepped directly ----

TEST(ArrayBatcher, TheFirstOfAShapeStartsASubmitterTheOthersWaitForIt) {
  ArrayBatcher b(10);
  EXPECT_TRUE(b.add("A", 1)) << "no submitter of A yet: the caller starts one";
  EXPECT_FALSE(b.add("A", 2));
  EXPECT_FALSE(b.add("A", 3));
  EXPECT_TRUE(b.add("B", 4)) << "another shape has its own submitter";
  EXPECT_EQ(b.waiting("A"), 3u);
  EXPECT_EQ(b.waiting(), 4u);
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{1, 2, 3})) << "oldest first, all of them";
  EXPECT_EQ(b.waiting("A"), 0u);
  EXPECT_FALSE(b.add("A", 5)) << "A's submitter still works: 5 goes with its next sbatch";
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{5}));
  b.submitter_done("A");
  EXPECT_TRUE(b.add("A", 6)) << "after the submitter stopped, the next one starts another";
  EXPECT_EQ(b.take("B"), (std::vector<SubmissionTicket>{4}));
}

TEST(ArrayBatcher, ABatchHoldsAtMostMaxTasksInTheOrderTheyCame) {
  ArrayBatcher b(3);
  for (SubmissionTicket t = 0; t < 7; ++t) b.add("A", t);
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{0, 1, 2}));
  b.set_max_tasks(2);
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{3, 4}));
  b.set_max_tasks(0);
  EXPECT_EQ(b.max_tasks(), 1u) << "at least one";
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{5}));
  b.submitter_done("A");  // one still waits: ignored
  EXPECT_FALSE(b.add("A", 7)) << "the submitter was not let go while one waited";
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{6}));
  EXPECT_EQ(b.take("A"), (std::vector<SubmissionTicket>{7}));
  EXPECT_TRUE(b.take("nothing").empty());
}

// ---- the array script ----

TEST(ArrayScript, EachTaskRunsItsOwnJobScriptWithItsOwnOutputFiles) {
  JobSpec s;
  s.job_id = "a";
  s.argv = {"/bin/true"};
  s.timeout = std::chrono::seconds(90);
  const std::vector<SbatchOption> options{{"partition", "debug"}};
  const std::string shared = shared_directives(s, options);
  EXPECT_EQ(shared, "#SBATCH --partition=debug\n#SBATCH --time=2\n");
  auto text = render_array_script("nymph-array-a-1", "/l", shared, {"/l/a-1", "/l/b-1"});
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text,
            "#!/bin/sh\n"
            "#SBATCH --job-name=nymph-array-a-1\n"
            "#SBATCH --array=0-1\n"
            "#SBATCH --chdir=/l\n"
            "#SBATCH --output=/dev/null\n"
            "#SBATCH --error=/dev/null\n"
            "#SBATCH --partition=debug\n"
            "#SBATCH --time=2\n"
            "# Rendered by nymph: one task per attempt, each its own job.sbatch with its job's output files.\n"
            "case \"$SLURM_ARRAY_TASK_ID\" in\n"
            "  0) nymph_dir='/l/a-1' ;;\n"
            "  1) nymph_dir='/l/b-1' ;;\n"
            "  *) echo \"nymph: no task $SLURM_ARRAY_TASK_ID in this array\" >&2; exit 1 ;;\n"
            "esac\n"
            "cd \"$nymph_dir\" || exit 1\n"
            "exec /bin/sh \"$nymph_dir/job.sbatch\" >\"$nymph_dir/stdout.log\" 2>\"$nymph_dir/stderr.log\"\n");
  EXPECT_FALSE(render_array_script("n", "/l", shared, {}));
  EXPECT_FALSE(render_array_script("n", "/l", shared, {"/l/it's"})) << "a path sbatch cannot take";
}

TEST(ArrayScript, TheShapeIsEveryLineThatDoesNotNameTheAttempt) {
  JobSpec a;
  a.job_id = "a";
  a.argv = {"/bin/true"};
  JobSpec b = a;
  b.job_id = "b";
  b.env["X"] = "1";  // what a task runs is in its own job.sbatch, not in the shape
  const std::vector<SbatchOption> debug{{"partition", "debug"}};
  EXPECT_EQ(shared_directives(a, debug), shared_directives(b, debug));
  EXPECT_NE(shared_directives(a, debug), shared_directives(a, {{"partition", "long"}}));
  b.timeout = std::chrono::seconds(60);
  EXPECT_NE(shared_directives(a, debug), shared_directives(b, debug)) << "a different time limit";
}

// ---- the runner ----

struct ArrayTest : nymph::test::SlurmRunnerFixture {
  // Each job prints its own id, runs, and leaves squeue.
  void SetUp() override {
    SlurmRunnerFixture::SetUp();
    fake.on_submit = [](const fs::path& dir) {
      FakeJob j;
      j.squeue = {"RUNNING|None", ""};
      j.stdout_bytes = dir.filename().string() + "\n";
      return j;
    };
  }
  static JobSpec spec_in(std::string id, const std::string& partition) {
    JobSpec s = spec(std::move(id));
    s.slurm_options["partition"] = partition;
    return s;
  }
};

// Runs `specs` on `runner` with sbatch held open: the first `leaders` attempts start, and once their sbatch calls
// are in flight the others start and wait for them (`waiting` of them, with `in_flight` sbatch calls held in
// all, and `waiting_commands` Slurm commands waiting for a slot); then Slurm answers. Returns every final update,
// in the order of `specs`.
asio::awaitable<std::vector<JobUpdate>> run_burst(SlurmRunner* runner, FakeSlurm* fake, std::vector<JobSpec> specs,
                                                  std::vector<Recorder>* recs, std::size_t waiting,
                                                  std::size_t leaders = 1, int in_flight = -1,
                                                  std::size_t waiting_commands = 0) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<std::optional<JobUpdate>> ended(specs.size());
  std::size_t done = 0;
  asio::steady_timer tick(ex);
  boost::system::error_code ec;
  auto start = [&](std::size_t i) {
    asio::co_spawn(ex, runner->run(specs[i], (*recs)[i]), [&ended, &done, i](std::exception_ptr e, JobUpdate u) {
      if (e) std::rethrow_exception(e);
      ended[i] = std::move(u);
      ++done;
    });
  };
  fake->hold_sbatch = true;
  for (std::size_t i = 0; i < leaders; ++i) start(i);
  while (fake->sbatch_in_flight < static_cast<int>(leaders)) {
    tick.expires_after(1ms);
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  for (std::size_t i = leaders; i < specs.size(); ++i) start(i);
  if (in_flight < 0) in_flight = static_cast<int>(leaders);
  while (fake->sbatch_in_flight < in_flight || runner->waiting_submissions() < waiting ||
         runner->waiting_commands() < waiting_commands) {
    tick.expires_after(1ms);
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  fake->release_sbatch();
  while (done < specs.size()) {
    tick.expires_after(1ms);
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  std::vector<JobUpdate> out;
  for (auto& u : ended) out.push_back(std::move(*u));
  co_return out;
}

std::vector<JobSpec> jobs_named(const std::vector<std::string>& ids) {
  std::vector<JobSpec> specs;
  for (const auto& id : ids) specs.push_back(nymph::test::SlurmRunnerFixture::spec(id));
  return specs;
}

TEST_F(ArrayTest, AttemptsWaitingForAnSbatchGoAsOneArrayEachTaskItsOwnAttempt) {
  auto runner = make_runner(config());
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3", "j4", "j5"};
  std::vector<Recorder> recs(ids.size());
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);

  EXPECT_EQ(fake.count("sbatch"), 2) << "the first alone (nothing waited yet), then the other five as one array";
  ASSERT_EQ(fake.array_sizes, (std::vector<std::size_t>{5}));
  // Which attempt's directory was ready first (and went alone) is up to the I/O threads.
  std::set<std::string> slurm_ids;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ended[i].state, JobState::succeeded) << ids[i] << ": " << ended[i].message;
    ASSERT_TRUE(ended[i].slurm_job_id) << ids[i];
    const std::string& id = *ended[i].slurm_job_id;
    slurm_ids.insert(id);
    EXPECT_EQ(fake.jobs[id].dir, launch / (ids[i] + "-1")) << id << " is the task of " << ids[i];
    EXPECT_EQ(recs[i].out, ids[i] + "-1\n") << "each task's own output, from its own job directory";
    ASSERT_FALSE(recs[i].updates.empty());
    EXPECT_EQ(recs[i].updates.front().slurm_job_id, id) << "reported running with its own id";
    if (id != "1000") {
      EXPECT_TRUE(fake.jobs[id].name.starts_with("nymph-array-")) << fake.jobs[id].name;
    }
  }
  EXPECT_EQ(slurm_ids, (std::set<std::string>{"1000", "1001_0", "1001_1", "1001_2", "1001_3", "1001_4"}));
  const std::string& script = fake.array_scripts.at(0);
  EXPECT_NE(script.find("#SBATCH --array=0-4\n"), std::string::npos) << script;
  EXPECT_EQ(fake.count("scontrol"), 1) << "MaxArraySize, read once";
  bool squeue_saw_tasks = false;
  for (const auto& call : fake.calls)
    squeue_saw_tasks = squeue_saw_tasks || (call[0] == "squeue" && call.back().find("1001_4") != std::string::npos);
  EXPECT_TRUE(squeue_saw_tasks) << "tasks are tracked by their own ids";
  EXPECT_TRUE(fs::is_empty(launch / kArrayScriptDir)) << "the array script is gone once sbatch returned";
  // Every task was journaled before it was reported: a restarted manager would find all six.
  auto journal = read_journal(launch / kJournalFile);
  ASSERT_TRUE(journal);
  EXPECT_EQ(journal->size(), ids.size());
  EXPECT_EQ(journal->back().slurm_job_id, "1001_4");
  EXPECT_EQ(journal->back().job_name, fake.jobs["1001_4"].name);
}

TEST_F(ArrayTest, AttemptsOfDifferentShapesNeverShareAnArray) {
  auto runner = make_runner(config());
  std::vector<JobSpec> specs{spec_in("a0", "debug"), spec_in("b0", "long"),  spec_in("a1", "debug"),
                             spec_in("b1", "long"),  spec_in("a2", "debug"), spec_in("b2", "long")};
  std::vector<Recorder> recs(specs.size());
  // Each shape's first attempt is in an sbatch of its own; the other two of each wait for it.
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, specs, &recs, 4, 2), 10s);
  const std::string a_dirs = "nymph_dir='" + launch.string() + "/a", b_dirs = "nymph_dir='" + launch.string() + "/b";
  for (const auto& u : ended) EXPECT_EQ(u.state, JobState::succeeded) << u.message;
  EXPECT_EQ(fake.count("sbatch"), 4);
  ASSERT_EQ(fake.array_sizes, (std::vector<std::size_t>{2, 2}));
  for (const auto& script : fake.array_scripts) {
    const bool debug = script.find("--partition=debug") != std::string::npos;
    const bool long_ = script.find("--partition=long") != std::string::npos;
    EXPECT_NE(debug, long_) << script;
    EXPECT_NE(script.find(debug ? a_dirs : b_dirs), std::string::npos) << script;
    EXPECT_EQ(script.find(debug ? b_dirs : a_dirs), std::string::npos) << "no task of the other shape: " << script;
  }
}

TEST_F(ArrayTest, MaxArraySizeOfTheClusterCapsEachArray) {
  fake.max_array_size = 3;
  auto c = config();
  c.max_array_tasks = 100;
  auto runner = make_runner(c);
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3", "j4", "j5", "j6", "j7"};
  std::vector<Recorder> recs(ids.size());
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);
  for (const auto& u : ended) EXPECT_EQ(u.state, JobState::succeeded) << u.message;
  EXPECT_EQ(fake.array_sizes, (std::vector<std::size_t>{3, 3})) << "7 waiting: 3 + 3 + the last alone";
  EXPECT_EQ(fake.count("sbatch"), 4);
}

TEST_F(ArrayTest, MaxArrayTasksOfOneIsOneSbatchPerAttempt) {
  auto c = config();
  c.max_array_tasks = 1;
  auto runner = make_runner(c);
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3"};
  std::vector<Recorder> recs(ids.size());
  // Without arrays nothing waits for another's sbatch: each attempt makes its own (all four held at once).
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, 0, 1, 4), 10s);
  for (const auto& u : ended) EXPECT_EQ(u.state, JobState::succeeded) << u.message;
  EXPECT_EQ(fake.count("sbatch"), 4);
  EXPECT_TRUE(fake.array_sizes.empty());
  EXPECT_EQ(fake.count("scontrol"), 0);
}

TEST_F(ArrayTest, OneByOneABurstRunsAtMostMaxConcurrentCommandsSbatchAtOnce) {
  auto c = config();
  c.max_array_tasks = 1;
  c.max_concurrent_commands = 2;
  auto runner = make_runner(c);
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3", "j4", "j5"};
  std::vector<Recorder> recs(ids.size());
  // No RPC budget: only the slots hold them back. Two sbatch calls held open, the other four wait for a slot.
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, 0, 1, 2, 4), 10s);
  for (const auto& u : ended) EXPECT_EQ(u.state, JobState::succeeded) << u.message;
  EXPECT_EQ(fake.max_sbatch_in_flight, 2) << "never more than max_concurrent_commands sbatch processes at once";
  EXPECT_EQ(fake.count("sbatch"), 6);
  EXPECT_EQ(runner->waiting_commands(), 0u);
}

TEST_F(ArrayTest, ARefusedArrayIsSentOneByOneWhenItsFirstAttemptAloneIsAccepted) {
  fake.refuse_arrays = true;
  auto runner = make_runner(config());
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3"};
  std::vector<Recorder> recs(ids.size());
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ended[i].state, JobState::succeeded) << ids[i] << ": " << ended[i].message;
    EXPECT_EQ(recs[i].out, ids[i] + "-1\n");
  }
  EXPECT_EQ(fake.array_scripts.size(), 1u) << "one array tried";
  EXPECT_EQ(fake.count("sbatch"), 1 + 1 + 3) << "j0 alone, the refused array, then j1..j3 one by one";
}

TEST_F(ArrayTest, WhenTheFirstAttemptAloneIsRefusedTooEveryAttemptOfTheArrayFailsWithWhy) {
  auto runner = make_runner(config());
  fake.sbatch_answer = nymph::slurm::CommandResult{1, "", "sbatch: error: Invalid account or account/partition\n"};
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3"};
  std::vector<Recorder> recs(ids.size());
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ended[i].state, JobState::failed) << ids[i];
    EXPECT_NE(ended[i].message.find("Invalid account"), std::string::npos) << ended[i].message;
    EXPECT_TRUE(recs[i].updates.empty()) << "never reported submitted";
  }
  EXPECT_EQ(fake.count("sbatch"), 3) << "j0 alone, the array, its first attempt alone: not one per attempt";
  EXPECT_EQ(runner->tracked(), 0u);
  EXPECT_TRUE(read_journal(launch / kJournalFile).value().empty());
  for (const auto& id : ids) runner->release(id);
  runner.reset();
  for (const auto& id : ids) EXPECT_FALSE(fs::exists(launch / (id + "-1"))) << "nothing of a refused attempt stays";
}

// The tasks of an array the journal could not record are cancelled, each by its own id, and each attempt fails.
TEST_F(ArrayTest, TasksTheJournalCannotRecordAreEachCancelledAndFail) {
  auto c = config();
  c.before_journal_append = [] { return nymph::Result<void>(nymph::fail("injected: No space left on device")); };
  auto runner = make_runner(c);
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3"};
  std::vector<Recorder> recs(ids.size());
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);
  ASSERT_EQ(fake.array_sizes, (std::vector<std::size_t>{3}));
  std::set<std::string> cancelled;
  for (const auto& call : fake.calls)
    if (call[0] == "scancel") cancelled.insert(call.begin() + 1, call.end());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ended[i].state, JobState::failed) << ids[i];
    ASSERT_TRUE(ended[i].slurm_job_id) << ids[i];
    EXPECT_NE(ended[i].message.find("; Slurm job " + *ended[i].slurm_job_id + " cancelled"), std::string::npos)
        << ended[i].message;
    EXPECT_TRUE(cancelled.count(*ended[i].slurm_job_id)) << *ended[i].slurm_job_id;
    EXPECT_TRUE(recs[i].updates.empty()) << "never reported running";
  }
  EXPECT_EQ(cancelled, (std::set<std::string>{"1000", "1001_0", "1001_1", "1001_2"}));
  EXPECT_EQ(fake.count("squeue"), 0) << "never tracked";
  EXPECT_EQ(runner->tracked(), 0u);
}

TEST_F(ArrayTest, CancellingOneTaskCancelsThatTaskAlone) {
  fake.on_submit = [](const fs::path& dir) {
    FakeJob j;
    j.squeue = {"RUNNING|None", "RUNNING|None", "RUNNING|None", ""};
    j.stdout_bytes = dir.filename().string() + "\n";
    return j;
  };
  auto runner = make_runner(config());
  const std::vector<std::string> ids{"j0", "j1", "j2", "j3"};
  std::vector<Recorder> recs(ids.size());
  std::optional<std::size_t> cancelled;
  fake.on_squeue = [&](int) {
    for (std::size_t i = 0; i < ids.size() && !cancelled; ++i) {
      if (recs[i].updates.empty() || recs[i].updates.front().slurm_job_id.value_or("").find('_') == std::string::npos)
        continue;
      cancelled = i;  // the first task of the array seen tracked
      runner->stop(ids[i], StopReason::user_cancel);
    }
  };
  auto ended = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);
  ASSERT_TRUE(cancelled);
  for (std::size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(ended[i].state, i == *cancelled ? JobState::cancelled : JobState::succeeded) << ids[i];
  std::vector<std::vector<std::string>> scancels;
  for (const auto& call : fake.calls)
    if (call[0] == "scancel") scancels.push_back(call);
  ASSERT_EQ(scancels.size(), 1u);
  EXPECT_EQ(scancels[0], (std::vector<std::string>{"scancel", *ended[*cancelled].slurm_job_id})) << "the task alone";
}

TEST_F(ArrayTest, ArrayTasksLeftRunningAtShutdownAreResumedByTheNextRunner) {
  fake.on_submit = [](const fs::path& dir) {
    FakeJob j;
    j.squeue = {"RUNNING|None"};
    j.stdout_bytes = dir.filename().string() + "\n";
    return j;
  };
  const std::vector<std::string> ids{"j0", "j1", "j2"};
  {
    auto runner = make_runner(config());
    fake.on_squeue = [&](int n) {
      if (n == 2)
        for (const auto& id : ids) runner->stop(id, StopReason::shutdown);
    };
    std::vector<Recorder> recs(ids.size());
    auto left = run_coro(ioc, run_burst(runner.get(), &fake, jobs_named(ids), &recs, ids.size() - 1), 10s);
    for (const auto& u : left) EXPECT_EQ(u.state, JobState::running) << "detached, not final";
  }
  fake.on_squeue = nullptr;
  for (auto& [id, job] : fake.jobs) job.squeue = {"RUNNING|None", ""};
  auto runner = make_runner(config());
  auto listed = runner->in_flight();
  ASSERT_EQ(listed.size(), 3u);
  for (const auto& attempt : listed) {
    Recorder rec;
    auto u = run_coro(ioc, runner->resume(attempt, rec), 10s);
    EXPECT_EQ(u.state, JobState::succeeded) << attempt.job_id << ": " << u.message;
    EXPECT_EQ(rec.out, attempt.job_id + "-1\n");
    runner->release(attempt.job_id);
  }
  std::set<std::string> resumed;
  for (const auto& attempt : listed) resumed.insert(std::any_cast<JournalEntry>(attempt.runner_data).slurm_job_id);
  EXPECT_EQ(resumed, (std::set<std::string>{"1000", "1001_0", "1001_1"}));
}

}  // namespace
