// Fault (h), issue 15 point 7: a control plane that assigns far more jobs than the worker has free slots. The
// daemon starts exactly its capacity and refuses the rest at once with one `lost` event each (seq 1, reason
// overCapacity), never starting them. In-memory control plane and runner (tests/agent/daemon_fixture.hpp).
#include "agent/job_mapping.hpp"
#include "tests/agent/daemon_fixture.hpp"

namespace {

using namespace nymph;
using namespace nymph::agent;
using namespace nymph::agent::daemon_test;

class Capacity : public DaemonTest {};

TEST_F(Capacity, APollReplyOf300JobsToAFourSlotWorkerStartsFourAndRefuses296AtOnce) {
  settings.capacity = {{"process", 4}};
  runner.output = "";
  std::vector<protocol::JobAssignment> flood;
  for (int i = 0; i < 300; ++i) flood.push_back(job("j" + std::to_string(i), "L" + std::to_string(i)));
  auto refused = [&] {
    int n = 0;
    for (const auto& [id, e] : cp.events)
      if (e.state == protocol::EventState::lost) ++n;
    return n;
  };
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return cp.polls.size() == 1; });
    cp.reply({.jobs = flood});
    co_await until([&] { return refused() == 296 && runner.started == 4; });
    // The next poll offers no free slot and lists only the four that run.
    co_await until([&] { return cp.polls.size() >= 2; });
    EXPECT_EQ(cp.polls.back().free.at("process"), 0);
    EXPECT_EQ(cp.polls.back().running.size(), 4u);
    daemon->on_signal(Signal::term);
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(runner.started, 4);
  std::set<std::string> started, lost;
  for (const auto& [id, e] : cp.events) {
    if (e.state != protocol::EventState::lost || !e.reason || *e.reason != protocol::EventReason::over_capacity)
      continue;
    EXPECT_EQ(e.seq, 1) << id;
    EXPECT_EQ(e.message, "refused: worker at capacity (4 of 4 slots busy)");
    lost.insert(id);
  }
  EXPECT_EQ(lost.size(), 296u);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(lost.contains("j" + std::to_string(i)));  // the first four ran
  for (const auto& [id, stop] : runner.stops) started.insert(id);
  for (const auto& id : started) EXPECT_FALSE(lost.contains(id)) << id;
}

TEST_F(Capacity, ASlotFreedByAFinishedJobIsUsedByTheNextReply) {
  settings.capacity = {{"process", 1}};
  runner.output = "";
  auto reason = run([&]() -> asio::awaitable<void> {
    co_await until([&] { return cp.polls.size() == 1; });
    cp.reply({.jobs = {job("a", "La"), job("b", "Lb")}});
    co_await until([&] { return cp.event_states("b") == std::vector<std::string>{"lost"}; });
    runner.finish.insert("a");
    runner.changed.notify();
    co_await until([&] { return !cp.event_states("a").empty() && cp.event_states("a").back() == "succeeded"; });
    cp.reply({});  // ends the poll held since the first reply
    co_await until([&] { return cp.polls.size() >= 3 && cp.polls.back().free.at("process") == 1; });
    runner.finish.insert("c");
    cp.reply({.jobs = {job("c", "Lc")}});
    co_await until([&] { return !cp.event_states("c").empty() && cp.event_states("c").back() == "succeeded"; });
    daemon->on_signal(Signal::term);
  });
  EXPECT_EQ(reason, ExitReason::sigterm);
  EXPECT_EQ(runner.started, 2);
}

}  // namespace
