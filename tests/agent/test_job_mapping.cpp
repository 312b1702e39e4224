// The wire <-> runner mapping, field by field: a job assignment becomes a runner JobSpec, a runner update
// becomes an event, and cancel reasons, directives and exit reasons map enum to enum.
#include "agent/job_mapping.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

namespace {

using namespace nymph;
using namespace nymph::agent;
using runners::JobState;

protocol::JobAssignment assignment() {
  protocol::JobAssignment j;
  j.job_id = "01JOB";
  j.attempt = 3;
  j.lease_id = "01LEASE";
  j.runner = "slurm";
  return j;
}

TEST(ToRunnerSpec, CopiesIdsKindArgvAndEnv) {
  auto j = assignment();
  j.spec.argv = std::vector<std::string>{"/bin/echo", "a b", ""};
  j.spec.env = {{"A", "1"}, {"B_2", "x y"}};
  auto spec = to_runner_spec(j);
  EXPECT_EQ(spec.job_id, "01JOB");
  EXPECT_EQ(spec.attempt, 3);
  EXPECT_EQ(spec.lease_id, "01LEASE");
  EXPECT_EQ(spec.kind, "command");
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"/bin/echo", "a b", ""}));
  EXPECT_FALSE(spec.command);
  EXPECT_EQ(spec.env, (std::map<std::string, std::string>{{"A", "1"}, {"B_2", "x y"}}));
  EXPECT_FALSE(spec.timeout);
  EXPECT_TRUE(spec.slurm_options.empty());
  EXPECT_FALSE(spec.profile);
  EXPECT_TRUE(spec.parameters.is_null());
}

TEST(ToRunnerSpec, ACommandJobHasACommandAndNoArgv) {
  auto j = assignment();
  j.spec.command = "echo hi | tr a-z A-Z";
  auto spec = to_runner_spec(j);
  EXPECT_EQ(spec.command, "echo hi | tr a-z A-Z");
  EXPECT_TRUE(spec.argv.empty());
}

TEST(ToRunnerSpec, TimeoutIsRoundedUpToWholeSeconds) {
  auto j = assignment();
  j.spec.timeout_s = 1.2;
  EXPECT_EQ(to_runner_spec(j).timeout, std::chrono::seconds(2));
  j.spec.timeout_s = 5.0;
  EXPECT_EQ(to_runner_spec(j).timeout, std::chrono::seconds(5));
  j.spec.timeout_s = 0.001;
  EXPECT_EQ(to_runner_spec(j).timeout, std::chrono::seconds(1));
}

// Found by fuzz/sbatch_script: a timeoutS of 1e300 (an old or hostile server) overflowed the conversion to
// seconds (undefined behaviour); it is taken as the longest timeout.
TEST(ToRunnerSpec, HugeTimeoutsAreTheLongestTimeout) {
  auto j = assignment();
  j.spec.timeout_s = 1e300;
  EXPECT_EQ(to_runner_spec(j).timeout, std::chrono::seconds(static_cast<long long>(protocol::kMaxTimeoutS)));
}

TEST(ToRunnerSpec, SlurmOptionsAreRunConfigSlurmWhenItIsAnObject) {
  auto j = assignment();
  j.spec.run_config = boost::json::parse(R"({"slurm":{"partition":"debug","time":"10"},"other":{"x":1}})").as_object();
  EXPECT_EQ(to_runner_spec(j).slurm_options, boost::json::parse(R"({"partition":"debug","time":"10"})").as_object());
  j.spec.run_config = boost::json::parse(R"({"slurm":"debug"})").as_object();
  EXPECT_TRUE(to_runner_spec(j).slurm_options.empty());
  j.spec.run_config = boost::json::parse(R"({"other":{"partition":"debug"}})").as_object();
  EXPECT_TRUE(to_runner_spec(j).slurm_options.empty());
}

TEST(ToRunnerSpec, TrainingCarriesTheProfileAndItsParameters) {
  auto j = assignment();
  j.kind = "training";
  j.spec.payload = protocol::Payload{"resnet", boost::json::parse(R"({"epochs":3,"lr":0.1})").as_object()};
  auto spec = to_runner_spec(j);
  EXPECT_EQ(spec.kind, "training");
  EXPECT_EQ(spec.profile, "resnet");
  EXPECT_EQ(spec.parameters, boost::json::parse(R"({"epochs":3,"lr":0.1})"));
  EXPECT_TRUE(spec.argv.empty());
  EXPECT_FALSE(spec.command);
}

TEST(ToEvent, MapsEveryState) {
  const std::pair<JobState, protocol::EventState> pairs[] = {
      {JobState::pending, protocol::EventState::pending},     {JobState::running, protocol::EventState::running},
      {JobState::succeeded, protocol::EventState::succeeded}, {JobState::failed, protocol::EventState::failed},
      {JobState::cancelled, protocol::EventState::cancelled}, {JobState::lost, protocol::EventState::lost}};
  for (auto [runner_state, wire_state] : pairs) {
    EXPECT_EQ(to_event_state(runner_state), wire_state) << runners::to_string(runner_state);
    EXPECT_EQ(runners::to_string(runner_state), protocol::to_string(wire_state));
  }
}

TEST(ToEvent, CopiesLeaseSeqOutcomeAndTime) {
  runners::JobUpdate u{.state = JobState::failed,
                       .exit_code = 3,
                       .signal = 9,
                       .message = "killed",
                       .slurm_job_id = "4242",
                       .result = boost::json::parse(R"({"accuracy":0.9})")};
  const auto at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'700'000'000'123));
  auto e = to_event("01LEASE", 7, u, at);
  EXPECT_EQ(e.lease_id, "01LEASE");
  EXPECT_EQ(e.seq, 7);
  EXPECT_EQ(e.state, protocol::EventState::failed);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.signal, 9);
  EXPECT_EQ(e.message, "killed");
  EXPECT_EQ(e.slurm_job_id, "4242");
  EXPECT_EQ(e.result, boost::json::parse(R"({"accuracy":0.9})"));
  EXPECT_EQ(e.at, "2023-11-14T22:13:20.123Z");
}

TEST(ToEvent, AbsentFieldsStayAbsent) {
  auto e = to_event("L", 1, runners::JobUpdate{.state = JobState::running}, std::chrono::system_clock::now());
  EXPECT_EQ(e.state, protocol::EventState::running);
  EXPECT_FALSE(e.exit_code);
  EXPECT_FALSE(e.signal);
  EXPECT_TRUE(e.message.empty());
  EXPECT_FALSE(e.slurm_job_id);
  EXPECT_FALSE(e.result);
}

TEST(JobMapping, LogStreamsHaveTheirWireNames) {
  EXPECT_EQ(to_log_stream(runners::Stream::out), protocol::LogStream::out);
  EXPECT_EQ(to_log_stream(runners::Stream::err), protocol::LogStream::err);
}

TEST(JobMapping, CancelReasonsBecomeStopReasons) {
  EXPECT_EQ(to_stop_reason(protocol::CancelReason::user), runners::StopReason::user_cancel);
  EXPECT_EQ(to_stop_reason(protocol::CancelReason::lease_lost), runners::StopReason::lease_lost);
}

TEST(JobMapping, DirectivesBecomeLifecycleDirectives) {
  EXPECT_EQ(to_directive(protocol::Directive::kill), Directive::kill);
  EXPECT_EQ(to_directive(protocol::Directive::drain), Directive::drain);
}

TEST(JobMapping, EveryExitReasonMapsToTheWireReasonOfTheSameName) {
  const std::pair<ExitReason, protocol::ExitReason> pairs[] = {
      {ExitReason::sigterm, protocol::ExitReason::sigterm}, {ExitReason::sigint, protocol::ExitReason::sigint},
      {ExitReason::killed, protocol::ExitReason::killed},   {ExitReason::walltime, protocol::ExitReason::walltime},
      {ExitReason::idle, protocol::ExitReason::idle},       {ExitReason::error, protocol::ExitReason::error}};
  for (auto [agent_reason, wire_reason] : pairs) {
    EXPECT_EQ(to_wire_exit_reason(agent_reason), wire_reason) << to_string(agent_reason);
    EXPECT_EQ(to_string(agent_reason), protocol::to_string(wire_reason));
  }
}

}  // namespace
