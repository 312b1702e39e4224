// Sans-io policy: dispatch matching, job transitions, lease/stale clocks, the poll hub, request validation.
#include <gtest/gtest.h>

#include "control/poll_hub.hpp"
#include "control/policy.hpp"
#include "control/validate.hpp"

using namespace nymph::control;
using nymph::protocol::EventState;
using nymph::protocol::JobState;
using namespace std::chrono_literals;

namespace {
// A fixed instant for the hub's placement checks (2026-01-01T00:00:00Z).
const auto kNow = std::chrono::system_clock::time_point{} + std::chrono::seconds(1'767'225'600);
}  // namespace

TEST(Dispatch, MatchesRunnerTagsProfilesAndSlots) {
  WorkerCaps login{{"process", "slurm"}, {{"host", "slurm"}, {"site", "a"}}, {"smoke"}};
  EXPECT_TRUE(can_take(login, {"slurm", {{"host", "slurm"}}, std::nullopt}));
  EXPECT_FALSE(can_take(login, {"gpu", {}, std::nullopt}));
  EXPECT_FALSE(can_take(login, {"process", {{"host", "other"}}, std::nullopt}));
  EXPECT_FALSE(can_take(login, {"process", {{"zone", "x"}}, std::nullopt}));
  EXPECT_TRUE(can_take(login, {"process", {}, std::string("smoke")}));
  EXPECT_FALSE(can_take(login, {"process", {}, std::string("train-big")}));
  EXPECT_TRUE(can_take_now(login, {{"process", 1}}, {"process", {}, std::nullopt}));
  EXPECT_FALSE(can_take_now(login, {{"process", 0}, {"slurm", 5}}, {"process", {}, std::nullopt}));
  EXPECT_FALSE(can_take_now(login, {}, {"process", {}, std::nullopt}));
}

TEST(Transitions, LostAttempt) {
  EXPECT_EQ(after_lost_attempt(1, 2, false), JobState::queued);
  EXPECT_EQ(after_lost_attempt(2, 2, false), JobState::lost);
  EXPECT_EQ(after_lost_attempt(1, 2, true), JobState::cancelled);
}

TEST(Transitions, Events) {
  EXPECT_EQ(after_event(JobState::running, EventState::pending), JobState::running);
  EXPECT_EQ(after_event(JobState::cancelling, EventState::running), JobState::cancelling);
  EXPECT_EQ(after_event(JobState::cancelling, EventState::succeeded), JobState::succeeded);
  EXPECT_EQ(after_event(JobState::running, EventState::failed), JobState::failed);
  EXPECT_EQ(after_event(JobState::running, EventState::cancelled), JobState::cancelled);
}

TEST(Liveness, WorkerGoesStaleAfterLastContact) {
  Liveness l(10s, 5s);
  auto t0 = Liveness::Clock::time_point{} + 1000s;
  l.worker_seen("w", t0);
  EXPECT_EQ(*l.next_deadline(), t0 + 5s);
  EXPECT_TRUE(l.take_expired(t0 + 4s).stale_workers.empty());
  l.worker_seen("w", t0 + 4s);  // contact renews
  EXPECT_TRUE(l.take_expired(t0 + 8s).stale_workers.empty());
  auto e = l.take_expired(t0 + 9s);
  ASSERT_EQ(e.stale_workers, std::vector<std::string>{"w"});
  EXPECT_FALSE(l.next_deadline());
}

TEST(Liveness, HeldPollSuspendsDeadlinesUntilReleased) {
  Liveness l(10s, 5s);
  auto t0 = Liveness::Clock::time_point{} + 1000s;
  l.worker_seen("w", t0);
  l.lease_renewed("L", t0);
  l.worker_hold("w");
  l.lease_hold("L");
  EXPECT_FALSE(l.next_deadline());
  EXPECT_TRUE(l.take_expired(t0 + 100s).lost_leases.empty());
  l.worker_hold("w");                 // a second poll (superseding) holds too
  l.worker_release("w", t0 + 100s);   // the first one ends: still held by the second
  EXPECT_FALSE(l.next_deadline());
  l.worker_release("w", t0 + 101s);
  l.lease_release("L", t0 + 101s);
  EXPECT_EQ(*l.next_deadline(), t0 + 106s);
  auto e = l.take_expired(t0 + 111s);
  EXPECT_EQ(e.stale_workers, std::vector<std::string>{"w"});
  EXPECT_EQ(e.lost_leases, std::vector<std::string>{"L"});
}

TEST(Liveness, ForgottenLeaseNeverExpires) {
  Liveness l(10s, 5s);
  auto t0 = Liveness::Clock::time_point{} + 1000s;
  l.lease_renewed("L", t0);
  l.lease_hold("L");
  l.lease_forget("L");
  l.lease_release("L", t0);  // the poll that held it ends later: no resurrection
  EXPECT_FALSE(l.next_deadline());
  EXPECT_EQ(l.tracked_leases(), 0u);
}

TEST(PollHub, WakesOnlyAMatchingWaiterOnce) {
  PollHub hub;
  int woke_a = 0, woke_b = 0;
  PollHub::Waiter a{"a", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, true, [&] { ++woke_a; }};
  PollHub::Waiter b{"b", {{"slurm"}, {}, {}}, {.free = {{"slurm", 1}}}, true, [&] { ++woke_b; }};
  hub.park(a);
  hub.park(b);
  EXPECT_EQ(hub.size(), 2u);
  EXPECT_TRUE(hub.wake_one_for({"slurm", {}, std::nullopt}, kNow));
  EXPECT_EQ(woke_b, 1);
  EXPECT_EQ(b.why, PollHub::Why::woken);
  EXPECT_FALSE(hub.wake_one_for({"slurm", {}, std::nullopt}, kNow));  // b is no longer parked
  EXPECT_FALSE(hub.wake_one_for({"gpu", {}, std::nullopt}, kNow));
  EXPECT_EQ(woke_a, 0);
  hub.unpark(a);
  EXPECT_EQ(hub.size(), 0u);
}

TEST(Placement, AWorkerServesUntilItsAllocationEndMinusItsLead) {
  using nymph::protocol::SlurmAllocation;
  const auto max = std::chrono::system_clock::time_point::max();
  EXPECT_EQ(serves_until(std::nullopt), max) << "a login-node manager has no end";
  EXPECT_EQ(serves_until(SlurmAllocation{"1", "debug", std::nullopt}), max) << "an unlimited allocation";
  EXPECT_EQ(serves_until(SlurmAllocation{"1", "debug", std::string("2026-01-01T01:00:00.000Z")}), kNow + 1h - 120s)
      << "the agent's 120 s lead when none is advertised";
  EXPECT_EQ(serves_until(SlurmAllocation{"1", "debug", std::string("2026-01-01T01:00:00.000Z"), 300}), kNow + 55min);
  EXPECT_EQ(serves_until(SlurmAllocation{"1", "debug", std::string("soon")}), max);
}

TEST(Placement, AJobGoesToAWorkerWithAnEndOnlyWhenItFitsBeforeIt) {
  const auto until = kNow + 30min;
  const auto no_end = std::chrono::system_clock::time_point::max();
  EXPECT_TRUE(fits_before_end(1e9, no_end, kNow, std::nullopt)) << "a worker without an end takes anything";
  EXPECT_TRUE(fits_before_end(std::nullopt, no_end, kNow, kNow + 1h));
  EXPECT_TRUE(fits_before_end(1800, until, kNow, std::nullopt)) << "exactly fits";
  EXPECT_FALSE(fits_before_end(1801, until, kNow, std::nullopt));
  EXPECT_FALSE(fits_before_end(1, until, until, std::nullopt)) << "inside the lead: nothing";
  // Without a timeout: only where no other worker that could take it serves longer.
  EXPECT_TRUE(fits_before_end(std::nullopt, until, kNow, std::nullopt));
  EXPECT_TRUE(fits_before_end(std::nullopt, until, kNow, kNow + 10min));
  EXPECT_TRUE(fits_before_end(std::nullopt, until, kNow, until));
  EXPECT_FALSE(fits_before_end(std::nullopt, until, kNow, kNow + 31min));
  EXPECT_FALSE(fits_before_end(std::nullopt, until, kNow, no_end)) << "a manager serves longer";
  EXPECT_FALSE(fits_before_end(std::nullopt, until, until, std::nullopt));
}

TEST(PollHub, AProcessJobWakesTheParkedWorkerThatServesLongestAmongThoseItFits) {
  PollHub hub;
  std::vector<std::string> woke;
  auto waiter = [&](const std::string& id, std::chrono::system_clock::time_point until) {
    WorkerCaps caps{{"process", "slurm"}, {}, {}, until};
    return PollHub::Waiter{id, caps, {.free = {{"process", 1}, {"slurm", 1}}}, true, [&woke, id] { woke.push_back(id); }};
  };
  auto short_left = waiter("short", kNow + 10min);
  auto long_left = waiter("long", kNow + 50min);
  hub.park(short_left);
  hub.park(long_left);
  EXPECT_FALSE(hub.wake_one_for({"process", {}, std::nullopt, 3600.0}, kNow)) << "an hour fits neither";
  EXPECT_TRUE(hub.wake_one_for({"process", {}, std::nullopt, 300.0}, kNow));
  EXPECT_EQ(woke, (std::vector<std::string>{"long"}));
  EXPECT_TRUE(hub.wake_one_for({"process", {}, std::nullopt, std::nullopt}, kNow));
  EXPECT_EQ(woke, (std::vector<std::string>{"long", "short"}));
  auto other = waiter("other", kNow + 1min);
  hub.park(other);
  EXPECT_TRUE(hub.wake_one_for({"slurm", {}, std::nullopt, 1e6}, kNow)) << "a Slurm job survives its worker";
  EXPECT_EQ(woke.back(), "other");
}

TEST(PollHub, DrainingWaiterGetsNoJobsButDirectives) {
  PollHub hub;
  int woke = 0;
  PollHub::Waiter a{"a", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, false, [&] { ++woke; }};
  hub.park(a);
  EXPECT_FALSE(hub.wake_one_for({"process", {}, std::nullopt}, kNow));
  EXPECT_TRUE(hub.wake_worker("a"));
  EXPECT_EQ(woke, 1);
}

TEST(PollHub, NewPollSupersedesOld) {
  PollHub hub;
  int woke = 0;
  PollHub::Waiter a1{"a", {}, {}, true, [&] { ++woke; }};
  PollHub::Waiter a2{"a", {}, {}, true, [] {}};
  hub.park(a1);
  hub.park(a2);
  EXPECT_EQ(woke, 1);
  EXPECT_EQ(a1.why, PollHub::Why::superseded);
  hub.unpark(a1);  // a late unpark of the old one leaves the new one parked
  EXPECT_EQ(hub.size(), 1u);
  hub.wake_all_for_shutdown();
  EXPECT_EQ(a2.why, PollHub::Why::shutdown);
}

TEST(PollHub, AClaimedPollIsHandedItsOutcomeOnce) {
  PollHub hub;
  int woke = 0;
  PollHub::Waiter a{"a", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, true, [&] { ++woke; }};
  hub.park(a);
  auto claim = hub.claim_one_for({"process", {}, std::nullopt}, kNow);
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->worker_id, "a");
  EXPECT_EQ(claim->request.free.at("process"), 1);
  EXPECT_EQ(a.why, PollHub::Why::claimed);
  EXPECT_EQ(woke, 0);                                             // it goes on waiting, for its outcome
  EXPECT_EQ(hub.size(), 1u);                                      // still a held poll
  EXPECT_FALSE(hub.claim_one_for({"process", {}, std::nullopt}, kNow));  // claimed once only
  EXPECT_FALSE(hub.wake_one_for({"process", {}, std::nullopt}, kNow));   // nor woken for another job meanwhile
  PollOutcome out;
  out.reply.jobs.push_back({.job_id = "job_1"});
  EXPECT_TRUE(hub.hand(*claim, out, {.free = {{"process", 0}}}));
  EXPECT_EQ(a.why, PollHub::Why::handed);
  EXPECT_EQ(woke, 1);
  ASSERT_TRUE(a.handed);
  EXPECT_EQ(a.handed->reply.jobs.at(0).job_id, "job_1");
  EXPECT_EQ(a.request.free.at("process"), 0);
  EXPECT_FALSE(hub.hand(*claim, out, {}));  // a second hand finds nobody
  EXPECT_EQ(woke, 1);
  hub.unpark(a);
  EXPECT_EQ(hub.size(), 0u);
}

TEST(PollHub, AReleasedPollWaitsAgainUnlessSomethingConcernedItMeanwhile) {
  PollHub hub;
  int woke = 0;
  PollHub::Waiter a{"a", {{"process"}, {}, {}}, {.free = {{"process", 0}}}, true, [&] { ++woke; }};
  hub.park(a);
  auto quiet = hub.claim_worker("a");
  ASSERT_TRUE(quiet);
  hub.release(*quiet);
  EXPECT_EQ(a.why, PollHub::Why::none);  // parked again, as if never claimed
  EXPECT_EQ(woke, 0);
  EXPECT_TRUE(hub.wake_worker("a"));
  EXPECT_EQ(a.why, PollHub::Why::woken);

  PollHub::Waiter b{"b", {{"process"}, {}, {}}, {.free = {{"process", 0}}}, true, [&] { ++woke; }};
  hub.park(b);
  auto busy = hub.claim_worker("b");
  ASSERT_TRUE(busy);
  EXPECT_TRUE(hub.wake_worker("b"));          // a directive, a cancel: noted while claimed
  EXPECT_TRUE(hub.slot_freed("b", "process"));  // another attempt ended
  EXPECT_EQ(b.why, PollHub::Why::claimed);
  hub.release(*busy);
  EXPECT_EQ(b.why, PollHub::Why::woken);  // looks again, with the slot counted in
  EXPECT_EQ(b.request.free.at("process"), 1);
}

// takeNext found no job for the slot in its own transaction: the held poll counts the slot without waking (a
// wake would only read the queue again), and a later submission claims or wakes it with the slot counted.
TEST(PollHub, ASlotFreedQuietlyIsCountedWithoutAWakeAndALaterSubmissionFindsIt) {
  PollHub hub;
  int woke = 0;
  PollHub::Waiter a{"a", {{"process"}, {}, {}}, {.free = {{"process", 0}}}, true, [&] { ++woke; }};
  hub.park(a);
  EXPECT_FALSE(hub.claim_one_for({"process", {}, std::nullopt}, kNow));  // no free slot yet
  EXPECT_TRUE(hub.slot_freed_quietly("a", "process"));
  EXPECT_EQ(woke, 0);
  EXPECT_EQ(a.why, PollHub::Why::none);
  EXPECT_EQ(a.request.free.at("process"), 1);
  auto claim = hub.claim_one_for({"process", {}, std::nullopt}, kNow);
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->request.free.at("process"), 1);
  hub.release(*claim);
  EXPECT_TRUE(hub.wake_one_for({"process", {}, std::nullopt}, kNow));
  EXPECT_EQ(woke, 1);
  EXPECT_FALSE(hub.slot_freed_quietly("nobody", "process"));
}

TEST(PollHub, AClaimOfAPollThatWentAwayHandsNothing) {
  PollHub hub;
  PollHub::Waiter a{"a", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, true, [] {}};
  hub.park(a);
  auto claim = hub.claim_worker("a");
  ASSERT_TRUE(claim);
  hub.unpark(a);  // its client closed the connection
  EXPECT_EQ(hub.size(), 0u);
  EXPECT_FALSE(hub.hand(*claim, PollOutcome{}, {}));
  hub.release(*claim);  // no-op
  EXPECT_EQ(hub.size(), 0u);
  PollHub::Waiter draining{"d", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, false, [] {}};
  hub.park(draining);
  EXPECT_FALSE(hub.claim_worker("d"));  // takes no jobs: nothing to claim it for
}

TEST(PollHub, ANewerPollOfTheWorkerSupersedesAReleasedOne) {
  PollHub hub;
  PollHub::Waiter old_poll{"a", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, true, [] {}};
  PollHub::Waiter new_poll{"a", {{"process"}, {}, {}}, {.free = {{"process", 1}}}, true, [] {}};
  hub.park(old_poll);
  auto claim = hub.claim_worker("a");
  hub.park(new_poll);
  hub.release(*claim);
  EXPECT_EQ(old_poll.why, PollHub::Why::superseded);
  EXPECT_EQ(new_poll.why, PollHub::Why::none);
  EXPECT_TRUE(hub.wake_worker("a"));
  EXPECT_EQ(new_poll.why, PollHub::Why::woken);
}

TEST(Dispatch, NeedsOfASubmission) {
  nymph::protocol::JobSubmission plain;
  EXPECT_EQ(needs_of(plain).runner, "process");
  nymph::protocol::JobSubmission training;
  training.kind = "training";
  training.spec.payload = nymph::protocol::Payload{};
  training.spec.payload->profile = "smoke";
  training.required_tags = {{"site", "a"}};
  auto needs = needs_of(training);
  EXPECT_EQ(needs.runner, kAutoRunner);
  EXPECT_EQ(needs.profile, "smoke");
  EXPECT_EQ(needs.required_tags.at("site"), "a");
  training.runner = "slurm";
  EXPECT_EQ(needs_of(training).runner, "slurm");
}

TEST(Validate, Submissions) {
  nymph::protocol::JobSubmission s;
  s.spec.argv = std::vector<std::string>{"/bin/true"};
  EXPECT_TRUE(validate(s));
  auto bad = [&](auto mutate, const std::string& needle) {
    auto x = s;
    mutate(x);
    auto r = validate(x);
    ASSERT_FALSE(r) << needle;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  bad([](auto& x) { x.spec.command = "true"; }, "exactly one of 'argv' or 'command'");
  bad([](auto& x) { x.spec.argv = std::vector<std::string>{}; }, "field 'argv': must not be empty");
  bad([](auto& x) { x.spec.env["1BAD"] = "v"; }, "'1BAD' is not a valid environment variable name");
  bad([](auto& x) { x.spec.timeout_s = 0; }, "timeoutS");
  // Found by fuzz/sbatch_script: an unbounded timeoutS overflowed the worker's conversion to seconds.
  bad([](auto& x) { x.spec.timeout_s = 1e300; }, "timeoutS': must be > 0 and at most 3153600000");
  bad([](auto& x) { x.max_attempts = 0; }, "maxAttempts");
  bad([](auto& x) { x.kind = "shell"; }, "field 'kind'");
  bad([](auto& x) { x.kind = "training"; }, "kind training takes a 'payload'");
  bad([](auto& x) { x.spec.run_config["slurm"] = 3; }, "runConfig.slurm");
}

TEST(Validate, RegisterAndEvents) {
  nymph::protocol::RegisterRequest r;
  r.launch_id = "01ABC";
  r.hostname = "h";
  r.runners = {"process"};
  EXPECT_TRUE(validate(r));
  r.backend = "cloud";
  EXPECT_FALSE(validate(r));
  r.backend = "local";
  r.launch_id = "bad id";
  EXPECT_FALSE(validate(r));
  r.launch_id = "01ABC";
  for (std::int64_t g : {std::int64_t{0}, std::int64_t{-1}, nymph::protocol::kMaxGeneration + 1})
    EXPECT_FALSE(validate((r.generation = g, r))) << g;
  r.generation = nymph::protocol::kMaxGeneration;
  EXPECT_TRUE(validate(r));
  nymph::protocol::EventRequest e;
  e.lease_id = "L";
  e.seq = 0;
  EXPECT_FALSE(validate(e));
  e.seq = 1'000'001;
  EXPECT_FALSE(validate(e));
  e.seq = 9223372036854775807;
  EXPECT_FALSE(validate(e));
  e.seq = 1'000'000;
  EXPECT_TRUE(validate(e));
  e.seq = 1;
  e.at = "yesterday";
  EXPECT_FALSE(validate(e));
  e.at = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(validate(e));
}

TEST(Validate, RegistrationIdentity) {
  nymph::protocol::RegisterRequest r;
  r.launch_id = "01ABC";
  r.hostname = "h";
  r.runners = {"process"};
  for (const std::string& ok : std::vector<std::string>{"", "alice@cluster-a", std::string(200, 'x')}) {
    r.identity = ok;
    EXPECT_TRUE(validate(r)) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{std::string(201, 'x'), std::string("alice\n@c"),
                                                         std::string("a\x1b[2J"), std::string("caf\xc3\xa9@c")}) {
    r.identity = bad;
    auto v = validate(r);
    ASSERT_FALSE(v) << bad;
    EXPECT_NE(v.error().message.find("identity"), std::string::npos);
  }
}

TEST(Transitions, OnlyARefusalBeforeTheAttemptStartedGoesUncounted) {
  using nymph::protocol::EventReason;
  EXPECT_FALSE(lost_attempt_counts(EventReason::over_capacity, true, 0));
  EXPECT_FALSE(lost_attempt_counts(EventReason::over_capacity, true, kMaxUncountedAttempts - 1));
  EXPECT_TRUE(lost_attempt_counts(EventReason::over_capacity, true, kMaxUncountedAttempts));  // no endless bouncing
  EXPECT_TRUE(lost_attempt_counts(EventReason::over_capacity, false, 0));  // it had started: a real attempt
  EXPECT_TRUE(lost_attempt_counts(EventReason::worker_stopping, true, 0));
  EXPECT_TRUE(lost_attempt_counts(EventReason::lease_expired, true, 0));
  EXPECT_TRUE(lost_attempt_counts(std::nullopt, true, 0));
}

TEST(Validate, AnEventReasonOnlyWithStateLost) {
  nymph::protocol::EventRequest e;
  e.lease_id = "L";
  e.seq = 1;
  e.state = EventState::lost;
  e.reason = nymph::protocol::EventReason::worker_stopping;
  EXPECT_TRUE(validate(e));
  e.state = EventState::failed;
  auto v = validate(e);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("reason"), std::string::npos);
}

TEST(Liveness, EachLeaseRunsOnItsRunnersTtl) {
  Liveness l(10s, 5s, {{"slurm", 100s}});
  EXPECT_EQ(l.lease_ttl("slurm"), 100s);
  EXPECT_EQ(l.lease_ttl("process"), 10s);
  auto t0 = Liveness::Clock::time_point{} + 1000s;
  l.lease_renewed("P", t0, "process");
  l.lease_renewed("S", t0, "slurm");
  EXPECT_EQ(l.next_deadline(), t0 + 10s);
  auto e = l.take_expired(t0 + 10s);
  EXPECT_EQ(e.lost_leases, std::vector<std::string>{"P"});
  EXPECT_EQ(e.lost_lease_ttls, std::vector<Liveness::Duration>{10s});
  // A renewal or a held poll that does not name the runner keeps the lease's own TTL.
  l.lease_renewed("S", t0 + 50s);
  EXPECT_TRUE(l.take_expired(t0 + 149s).lost_leases.empty());
  l.lease_hold("S");
  EXPECT_FALSE(l.next_deadline());
  l.lease_release("S", t0 + 60s);
  EXPECT_TRUE(l.take_expired(t0 + 159s).lost_leases.empty());
  auto e2 = l.take_expired(t0 + 160s);
  EXPECT_EQ(e2.lost_leases, std::vector<std::string>{"S"});
  EXPECT_EQ(e2.lost_lease_ttls, std::vector<Liveness::Duration>{100s});
  // A lease first seen in a held poll (after a restart of the server, say) takes its runner's TTL from it.
  l.lease_hold("S2", "slurm");
  l.lease_release("S2", t0 + 200s);
  EXPECT_EQ(l.next_deadline(), t0 + 300s);
}

TEST(RunnerChoicePolicy, SlurmWhereTheWorkerHasItProcessOnlyWhereNoSlurmWorkerCould) {
  using nymph::control::choose_runner;
  WorkerCaps slurm_worker{{"process", "slurm"}, {}, {"smoke"}};
  WorkerCaps process_worker{{"process"}, {}, {"smoke"}};
  JobNeeds job{nymph::control::kAutoRunner, {}, std::string("smoke")};
  EXPECT_EQ(choose_runner(slurm_worker, {{"process", 1}, {"slurm", 1}}, job, false), "slurm");
  EXPECT_EQ(choose_runner(slurm_worker, {{"process", 1}}, job, false), std::nullopt) << "waits for a slurm slot";
  EXPECT_EQ(choose_runner(process_worker, {{"process", 1}}, job, false), "process");
  EXPECT_EQ(choose_runner(process_worker, {{"process", 1}}, job, true), std::nullopt);
  EXPECT_EQ(choose_runner(process_worker, {{"process", 0}}, job, false), std::nullopt);
  WorkerCaps other_profile{{"process", "slurm"}, {}, {"other"}};
  EXPECT_EQ(choose_runner(other_profile, {{"process", 1}, {"slurm", 1}}, job, false), std::nullopt);
  EXPECT_TRUE(nymph::control::can_take(process_worker, job));
  EXPECT_TRUE(nymph::control::can_take_now(slurm_worker, {{"slurm", 1}}, job));
  EXPECT_FALSE(nymph::control::can_take_now(slurm_worker, {{"slurm", 0}, {"process", 0}}, job));
}
