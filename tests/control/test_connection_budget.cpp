// The HTTP front's limits as policy, stepped without sockets: which connection makes room, the body budget,
// the accept backoff, the default connection cap.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <new>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include "control/connection_budget.hpp"
#include "control/server.hpp"

using namespace nymph::control;
using namespace std::chrono_literals;
using State = ConnectionTable::State;
using Kind = ConnectionTable::Admission::Kind;

TEST(ConnectionTable, OpensUnderTheCap) {
  ConnectionTable t(2);
  EXPECT_EQ(t.admit().kind, Kind::open);
  t.add();
  EXPECT_EQ(t.admit().kind, Kind::open);
  t.add();
  EXPECT_EQ(t.size(), 2u);
}

TEST(ConnectionTable, AtTheCapClosesTheLongestWaitingConnectionRejectingOnesFirst) {
  ConnectionTable t(4);
  auto a = t.add(), b = t.add(), c = t.add(), d = t.add();
  t.set(a, State::busy);     // a held poll: never closed for room
  t.set(b, State::waiting);  // b went back to waiting after a request: now younger than c and d
  t.set(d, State::rejecting);
  auto first = t.admit();
  EXPECT_EQ(first.kind, Kind::close_victim);
  EXPECT_EQ(first.victim, d) << "a connection draining a refused request goes first";
  EXPECT_FALSE(t.contains(d));
  t.add();
  auto second = t.admit();
  EXPECT_EQ(second.kind, Kind::close_victim);
  EXPECT_EQ(second.victim, c) << "then the one waiting longest for a head";
  EXPECT_TRUE(t.contains(b));
}

TEST(ConnectionTable, RefusesWhenEveryConnectionIsBusy) {
  ConnectionTable t(2);
  auto a = t.add(), b = t.add();
  t.set(a, State::busy);
  t.set(b, State::busy);
  EXPECT_EQ(t.admit().kind, Kind::refuse);
  EXPECT_FALSE(t.evict());
  t.remove(b);
  t.remove(b);  // idempotent: the connection's own cleanup after it was closed for room
  EXPECT_EQ(t.admit().kind, Kind::open);
  t.set(b, State::waiting);  // a closed id stays closed
  EXPECT_EQ(t.size(), 1u);
}

TEST(ConnectionTable, CountsConnectionsByState) {
  ConnectionTable t(8);
  auto a = t.add(), b = t.add();
  t.add();
  t.set(a, State::busy);
  t.set(b, State::rejecting);
  EXPECT_EQ(t.count(State::waiting), 1u);
  EXPECT_EQ(t.count(State::busy), 1u);
  EXPECT_EQ(t.count(State::rejecting), 1u);
}

TEST(DrainPause, SharesTheRateAmongTheDrainingConnections) {
  constexpr std::size_t rate = 64 << 20;  // bytes per second, all connections together
  EXPECT_EQ(drain_pause(64 << 10, 1, rate), 976us) << "alone: 64 KiB at 64 MiB/s";
  EXPECT_EQ(drain_pause(64 << 10, 2000, rate), 1'953'125us) << "2 000 draining: each reads 64 KiB per ~2 s";
  EXPECT_EQ(drain_pause(0, 2000, rate), 0us);
}

TEST(BodyBudget, ReservationsTakeWhatFitsAndGiveItBack) {
  BodyBudget budget(100);
  {
    BodyReservation a(budget);
    EXPECT_TRUE(a.grow(60));
    BodyReservation b(budget);
    EXPECT_FALSE(b.grow(41));
    EXPECT_EQ(b.bytes(), 0u);
    EXPECT_TRUE(b.grow(40));
    EXPECT_EQ(budget.in_use(), 100u);
    BodyReservation moved(std::move(b));
    EXPECT_EQ(moved.bytes(), 40u);
  }
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(AcceptBackoff, DoublesToOneSecondAndLogsOncePerBurst) {
  AcceptBackoff b;
  std::vector<std::chrono::milliseconds> pauses;
  int logged = 0;
  for (int i = 0; i < 7; ++i) {
    auto step = b.failed();
    pauses.push_back(step.pause);
    logged += step.log;
  }
  EXPECT_EQ(pauses, (std::vector<std::chrono::milliseconds>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms, 1000ms}));
  EXPECT_EQ(logged, 1);
  EXPECT_EQ(b.succeeded(), 7u);
  EXPECT_EQ(b.succeeded(), 0u);
  auto next = b.failed();
  EXPECT_EQ(next.pause, 100ms);
  EXPECT_TRUE(next.log) << "a new burst is logged again";
}

TEST(FrontLimits, DefaultConnectionCapLeavesAReserveOfDescriptors) {
  EXPECT_EQ(default_max_connections(1024), 960u);
  EXPECT_EQ(default_max_connections(4096), 4032u);
  EXPECT_EQ(default_max_connections(100), 50u);
  EXPECT_EQ(default_max_connections(1u << 20), 16'384u);
  EXPECT_EQ(default_max_connections(1), 1u);
}

TEST(FrontLimits, RaisesTheSoftOpenFilesLimitToTheHardLimit) {
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max < 64) GTEST_SKIP() << "needs a finite hard limit of 64 or more";
  rlimit lowered{lim.rlim_max / 2, lim.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  auto raised = raise_open_files_limit();
  EXPECT_EQ(raised.before, lim.rlim_max / 2);
  EXPECT_EQ(raised.after, lim.rlim_max);
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  EXPECT_EQ(lim.rlim_cur, lim.rlim_max);
}

TEST(RunIo, AnExceptionEscapingAHandlerIsLoggedAndTheLoopGoesOn) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger log("test", sink);
  boost::asio::io_context ioc;
  bool after = false;
  boost::asio::post(ioc, [] { throw std::bad_alloc(); });
  boost::asio::post(ioc, [&] { after = true; });
  run_io(ioc, log);
  EXPECT_TRUE(after);
  EXPECT_NE(out.str().find("serving on: std::bad_alloc"), std::string::npos) << out.str();
}
