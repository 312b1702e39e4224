// The manager lease (agent/manager_lease.hpp): the rule stepped with no files, then the file I/O in a
// temporary directory (acquire, refusal naming the holder, takeover of a dead holder, heartbeat, loss, release).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/manager_lease.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph;
using namespace nymph::agent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const WallTime kNow = WallTime(std::chrono::seconds(1'800'000'000));

ManagerLease lease_on(std::string host, WallTime heartbeat) {
  return ManagerLease{.host = std::move(host), .pid = 4242, .pid_start_time = 777, .launch_id = "01JLAUNCH",
                      .started_at = heartbeat - 1h, .heartbeat_at = heartbeat, .heartbeat_interval = 10s};
}

ManagerLease me() {
  return ManagerLease{.host = short_host_name(), .pid = ::getpid(),
                      .pid_start_time = *process_start_time(::getpid()), .launch_id = "01MINE",
                      .heartbeat_interval = 10s};
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(ManagerLeaseRule, SameHostDeadPidIsFree) {
  auto d = judge_lease(lease_on("login1", kNow), "login1", kNow, /*pid_alive=*/false);
  EXPECT_EQ(d.verdict, LeaseVerdict::free) << d.reason;
  EXPECT_NE(d.reason.find("no longer running"), std::string::npos) << d.reason;
}

TEST(ManagerLeaseRule, SameHostLivePidIsHeldWhateverTheHeartbeat) {
  auto d = judge_lease(lease_on("login1", kNow - 24h), "login1", kNow, /*pid_alive=*/true);
  EXPECT_EQ(d.verdict, LeaseVerdict::held);
  EXPECT_NE(d.reason.find("host login1 pid 4242 launch 01JLAUNCH"), std::string::npos) << d.reason;
}

TEST(ManagerLeaseRule, OtherHostFreshHeartbeatIsHeld) {
  auto d = judge_lease(lease_on("login2", kNow - 29s), "login1", kNow, /*pid_alive=*/false);
  EXPECT_EQ(d.verdict, LeaseVerdict::held);
  EXPECT_NE(d.reason.find("host login2 pid 4242 launch 01JLAUNCH"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("29 s ago"), std::string::npos) << d.reason;
}

TEST(ManagerLeaseRule, OtherHostHeartbeatThreeIntervalsOldIsFree) {
  auto d = judge_lease(lease_on("login2", kNow - 30s), "login1", kNow, /*pid_alive=*/true);
  EXPECT_EQ(d.verdict, LeaseVerdict::free) << d.reason;
  EXPECT_NE(d.reason.find("silent"), std::string::npos) << d.reason;
}

TEST(ManagerLeaseRule, TheIntervalComesFromTheFile) {
  auto l = lease_on("login2", kNow - 50s);
  l.heartbeat_interval = 20s;
  EXPECT_EQ(judge_lease(l, "login1", kNow, false).verdict, LeaseVerdict::held);
  l.heartbeat_at = kNow - 61s;
  EXPECT_EQ(judge_lease(l, "login1", kNow, false).verdict, LeaseVerdict::free);
}

TEST(ManagerLeaseRule, CorruptFileIsNeitherFreeNorHeld) {
  Result<ManagerLease> bad = parse_lease("{\"host\":\"x\"}");
  ASSERT_FALSE(bad);
  auto d = judge_lease(bad, "login1", kNow, false);
  EXPECT_EQ(d.verdict, LeaseVerdict::corrupt);
  EXPECT_FALSE(d.reason.empty());
  EXPECT_FALSE(parse_lease("not json"));
  EXPECT_FALSE(parse_lease("{\"host\":\"a\",\"pid\":-1,\"pidStartTime\":1,\"launchId\":\"L\",\"startedAt\":"
                           "\"2026-01-01T00:00:00Z\",\"heartbeatAt\":\"2026-01-01T00:00:00Z\",\"heartbeatIntervalS\":10}"));
}

TEST(ManagerLeaseRule, JsonRoundTrip) {
  auto l = lease_on("login1", kNow);
  l.heartbeat_interval = 250ms;
  auto back = parse_lease(lease_json(l));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, l);
}

TEST(ManagerIdentity, ClusterNameFromScontrol) {
  EXPECT_EQ(parse_cluster_name("Configuration data as of ...\nAccountingStorageType   = accounting_storage/none\n"
                               "ClusterName             = lab\nCompleteWait = 0 sec\n"),
            "lab");
  EXPECT_EQ(parse_cluster_name("SlurmctldHost = x\n"), std::nullopt);
  EXPECT_EQ(parse_cluster_name("ClusterName = ../evil\n"), std::nullopt);
}

TEST(ManagerLeaseFile, AcquireRefuseReleaseAndAcquireAgain) {
  nymph::test::TempDir dir;
  fs::path state = dir.path() / "managers" / "lab";
  auto held = HeldLease::acquire(state, me(), "u@lab");
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(fs::status(state).permissions() & fs::perms::all, fs::perms::owner_all);
  auto content = parse_lease(read(state / kLeaseFile));
  ASSERT_TRUE(content) << content.error().message;
  EXPECT_EQ(content->launch_id, "01MINE");

  // A second contender (the same process stands in: same host, live pid) is refused, naming the holder.
  auto other = me();
  other.launch_id = "01SECOND";
  auto second = HeldLease::acquire(state, other, "u@lab");
  ASSERT_FALSE(second);
  const auto& m = second.error().message;
  EXPECT_NE(m.find("u@lab is already running"), std::string::npos) << m;
  EXPECT_NE(m.find("host " + short_host_name() + " pid " + std::to_string(::getpid()) + " launch 01MINE"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;

  held->release();
  EXPECT_FALSE(fs::exists(state / kLeaseFile));
  auto third = HeldLease::acquire(state, other, "u@lab");
  ASSERT_TRUE(third) << third.error().message;
  // No temporary files are left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(state)) files += e.path().filename() != kLeaseFile;
  EXPECT_EQ(files, 0);
}

TEST(ManagerLeaseFile, DeadHolderOnThisHostIsTakenOver) {
  nymph::test::TempDir dir;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);  // a pid that ran and is gone
  auto dead = lease_on(short_host_name(), std::chrono::system_clock::now());
  dead.pid = child;
  std::ofstream(dir.path() / kLeaseFile) << lease_json(dead);
  auto held = HeldLease::acquire(dir.path(), me(), "u@lab");
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(parse_lease(read(dir.path() / kLeaseFile))->launch_id, "01MINE");
}

TEST(ManagerLeaseFile, LivePidWithAnotherStartTimeIsARecycledPid) {
  nymph::test::TempDir dir;
  auto recycled = lease_on(short_host_name(), std::chrono::system_clock::now());
  recycled.pid = ::getppid();  // alive, but not started at that time
  recycled.pid_start_time = 1;
  std::ofstream(dir.path() / kLeaseFile) << lease_json(recycled);
  EXPECT_TRUE(HeldLease::acquire(dir.path(), me(), "u@lab"));
}

TEST(ManagerLeaseFile, OtherHostFreshIsRefusedStaleIsTakenOver) {
  nymph::test::TempDir dir;
  auto remote = lease_on("elsewhere-login", std::chrono::system_clock::now() - 5s);
  std::ofstream(dir.path() / kLeaseFile) << lease_json(remote);
  auto refused = HeldLease::acquire(dir.path(), me(), "u@lab");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("host elsewhere-login pid 4242 launch 01JLAUNCH"), std::string::npos)
      << refused.error().message;
  remote.heartbeat_at = std::chrono::system_clock::now() - 31s;
  std::ofstream(dir.path() / kLeaseFile, std::ios::trunc) << lease_json(remote);
  EXPECT_TRUE(HeldLease::acquire(dir.path(), me(), "u@lab"));
}

TEST(ManagerLeaseFile, CorruptFileIsNotTakenSilently) {
  nymph::test::TempDir dir;
  std::ofstream(dir.path() / kLeaseFile) << "garbage";
  auto r = HeldLease::acquire(dir.path(), me(), "u@lab");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unreadable"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("remove it"), std::string::npos) << r.error().message;
  EXPECT_EQ(read(dir.path() / kLeaseFile), "garbage");
}

TEST(ManagerLeaseFile, HeartbeatRewritesSeesReplaceRequestsAndLoss) {
  nymph::test::TempDir dir;
  auto held = HeldLease::acquire(dir.path(), me(), "u@lab");
  ASSERT_TRUE(held);
  auto later = std::chrono::system_clock::now() + 5s;
  ASSERT_EQ(*held->heartbeat(later), HeartbeatOutcome::ok);
  EXPECT_EQ(parse_lease(read(dir.path() / kLeaseFile))->heartbeat_at, std::chrono::time_point_cast<std::chrono::milliseconds>(later));

  std::ofstream(dir.path() / kReplaceFile) << "{\"replaceRequestedBy\":\"x\"}\n";
  EXPECT_EQ(*held->heartbeat(later), HeartbeatOutcome::replace_requested);
  EXPECT_FALSE(fs::exists(dir.path() / kReplaceFile));

  // Another manager took the file over (we looked dead): the heartbeat says so and does not overwrite it.
  auto thief = lease_on("elsewhere-login", std::chrono::system_clock::now());
  std::ofstream(dir.path() / kLeaseFile, std::ios::trunc) << lease_json(thief);
  EXPECT_EQ(*held->heartbeat(later), HeartbeatOutcome::lost);
  held->release();  // not ours: kept
  EXPECT_EQ(parse_lease(read(dir.path() / kLeaseFile))->host, "elsewhere-login");
}

TEST(ManagerLeaseFile, ReplaceHolderOnAnotherHostWritesTheRequestAndWaits) {
  nymph::test::TempDir dir;
  auto remote = lease_on("elsewhere-login", std::chrono::system_clock::now());
  std::ofstream(dir.path() / kLeaseFile) << lease_json(remote);
  auto r = replace_holder(dir.path(), short_host_name(), "host me pid 1", 300ms);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("elsewhere-login"), std::string::npos) << r.error().message;
  EXPECT_NE(read(dir.path() / kReplaceFile).find("host me pid 1"), std::string::npos);
  fs::remove(dir.path() / kLeaseFile);  // the holder released it
  EXPECT_TRUE(replace_holder(dir.path(), short_host_name(), "host me pid 1", 300ms));
}
