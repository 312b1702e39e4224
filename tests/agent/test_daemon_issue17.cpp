// Issue 17: a final event offers its slot for the next job (takeNext, docs/protocol.md 8.3), and an attempt holds a
// delivery only while it has something to send. The daemon against the in-memory control plane of
// daemon_fixture.hpp.
#include <functional>

#include "agent/slot_offer.hpp"
#include "tests/agent/daemon_fixture.hpp"

namespace nymph::agent::daemon_test {
namespace {

protocol::EventResponse handing(std::vector<protocol::JobAssignment> jobs) {
  protocol::EventResponse r;
  r.job_state = protocol::JobState::succeeded;
  r.jobs = std::move(jobs);
  r.slot_held = false;
  return r;
}

const protocol::EventRequest* final_event_of(const FakeControlPlane& cp, const std::string& job) {
  for (const auto& [j, e] : cp.events)
    if (j == job && e.state != protocol::EventState::running) return &e;
  return nullptr;
}

// The slot of a final event that took a job, or that the held poll counted while it is still the one in flight,
// stays with the control plane; any other needs a new poll.
TEST(SlotOffer, ANewPollOffersTheSlotUnlessAJobOrTheStillHeldPollTookIt) {
  EXPECT_FALSE(offered_slot_needs_new_poll(/*jobs_handed=*/true, /*slot_held=*/false, /*polled_since_offer=*/true));
  EXPECT_FALSE(offered_slot_needs_new_poll(true, false, false));
  EXPECT_FALSE(offered_slot_needs_new_poll(false, true, false));
  EXPECT_TRUE(offered_slot_needs_new_poll(false, true, true));
  EXPECT_TRUE(offered_slot_needs_new_poll(false, false, false));
  EXPECT_TRUE(offered_slot_needs_new_poll(false, false, true));
}

// The final event of a job that ended while the worker takes jobs offers its slot, and the job its reply leases
// starts at once: no poll is needed for it.
TEST_F(DaemonTest, TheJobAFinalEventsReplyLeasesStartsWithoutAPoll) {
  settings.capacity = {{"process", 1}};
  runner.output = "";
  cp.take_next_replies["a"] = handing({job("b", "LB")});
  std::size_t polls_when_b_ended = 0;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("a", "LA")}});
    co_await until([&] { return runner.started == 1 && cp.polls.size() == 2 && cp.polls_held == 1; });
    runner.finish.insert("a");
    runner.finish.insert("b");
    runner.changed.notify();
    co_await until([&] { return final_event_of(cp, "b") != nullptr; });
    polls_when_b_ended = cp.polls.size();
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  ASSERT_NE(final_event_of(cp, "a"), nullptr);
  EXPECT_TRUE(final_event_of(cp, "a")->take_next);
  EXPECT_EQ(runner.started, 2);
  EXPECT_EQ(cp.event_states("b"), (std::vector<std::string>{"succeeded"}));
  EXPECT_EQ(polls_when_b_ended, 2u) << "b came in a's event reply; the poll held since a started stayed held";
  EXPECT_EQ(cp.polls[1].free.at("process"), 0);
}

// While a final event that offers its slot is unanswered, a poll counts the slot as busy (the server may lease a
// job for it in the event's reply). When the reply hands no job and the poll the server counted the slot on was
// answered meanwhile, a new poll offers the slot.
TEST_F(DaemonTest, APollLeavesAnOfferedSlotOutAndANewPollOffersItWhenNoJobTookIt) {
  settings.capacity = {{"process", 1}};
  runner.output = "";
  cp.held_events.insert("a");
  protocol::EventResponse none;
  none.job_state = protocol::JobState::succeeded;
  none.slot_held = true;  // counted on the poll held when the event arrived, which is answered below
  cp.take_next_replies["a"] = none;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("a", "LA")}});
    co_await until([&] { return runner.started == 1 && cp.polls.size() == 2 && cp.polls_held == 1; });
    runner.finish.insert("a");
    runner.changed.notify();
    co_await until([&] { return cp.events_held == 1; });  // a's final event is on its way
    cp.reply({});  // the held poll is answered: the next one is sent while the slot is offered
    co_await until([&] { return cp.polls.size() == 3; });
    cp.held_events.erase("a");
    cp.changed.notify();
    co_await until([&] { return cp.polls.size() == 4; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  ASSERT_NE(final_event_of(cp, "a"), nullptr);
  EXPECT_TRUE(final_event_of(cp, "a")->take_next);
  ASSERT_GE(cp.polls.size(), 4u);
  EXPECT_EQ(cp.polls[2].free.at("process"), 0) << "a poll sent while the slot is offered counts it busy";
  EXPECT_EQ(cp.polls[3].free.at("process"), 1) << "the slot no job took is offered again";
}

// A worker that drains offers no slot: its final events do not take the next job.
TEST_F(DaemonTest, ADrainingWorkersFinalEventTakesNoNextJob) {
  settings.capacity = {{"process", 1}};
  runner.output = "";
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("a", "LA")}});
    co_await until([&] { return runner.started == 1 && cp.polls.size() == 2 && cp.polls_held == 1; });
    cp.reply({.directive = protocol::Directive::drain});
    co_await until([&] { return cp.polls.size() >= 3 && cp.polls.back().draining; });
    runner.finish.insert("a");
    runner.changed.notify();
  });
  EXPECT_EQ(reason, ExitReason::killed);
  ASSERT_NE(final_event_of(cp, "a"), nullptr);
  EXPECT_FALSE(final_event_of(cp, "a")->take_next);
}

// Issue 17 (memory per tracked job): an attempt whose run goes on with nothing to send holds no delivery; the
// next thing it queues (here its final event) starts one. Nothing is lost or reordered.
TEST_F(DaemonTest, AnAttemptWithNothingToSendHoldsNoDeliveryAndItsEndStartsOne) {
  settings.capacity = {{"process", 1}};
  runner.output = "first\n";
  Daemon::AttemptCounts quiet;
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("a", "LA")}});
    // Its running event and first output are acknowledged; the job still runs.
    co_await until([&] { return cp.logs["a/stdout"] == "first\n" && cp.event_states("a").size() == 1; });
    co_await until([&] { return daemon->attempt_counts().delivering == 0; });
    quiet = daemon->attempt_counts();
    runner.finish.insert("a");
    runner.changed.notify();
    co_await until([&] { return cp.event_states("a").size() == 2; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(quiet.attempts, 1u);
  EXPECT_EQ(quiet.delivering, 0u) << "a running attempt with nothing to send holds a delivery";
  EXPECT_EQ(cp.event_states("a"), (std::vector<std::string>{"running", "succeeded"}));
  EXPECT_EQ(cp.logs["a/stdout"], "first\n");
}

// Jobs a and b run with their events held on the wire until `crowded(counts)` holds with one event on it; then the
// events go, both jobs succeed, and the agent stops.
class CrowdedDeliveryTest : public DaemonTest {
 protected:
  struct Crowd {
    ExitReason reason{};
    Daemon::AttemptCounts counts;  // when `crowded` held
    int on_the_wire = 0;           // events on the wire then
  };
  Crowd run_two_jobs_until(const std::function<bool(const Daemon::AttemptCounts&)>& crowded) {
    settings.capacity = {{"process", 2}};
    settings.progress_event_hold = std::chrono::milliseconds(0);  // running events are never replaced by a final one
    cp.held_events = {"a", "b"};
    Crowd crowd;
    crowd.reason = run([&]() -> asio::awaitable<void> {
      co_await until([&] { return !cp.polls.empty(); });
      cp.reply({.jobs = {job("a", "LA"), job("b", "LB")}});
      co_await until([&] { return cp.events_held == 1 && crowded(daemon->attempt_counts()); });
      crowd.counts = daemon->attempt_counts();
      crowd.on_the_wire = cp.events_held;
      cp.held_events.clear();
      cp.changed.notify();
      runner.finish = {"a", "b"};
      runner.changed.notify();
      co_await until([&] { return final_event_of(cp, "a") != nullptr && final_event_of(cp, "b") != nullptr; });
      daemon->on_signal(Signal::term);
    });
    return crowd;
  }
};

// Issue 17 (memory at a burst): the uploads of all attempts share max_concurrent_uploads slots, and a delivery
// waits for its slot before it takes an upload from the outbox: with one slot and the first running event held
// on the wire, the other attempt's delivery waits for the slot (a shallow coroutine, its upload not yet taken)
// instead of piling up behind the control plane's client. Nothing is lost or reordered once the slot frees.
TEST_F(CrowdedDeliveryTest, UploadsOfAllAttemptsWaitForOneOfMaxConcurrentUploadsSlots) {
  settings.max_concurrent_uploads = 1;
  runner.output = "";
  auto crowd = run_two_jobs_until([](const auto& n) { return n.waiting_for_upload == 1; });
  EXPECT_EQ(crowd.reason, ExitReason::sigterm);
  EXPECT_EQ(crowd.counts.delivering, 2u);
  EXPECT_EQ(crowd.on_the_wire, 1) << "one upload slot: one event on the wire";
  EXPECT_EQ(cp.event_states("a"), (std::vector<std::string>{"running", "succeeded"}));
  EXPECT_EQ(cp.event_states("b"), (std::vector<std::string>{"running", "succeeded"}));
}

// Issue 17 (memory at a burst): an attempt with something to send beyond max_active_deliveries delivery coroutines
// waits for its turn in line, not as a coroutine of its own. With one delivery coroutine and the first running event
// held on the wire, the other attempt waits in line (its upload not on the wire, though seven upload slots are free,
// and not waiting for a slot either); once the event is answered, both attempts' events and logs all arrive.
TEST_F(CrowdedDeliveryTest, AnAttemptBeyondMaxActiveDeliveriesWaitsForItsTurnInLine) {
  settings.max_concurrent_uploads = 8;
  settings.max_active_deliveries = 1;
  auto crowd = run_two_jobs_until([](const auto& n) { return n.waiting_for_delivery == 1; });
  EXPECT_EQ(crowd.reason, ExitReason::sigterm);
  EXPECT_EQ(crowd.counts.delivering, 2u) << "an attempt in line counts as delivering";
  EXPECT_EQ(crowd.counts.waiting_for_upload, 0u);
  EXPECT_EQ(crowd.on_the_wire, 1) << "one delivery coroutine: one upload on the wire";
  EXPECT_EQ(cp.event_states("a"), (std::vector<std::string>{"running", "succeeded"}));
  EXPECT_EQ(cp.event_states("b"), (std::vector<std::string>{"running", "succeeded"}));
  EXPECT_EQ(cp.logs["a/stdout"], "hello\n");
  EXPECT_EQ(cp.logs["b/stdout"], "hello\n");
}

// While attempts wait in line, a delivery hands its turn on after each acknowledged upload: with one delivery
// coroutine, two attempts that each queued a running event and a log chunk take turns upload by upload, so one
// attempt's steady stream of output cannot keep the others' events waiting.
TEST_F(DaemonTest, ADeliveryHandsItsTurnOnAfterEachUploadWhileOthersWaitInLine) {
  settings.capacity = {{"process", 2}};
  settings.max_active_deliveries = 1;
  settings.progress_event_hold = std::chrono::milliseconds(0);
  cp.held_events = {"a"};
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return !cp.polls.empty(); });
    cp.reply({.jobs = {job("a", "LA"), job("b", "LB")}});
    co_await until([&] { return cp.events_held == 1 && daemon->attempt_counts().waiting_for_delivery == 1; });
    cp.held_events.clear();
    cp.changed.notify();
    co_await until([&] { return cp.logs.contains("a/stdout") && cp.logs.contains("b/stdout"); });
    runner.finish = {"a", "b"};
    runner.changed.notify();
    co_await until([&] { return final_event_of(cp, "a") != nullptr && final_event_of(cp, "b") != nullptr; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  ASSERT_GE(cp.calls.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(cp.calls.begin(), cp.calls.begin() + 4),
            (std::vector<std::string>{"event a running", "event b running", "log a stdout", "log b stdout"}));
}

}  // namespace
}  // namespace nymph::agent::daemon_test
