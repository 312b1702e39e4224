// Runner choice follows the kind (docs/protocol.md, "Runner choice"), over HTTP against a real nymph-control:
// a training job submitted without a runner goes to a worker with the slurm runner when one can take it, to
// process only where no Slurm worker could; a command job goes to process; a named runner pins the job.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tests/control/worker_api.hpp"

using namespace nymph;
using namespace nymph::test;

namespace {

const std::string kSeedPayload = R"({"profile":"smoke","parameters":{"message":"hello"}})";

class RunnerChoice : public ::testing::Test {
 protected:
  ControlServer cp_{{.poll_timeout = "200ms"}};
  WorkerApi api_{cp_};

  WorkerApi::Worker worker(std::vector<std::string> runners, std::vector<std::string> profiles = {"smoke"}) {
    auto reg = WorkerApi::registration(std::nullopt, {}, std::move(runners));
    reg.profiles = std::move(profiles);
    return api_.register_with(reg);
  }

  // The seed's exact command line: `nymph-control submit --kind training --payload '...'` (no --runner).
  std::string submit_seed() {
    auto r = cp_.admin({"submit", "--kind", "training", "--payload", kSeedPayload, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    auto job = boost::json::parse(r.out).as_object();
    EXPECT_EQ(job.at("runner"), "auto") << r.out << " (queued, not yet chosen)";
    return std::string(job.at("id").as_string());
  }
};

}  // namespace

TEST_F(RunnerChoice, TheSeedsTrainingSubmitReachesTheSlurmWorker) {
  auto process_only = worker({"process"});
  auto with_slurm = worker({"process", "slurm"});
  auto id = submit_seed();

  // The process-only worker polls first: it must not take a training job a Slurm worker can run.
  EXPECT_TRUE(api_.poll(process_only, {{"process", 4}}).jobs.empty());
  // Nor does the Slurm worker take it on process while its slurm slots are full.
  EXPECT_TRUE(api_.poll(with_slurm, {{"process", 4}, {"slurm", 0}}).jobs.empty());
  auto jobs = api_.poll(with_slurm, {{"process", 4}, {"slurm", 1}}).jobs;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id, id);
  EXPECT_EQ(jobs[0].runner, "slurm");
  EXPECT_EQ(jobs[0].kind, "training");
  EXPECT_EQ(api_.job_info(id).runner, "slurm");
}

TEST_F(RunnerChoice, WithoutASlurmWorkerTrainingRunsOnProcess) {
  auto process_only = worker({"process"});
  auto id = submit_seed();
  auto jobs = api_.poll(process_only, {{"process", 1}}).jobs;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id, id);
  EXPECT_EQ(jobs[0].runner, "process");
}

TEST_F(RunnerChoice, ASlurmWorkerWithoutTheProfileLeavesItToProcess) {
  auto process_only = worker({"process"});
  auto other = worker({"process", "slurm"}, {"other"});
  auto id = submit_seed();
  EXPECT_TRUE(api_.poll(other, {{"process", 1}, {"slurm", 1}}).jobs.empty());
  auto jobs = api_.poll(process_only, {{"process", 1}}).jobs;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id, id);
  EXPECT_EQ(jobs[0].runner, "process");
}

TEST_F(RunnerChoice, ANamedRunnerPinsTheJobAndCommandJobsGoToProcess) {
  auto with_slurm = worker({"process", "slurm"});
  auto pinned = cp_.admin({"submit", "--runner", "process", "--kind", "training", "--payload", kSeedPayload, "--json"});
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  EXPECT_EQ(boost::json::parse(pinned.out).at("runner"), "process");
  auto command = cp_.admin({"submit", "--json", "--", "/bin/true"});
  ASSERT_EQ(command.exit_code, 0) << command.err;
  EXPECT_EQ(boost::json::parse(command.out).at("runner"), "process");

  auto jobs = api_.poll(with_slurm, {{"process", 2}, {"slurm", 2}}).jobs;
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].runner, "process");
  EXPECT_EQ(jobs[1].runner, "process");
}

TEST_F(RunnerChoice, ALostAttemptIsChosenAgain) {
  auto with_slurm = worker({"process", "slurm"});
  auto id = submit_seed();
  auto first = api_.poll(with_slurm, {{"slurm", 1}}).jobs;
  ASSERT_EQ(first.size(), 1u);
  auto lost = WorkerApi::event(first[0].lease_id, 1, protocol::EventState::lost);
  ASSERT_EQ(WorkerApi::outcome(api_.post_event(with_slurm, id, lost)), "200");
  auto again = api_.job_info(id);
  EXPECT_EQ(again.state, protocol::JobState::queued);
  EXPECT_EQ(again.runner, "auto");
  // With the Slurm worker gone, a process-only worker may now run it.
  ASSERT_EQ(api_.send(http::Method::post, protocol::exit_path(with_slurm.id), with_slurm.credential,
                      R"({"exitReason":"sigterm"})").status / 100, 2);
  auto process_only = worker({"process"});
  auto jobs = api_.poll(process_only, {{"process", 1}}).jobs;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].runner, "process");
}
