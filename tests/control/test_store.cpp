// The domain store on a real file: dispatch, events, fencing, logs, lease loss, cancel, persistence.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <spdlog/sinks/ostream_sink.h>

#include "control/schema.hpp"
#include "control/store.hpp"
#include "tests/support/files.hpp"
#include "tests/support/ids.hpp"

using nymph::test::read_file;

using namespace nymph::control;
namespace p = nymph::protocol;

namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = std::filesystem::temp_directory_path().string() + "/nymph-store-XXXXXX";
    dir_ = ::mkdtemp(templ.data());
    path_ = dir_ + "/c.db";
    store_ = Store::open(path_);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  WallTime now() { return std::chrono::system_clock::now(); }

  std::string worker(std::vector<std::string> runners = {"process"}, std::map<std::string, std::string> tags = {},
                     std::vector<std::string> profiles = {}, std::string launch = nymph::test::fresh_ulid()) {
    p::RegisterRequest r;
    r.launch_id = launch;
    r.hostname = "h";
    r.runners = std::move(runners);
    r.tags = std::move(tags);
    r.profiles = std::move(profiles);
    return store_->register_worker(r, agent_, now()).value().reply.worker_id;
  }

  // A worker inside a Slurm allocation that ends `left` from now (and drains `lead_s` before that).
  std::string allocation_worker(std::chrono::seconds left, std::int64_t lead_s = 120) {
    p::RegisterRequest r;
    r.launch_id = nymph::test::fresh_ulid();
    r.hostname = "node1";
    r.backend = "slurm";
    r.runners = {"process"};
    r.slurm = p::SlurmAllocation{"42", "debug", p::format_time(now() + left), lead_s};
    return store_->register_worker(r, agent_, now()).value().reply.worker_id;
  }

  std::string submit_with_timeout(std::optional<double> timeout_s) {
    p::JobSubmission s;
    s.runner = "process";
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    s.spec.timeout_s = timeout_s;
    return store_->submit(s, now()).job.id;
  }

  std::vector<std::string> polled_jobs(const std::string& w) {
    std::vector<std::string> ids;
    for (const auto& j : poll(w, {{"process", 10}}).reply.jobs) ids.push_back(j.job_id);
    return ids;
  }

  std::string submit(std::string runner = "process", std::map<std::string, std::string> tags = {},
                     std::optional<std::string> profile = {}, int max_attempts = 2) {
    p::JobSubmission s;
    s.runner = std::move(runner);
    s.required_tags = std::move(tags);
    s.max_attempts = max_attempts;
    if (profile) {
      s.kind = "training";
      s.spec.payload = p::Payload{*profile, {}};
    } else {
      s.spec.argv = std::vector<std::string>{"/bin/true"};
    }
    return store_->submit(s, now()).job.id;
  }

  PollOutcome poll(const std::string& w, std::map<std::string, int> free = {{"process", 4}},
                   std::vector<p::AttemptRef> running = {}) {
    p::PollRequest r;
    r.free = std::move(free);
    r.running = std::move(running);
    return store_->poll(w, r, now()).value();
  }

  p::EventRequest event(const std::string& lease, std::int64_t seq, p::EventState st, std::optional<int> code = {}) {
    p::EventRequest e;
    e.lease_id = lease;
    e.seq = seq;
    e.state = st;
    e.exit_code = code;
    return e;
  }

  std::string dir_, path_;
  std::unique_ptr<Store> store_;
  TokenRecord agent_{token_hash("nym_test"), "test", Role::agent, {}, false};
};

unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 07777;  // "missing": never a mode a test expects
  return st.st_mode & 07777;
}

// Sets the umask for one scope.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

}  // namespace

TEST_F(StoreTest, OpenMigratesToTheSchemaVersion) {
  EXPECT_EQ(sql::Connection::open(path_).user_version(), kSchemaVersion);
}

TEST_F(StoreTest, TokensAreHashedAndHaveRoles) {
  std::string t = store_->create_token(Role::agent, "a", now());
  EXPECT_EQ(t.rfind("nym_", 0), 0u);
  EXPECT_EQ(store_->find_token(t)->role, Role::agent);
  EXPECT_FALSE(store_->find_token(t + "x"));
  store_.reset();
  std::string raw;
  {
    FILE* f = std::fopen(path_.c_str(), "rb");
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) raw.append(buf, n);
    std::fclose(f);
  }
  EXPECT_EQ(raw.find(t.substr(4)), std::string::npos) << "the token text must not be stored";
}

TEST_F(StoreTest, DispatchIsFifoAmongJobsTheWorkerCanTake) {
  std::string gpu_job = submit("process", {{"gpu", "yes"}});
  std::string a = submit();
  std::string slurm_job = submit("slurm");
  std::string b = submit();
  std::string training = submit("process", {}, std::string("smoke"));
  std::string w = worker();
  auto out = poll(w, {{"process", 2}});
  ASSERT_EQ(out.reply.jobs.size(), 2u);
  EXPECT_EQ(out.reply.jobs[0].job_id, a);
  EXPECT_EQ(out.reply.jobs[1].job_id, b);
  EXPECT_EQ(out.reply.jobs[0].attempt, 1);
  EXPECT_TRUE(poll(w, {{"process", 0}}).reply.jobs.empty());  // no free slot
  EXPECT_TRUE(poll(w, {{"process", 5}}).reply.jobs.empty());  // nothing else it can take
  std::string w2 = worker({"process", "slurm"}, {{"gpu", "yes"}}, {"smoke"});
  auto out2 = poll(w2, {{"process", 5}, {"slurm", 5}});
  ASSERT_EQ(out2.reply.jobs.size(), 3u);
  EXPECT_EQ(out2.reply.jobs[0].job_id, gpu_job);
  EXPECT_EQ(out2.reply.jobs[1].job_id, slurm_job);
  EXPECT_EQ(out2.reply.jobs[2].job_id, training);
  EXPECT_EQ(out2.reply.jobs[2].kind, "training");
}

TEST_F(StoreTest, AWorkerWithAnAllocationEndGetsOnlyTheJobsThatFitBeforeIt) {
  using namespace std::chrono_literals;
  std::string hour = submit_with_timeout(3600);
  std::string ten_minutes = submit_with_timeout(600);
  std::string unbounded = submit_with_timeout(std::nullopt);
  // 15 minutes left, 2 minutes of lead: 13 minutes to offer.
  std::string node = allocation_worker(15min);
  EXPECT_EQ(polled_jobs(node), (std::vector<std::string>{ten_minutes, unbounded}))
      << "the hour-long job stays queued; the one without a timeout comes here, no worker serves longer";
  std::string inside_lead = allocation_worker(15min, 900);
  std::string later = submit_with_timeout(1);
  EXPECT_TRUE(polled_jobs(inside_lead).empty()) << "a worker inside its lead takes no new work";
  std::string manager = worker();
  EXPECT_EQ(polled_jobs(manager), (std::vector<std::string>{hour, later}));
}

TEST_F(StoreTest, AJobWithoutATimeoutGoesToTheWorkerThatServesLongest) {
  using namespace std::chrono_literals;
  std::string soon = allocation_worker(10min);
  std::string later = allocation_worker(60min);
  std::string job = submit_with_timeout(std::nullopt);
  EXPECT_TRUE(polled_jobs(soon).empty()) << "another worker has more time left";
  EXPECT_EQ(polled_jobs(later), (std::vector<std::string>{job}));
  std::string next = submit_with_timeout(std::nullopt);
  std::string manager = worker();
  EXPECT_TRUE(polled_jobs(later).empty()) << "a login-node manager serves longest";
  EXPECT_EQ(polled_jobs(manager), (std::vector<std::string>{next}));
  EXPECT_TRUE(store_->set_directive(manager, p::Directive::drain));
  std::string after = submit_with_timeout(std::nullopt);
  EXPECT_EQ(polled_jobs(later), (std::vector<std::string>{after})) << "a draining manager takes nothing";
}

TEST_F(StoreTest, EventsAreIdempotentAndFenced) {
  std::string j = submit();
  std::string w = worker();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  auto r1 = store_->apply_event(j, event(lease, 1, p::EventState::running), w, now());
  ASSERT_TRUE(r1);
  EXPECT_FALSE(r1->reply.duplicate);
  auto dup = store_->apply_event(j, event(lease, 1, p::EventState::running), w, now());
  ASSERT_TRUE(dup);
  EXPECT_TRUE(dup->reply.duplicate);
  auto done = store_->apply_event(j, event(lease, 2, p::EventState::failed, 3), w, now());
  ASSERT_TRUE(done);
  EXPECT_EQ(done->reply.job_state, p::JobState::failed);
  EXPECT_TRUE(done->attempt_ended);
  auto late = store_->apply_event(j, event(lease, 3, p::EventState::running), w, now());
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, "attemptFinished");
  // Events of a lease apply in seq order: a lower seq that is not a duplicate is refused, with the last seq.
  std::string j2 = submit();
  auto lease2 = poll(w).reply.jobs.at(0).lease_id;
  ASSERT_TRUE(store_->apply_event(j2, event(lease2, 5, p::EventState::running), w, now()));
  auto behind = store_->apply_event(j2, event(lease2, 3, p::EventState::succeeded, 0), w, now());
  ASSERT_FALSE(behind);
  EXPECT_EQ(behind.error().status, 409u);
  EXPECT_EQ(behind.error().code, "outOfOrder");
  EXPECT_EQ(behind.error().last_seq, 5);
  EXPECT_EQ(store_->get_job(j2)->state, p::JobState::running);
  EXPECT_TRUE(store_->apply_event(j2, event(lease2, 5, p::EventState::running), w, now())->reply.duplicate);
  EXPECT_EQ(store_->apply_event(j2, event(lease2, 7, p::EventState::succeeded, 0), w, now())->reply.job_state,
            p::JobState::succeeded);
  auto unknown = store_->apply_event(j, event("lse_nope", 1, p::EventState::running), w, now());
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().status, 409u);
  EXPECT_EQ(store_->apply_event("job_nope", event(lease, 9, p::EventState::running), w, now()).error().status, 404u);
  auto job = store_->get_job(j).value();
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_EQ(job.events.size(), 2u);
}

TEST_F(StoreTest, LostLeaseRequeuesThenFencesTheOldWorker) {
  std::string j = submit();
  std::string w1 = worker();
  auto lease1 = poll(w1).reply.jobs.at(0).lease_id;
  auto x = store_->expire_lease(lease1, "test", now());
  EXPECT_TRUE(x.expired);
  ASSERT_TRUE(x.requeued);
  EXPECT_EQ(store_->get_job(j)->state, p::JobState::queued);
  std::string w2 = worker();
  auto a2 = poll(w2).reply.jobs.at(0);
  EXPECT_EQ(a2.attempt, 2);
  EXPECT_EQ(store_->apply_event(j, event(lease1, 1, p::EventState::running), w1, now()).error().code, "leaseLost");
  EXPECT_EQ(store_->append_log(j, "stdout", lease1, w1, 0, "x").error().code, "leaseLost");
  auto old = poll(w1, {{"process", 1}}, {{j, lease1}});
  ASSERT_EQ(old.reply.cancel.size(), 1u);
  EXPECT_EQ(old.reply.cancel[0].reason, p::CancelReason::lease_lost);
  auto cur = poll(w2, {{"process", 1}}, {{j, a2.lease_id}});
  EXPECT_TRUE(cur.reply.cancel.empty());
  EXPECT_EQ(cur.renewed_leases, (std::vector<LeaseRef>{{a2.lease_id, "process"}}));
  // The last attempt lost: the job is lost.
  EXPECT_FALSE(store_->expire_lease(a2.lease_id, "test", now()).requeued);
  EXPECT_EQ(store_->get_job(j)->state, p::JobState::lost);
  EXPECT_FALSE(store_->expire_lease(a2.lease_id, "again", now()).expired);
}

// A poll checks the worker's own live attempts from one query and looks any other listed lease up alone: each
// listed attempt is answered as if it were checked alone, whichever way it was found.
TEST_F(StoreTest, APollListingEveryKindOfAttemptAnswersEachOne) {
  std::string w = worker(), other = worker();
  std::vector<std::string> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(submit());
  std::vector<std::string> leases;
  for (const auto& a : poll(w, {{"process", 5}}).reply.jobs) leases.push_back(a.lease_id);
  ASSERT_EQ(leases.size(), 5u);
  store_->cancel_job(jobs[1], now()).value();                                                  // live, cancel asked
  store_->apply_event(jobs[2], event(leases[2], 1, p::EventState::succeeded, 0), w, now()).value();  // final
  std::string elsewhere = submit();
  auto other_lease = poll(other, {{"process", 1}}).reply.jobs.at(0).lease_id;
  auto out = poll(w, {{"process", 0}},
                  {{jobs[0], leases[0]},
                   {jobs[1], leases[1]},
                   {jobs[2], leases[2]},
                   {elsewhere, other_lease},  // another worker's
                   {jobs[0], leases[1]},      // a live lease of this worker's, under another job's id
                   {"job_unknown", "lse_unknown"},
                   {jobs[3], leases[3]},
                   {jobs[4], leases[4]}});
  EXPECT_EQ(out.renewed_leases, (std::vector<LeaseRef>{{leases[0], "process"},
                                                       {leases[1], "process"},
                                                       {leases[3], "process"},
                                                       {leases[4], "process"}}));
  std::vector<std::tuple<std::string, std::string, p::CancelReason>> cancels;
  for (const auto& c : out.reply.cancel) cancels.emplace_back(c.job_id, c.lease_id, c.reason);
  using R = p::CancelReason;
  EXPECT_EQ(cancels, (std::vector<std::tuple<std::string, std::string, R>>{
                         {jobs[1], leases[1], R::user},
                         {elsewhere, other_lease, R::lease_lost},
                         {jobs[0], leases[1], R::lease_lost},
                         {"job_unknown", "lse_unknown", R::lease_lost}}));
}

TEST_F(StoreTest, CancelQueuedRunningAndFinished) {
  std::string q = submit();
  auto c = store_->cancel_job(q, now()).value();
  EXPECT_EQ(c.job.state, p::JobState::cancelled);
  EXPECT_FALSE(c.wake_worker);
  std::string r = submit();
  std::string w = worker();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  auto c2 = store_->cancel_job(r, now()).value();
  EXPECT_EQ(c2.job.state, p::JobState::cancelling);
  EXPECT_EQ(c2.wake_worker, w);
  auto p2 = poll(w, {{"process", 1}}, {{r, lease}});
  ASSERT_EQ(p2.reply.cancel.size(), 1u);
  EXPECT_EQ(p2.reply.cancel[0].reason, p::CancelReason::user);
  store_->apply_event(r, event(lease, 1, p::EventState::cancelled), w, now()).value();
  EXPECT_EQ(store_->get_job(r)->state, p::JobState::cancelled);
  std::string s = submit();
  auto l3 = poll(w).reply.jobs.at(0).lease_id;
  store_->apply_event(s, event(l3, 1, p::EventState::succeeded, 0), w, now()).value();
  EXPECT_EQ(store_->cancel_job(s, now()).error().code, "jobFinished");
}

TEST_F(StoreTest, LogOffsetsOverlapGapAndBinary) {
  std::string j = submit();
  std::string w = worker();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(store_->append_log(j, "stdout", lease, w, 0, all.substr(0, 100)).value(), 100u);
  EXPECT_EQ(store_->append_log(j, "stdout", lease, w, 50, all.substr(50, 100)).value(), 150u);  // overlap
  EXPECT_EQ(store_->append_log(j, "stdout", lease, w, 0, all.substr(0, 10)).value(), 150u);     // repeat
  auto gap = store_->append_log(j, "stdout", lease, w, 200, all.substr(200));
  ASSERT_FALSE(gap);
  EXPECT_EQ(gap.error().code, "logGap");
  EXPECT_EQ(gap.error().expected_offset, 150u);
  EXPECT_EQ(store_->append_log(j, "stdout", lease, w, 150, all.substr(150)).value(), 256u);
  auto read = store_->read_log(j, "stdout", 0, std::nullopt, 1 << 20).value();
  EXPECT_EQ(read.data, all);
  EXPECT_EQ(read.size, 256u);
  auto tail = store_->read_log(j, "stdout", 120, std::nullopt, 10).value();
  EXPECT_EQ(tail.data, all.substr(120, 10));
  EXPECT_TRUE(store_->read_log(j, "stderr", 0, std::nullopt, 100)->data.empty());
}

TEST_F(StoreTest, LogsAreFilesBesideTheDatabaseAndOnlyCommittedBytesCount) {
  std::string j = submit();
  std::string w = worker();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  ASSERT_EQ(store_->append_log(j, "stdout", lease, w, 0, "hello").value(), 5u);
  std::filesystem::path dir = path_ + ".logs", file = dir / (j + "-1.stdout");
  EXPECT_EQ(read_file(file), "hello");
  EXPECT_EQ(std::filesystem::status(dir).permissions() & std::filesystem::perms::all, std::filesystem::perms::owner_all);
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // An upload written to the file whose commit never happened (a crash in between): not part of the log,
  // and overwritten by the next upload.
  std::ofstream(file, std::ios::binary | std::ios::app) << "GARBAGE";
  EXPECT_EQ(store_->read_log(j, "stdout", 0, std::nullopt, 100)->data, "hello");
  ASSERT_EQ(store_->append_log(j, "stdout", lease, w, 5, " world").value(), 11u);
  EXPECT_EQ(store_->read_log(j, "stdout", 0, std::nullopt, 100)->data, "hello world");
  EXPECT_EQ(read_file(file).substr(0, 11), "hello world");
  // A stream begun by a version that kept logs in the database stays there.
  std::string legacy = "INSERT INTO log_chunks VALUES('" + j + "', 1, 'stderr', 0, X'6f6c64'); "
                       "INSERT INTO log_sizes VALUES('" + j + "', 1, 'stderr', 3);";
  store_->exec(legacy.c_str());
  ASSERT_EQ(store_->append_log(j, "stderr", lease, w, 3, "new").value(), 6u);
  EXPECT_EQ(store_->read_log(j, "stderr", 0, std::nullopt, 100)->data, "oldnew");
  EXPECT_EQ(store_->read_log(j, "stderr", 2, std::nullopt, 3)->data, "dne");
  EXPECT_FALSE(std::filesystem::exists(dir / (j + "-1.stderr")));
}

TEST_F(StoreTest, ReregisterKeepsIdAndReconcilesRunning) {
  std::string launch = nymph::test::fresh_ulid();
  std::string w = worker({"process"}, {}, {}, launch);
  std::string j = submit();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  p::ExitRequest ex;
  ex.exit_reason = p::ExitReason::sigterm;
  store_->worker_exit(w, ex, now()).value();
  EXPECT_EQ(store_->poll(w, {}, now()).error().code, "unknownWorker");
  p::RegisterRequest r;
  r.launch_id = launch;
  r.hostname = "h";
  r.runners = {"process"};
  r.running = {{j, lease}, {"job_gone", "lse_gone"}};
  auto again = store_->register_worker(r, agent_, now()).value();
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.reply.worker_id, w);
  EXPECT_EQ(again.renewed_leases, (std::vector<LeaseRef>{{lease, "process"}}));
  ASSERT_EQ(again.reply.cancel.size(), 1u);
  EXPECT_EQ(again.reply.cancel[0].job_id, "job_gone");
  auto info = store_->list_workers().workers.at(0);
  EXPECT_EQ(info.status, p::WorkerStatus::active);
  EXPECT_FALSE(info.exit_reason);
  EXPECT_EQ(info.running_jobs, std::vector<std::string>{j});
}

// A kept launch: each generation registers with the launch's id and its own generation, and is its own worker;
// re-registering a generation keeps that generation's worker.
TEST_F(StoreTest, EachGenerationOfALaunchIsItsOwnWorker) {
  std::string launch = nymph::test::fresh_ulid();
  auto reg = [&](std::int64_t generation) {
    p::RegisterRequest r;
    r.launch_id = launch;
    r.hostname = "node1";
    r.backend = "slurm";
    r.runners = {"process"};
    r.generation = generation;
    return store_->register_worker(r, agent_, now()).value();
  };
  auto first = reg(1), second = reg(2), second_again = reg(2);
  EXPECT_TRUE(first.created);
  EXPECT_TRUE(second.created);
  EXPECT_NE(first.reply.worker_id, second.reply.worker_id);
  EXPECT_FALSE(second_again.created);
  EXPECT_EQ(second_again.reply.worker_id, second.reply.worker_id);
  std::map<std::string, std::int64_t> generation_of;
  for (const auto& w : store_->list_workers().workers) {
    EXPECT_EQ(w.launch_id, launch);
    generation_of[w.id] = w.generation;
  }
  EXPECT_EQ(generation_of, (std::map<std::string, std::int64_t>{{first.reply.worker_id, 1},
                                                                 {second.reply.worker_id, 2}}));
}

TEST_F(StoreTest, StateSurvivesReopen) {
  std::string j = submit();
  std::string w = worker();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  store_->append_log(j, "stdout", lease, w, 0, "abc").value();
  store_.reset();
  store_ = Store::open(path_);
  auto live = store_->live_state();
  EXPECT_EQ(live.active_workers, std::vector<std::string>{w});
  EXPECT_EQ(live.live_leases, (std::vector<LeaseRef>{{lease, "process"}}));
  EXPECT_EQ(store_->read_log(j, "stdout", 0, std::nullopt, 100)->data, "abc");
  EXPECT_TRUE(store_->mark_stale(w));
  EXPECT_FALSE(store_->mark_stale(w));
  EXPECT_EQ(store_->counts()[p::WorkerStatus::stale], 1);
}

TEST_F(StoreTest, RecordedChangesMoveTheCountsExactlyOnEveryPath) {
  StateCounts tracked = store_->counts();
  auto step = [&](const char* what) {
    tracked += store_->take_changes();
    EXPECT_EQ(tracked, store_->counts()) << "after " << what;
  };
  std::string launch = nymph::test::fresh_ulid();
  std::string w1 = worker({"process"}, {}, {}, launch);
  std::string w2 = worker();
  step("register");
  std::vector<std::string> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(submit("process", {}, {}, i == 2 ? 1 : 2));
  step("submit");
  auto got = poll(w1, {{"process", 3}}).reply.jobs;
  ASSERT_EQ(got.size(), 3u);
  step("dispatch");
  store_->apply_event(jobs[0], event(got[0].lease_id, 1, p::EventState::running), w1, now()).value();
  step("running event");
  store_->apply_event(jobs[0], event(got[0].lease_id, 2, p::EventState::succeeded, 0), w1, now()).value();
  step("final event");
  store_->apply_event(jobs[1], event(got[1].lease_id, 1, p::EventState::lost), w1, now()).value();
  step("lost event (re-queued)");
  store_->cancel_job(jobs[2], now()).value();
  step("cancel of a running job");
  EXPECT_TRUE(store_->expire_lease(got[2].lease_id, "expired", now()).expired);
  step("lease expiry of a cancelling job");
  store_->cancel_job(jobs[4], now()).value();
  step("cancel of a queued job");
  EXPECT_FALSE(store_->apply_event(jobs[0], event(got[0].lease_id, 3, p::EventState::failed), w1, now()));
  step("a refused event");
  EXPECT_TRUE(store_->mark_stale(w2));
  step("stale");
  poll(w2, {{"process", 0}});
  step("poll of a stale worker");
  store_->worker_exit(w1, p::ExitRequest{p::ExitReason::sigterm, ""}, now()).value();
  step("exit");
  worker({"process"}, {}, {}, launch);
  step("re-registration of a gone worker");
  std::string secret = store_->create_token(Role::agent, "revoked-later", now());
  p::RegisterRequest r;
  r.launch_id = nymph::test::fresh_ulid();
  r.hostname = "h";
  r.runners = {"process"};
  store_->register_worker(r, store_->find_token(secret).value(), now()).value();
  step("registration with a real token");
  store_->revoke_tokens("revoked-later", now()).value();
  step("revocation of its token");
  store_->worker_exit(w1, p::ExitRequest{p::ExitReason::sigterm, ""}, now()).value();
  EXPECT_GT(store_->purge(now() + std::chrono::hours(1), 100).jobs, 0);
  step("purge");
}

TEST_F(StoreTest, TheDatabaseItsWalShmAndLogsArePrivateWhateverTheUmask) {
  store_.reset();
  std::filesystem::remove(path_);
  Umask umask(022);  // SQLite alone made c.db, -wal and -shm 0644: job environments readable by all
  store_ = Store::open(path_);
  std::string j = submit();
  std::string w = worker();
  auto lease = poll(w).reply.jobs.at(0).lease_id;
  store_->append_log(j, "stdout", lease, w, 0, "abc").value();
  for (const auto& file : {path_, path_ + "-wal", path_ + "-shm", path_ + ".logs/" + j + "-1.stdout"})
    EXPECT_EQ(mode_of(file), 0600u) << file;
  EXPECT_EQ(mode_of(path_ + ".logs"), 0700u);
}

TEST_F(StoreTest, AnExistingDatabaseOthersCanReadIsTightenedWithAWarning) {
  std::string j = submit();
  store_.reset();  // the last connection removes -wal and -shm
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  std::ofstream(path_ + "-wal").flush();  // left behind by an older version, say
  ASSERT_EQ(::chmod((path_ + "-wal").c_str(), 0640), 0);
  std::ostringstream logged;
  auto log = std::make_shared<spdlog::logger>("store", std::make_shared<spdlog::sinks::ostream_sink_st>(logged));
  store_ = Store::open(path_, {}, log);
  EXPECT_EQ(mode_of(path_), 0600u);
  EXPECT_EQ(mode_of(path_ + "-wal"), 0600u);
  EXPECT_NE(logged.str().find(path_ + ": mode 0644 -> 0600"), std::string::npos) << logged.str();
  EXPECT_NE(logged.str().find(path_ + "-wal: mode 0640 -> 0600"), std::string::npos) << logged.str();
  EXPECT_TRUE(store_->get_job(j));  // the same database, only its mode changed
}

TEST_F(StoreTest, LogsStopAtTheJobCapAndAtTheAttemptsFinalEvent) {
  std::string j = submit();
  std::string w = worker();
  auto lease1 = poll(w).reply.jobs.at(0).lease_id;
  EXPECT_EQ(store_->append_log(j, "stdout", lease1, w, 0, "0123456789", 16).value(), 10u);
  EXPECT_EQ(store_->append_log(j, "stderr", lease1, w, 0, "abcd", 16).value(), 4u);
  auto over = store_->append_log(j, "stderr", lease1, w, 4, "efg", 16);  // 17 bytes for the job: refused whole
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().status, 413u);
  EXPECT_EQ(over.error().code, "logCapReached");
  EXPECT_NE(over.error().message.find("cap of 16 bytes per job"), std::string::npos) << over.error().message;
  EXPECT_EQ(store_->read_log(j, "stderr", 0, std::nullopt, 100)->size, 4u);
  EXPECT_EQ(store_->append_log(j, "stderr", lease1, w, 0, "abcd", 16).value(), 4u);  // nothing new: still fine
  EXPECT_EQ(store_->append_log(j, "stderr", lease1, w, 4, "ef", 16).value(), 6u);    // exactly at the cap
  // The cap is per job: a second attempt shares it.
  store_->apply_event(j, event(lease1, 1, p::EventState::lost), w, now()).value();
  auto lease2 = poll(w).reply.jobs.at(0).lease_id;
  EXPECT_EQ(store_->append_log(j, "stdout", lease2, w, 0, "x", 16).error().code, "logCapReached");
  // After the attempt's final event nothing more is stored.
  store_->apply_event(j, event(lease2, 1, p::EventState::succeeded, 0), w, now()).value();
  auto late = store_->append_log(j, "stdout", lease2, w, 0, "late");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().status, 409u);
  EXPECT_EQ(late.error().code, "attemptFinished");
  EXPECT_EQ(store_->read_log(j, "stdout", 0, 2, 100)->size, 0u);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".logs/" + j + "-2.stdout"));
}

TEST_F(StoreTest, ListsComeInPagesByCountAndSize) {
  std::vector<std::string> workers;
  for (int i = 0; i < 5; ++i) workers.push_back(worker());
  std::sort(workers.begin(), workers.end());
  std::vector<std::string> seen;
  std::optional<std::string> cursor;
  int pages = 0;
  do {
    auto page = store_->list_workers(cursor, PageSpec{2, 1 << 20});
    EXPECT_LE(page.workers.size(), 2u);
    for (const auto& w : page.workers) seen.push_back(w.id);
    cursor = page.next_cursor;
    ++pages;
  } while (cursor && pages < 10);
  EXPECT_EQ(seen, workers);  // in id order, each once
  EXPECT_EQ(pages, 3);
  EXPECT_FALSE(store_->list_workers(std::nullopt, PageSpec{5, 1 << 20}).next_cursor);  // exactly one full page
  // A page ends early once its JSON would pass max_bytes, but never holds nothing.
  auto small = store_->list_workers(std::nullopt, PageSpec{5, 1});
  EXPECT_EQ(small.workers.size(), 1u);
  EXPECT_EQ(small.next_cursor, workers[0]);

  std::vector<std::string> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(submit());
  store_->cancel_job(jobs[1], now()).value();
  auto newest = store_->list_jobs(std::nullopt, std::nullopt, PageSpec{3, 1 << 20});
  ASSERT_EQ(newest.jobs.size(), 3u);
  EXPECT_EQ(newest.jobs[0].id, jobs[4]);
  ASSERT_TRUE(newest.next_cursor);
  auto rest = store_->list_jobs(std::nullopt, std::stoll(*newest.next_cursor), PageSpec{3, 1 << 20});
  ASSERT_EQ(rest.jobs.size(), 2u);
  EXPECT_EQ(rest.jobs[0].id, jobs[1]);
  EXPECT_EQ(rest.jobs[1].id, jobs[0]);
  EXPECT_FALSE(rest.next_cursor);
  auto queued = store_->list_jobs(p::JobState::queued, std::nullopt, PageSpec{10, 1 << 20});
  EXPECT_EQ(queued.jobs.size(), 4u);
  EXPECT_FALSE(queued.next_cursor);
}

TEST_F(StoreTest, PurgeDeletesOldFinishedJobsWithTheirLogsAndOldGoneOrStaleWorkersOnly) {
  const WallTime old = now() - std::chrono::hours(24 * 40), cutoff = now() - std::chrono::hours(24 * 30);
  std::string live_launch = nymph::test::fresh_ulid();
  std::string w = worker({"process"}, {}, {}, live_launch);
  std::string old_job = submit(), new_job = submit(), running = submit();
  auto got = poll(w, {{"process", 3}}).reply.jobs;
  ASSERT_EQ(got.size(), 3u);
  store_->append_log(old_job, "stdout", got[0].lease_id, w, 0, "out").value();
  store_->append_log(old_job, "stderr", got[0].lease_id, w, 0, "err").value();
  store_->apply_event(old_job, event(got[0].lease_id, 1, p::EventState::succeeded, 0), w, old).value();
  store_->apply_event(new_job, event(got[1].lease_id, 1, p::EventState::failed, 1), w, now()).value();
  std::string queued = submit();
  // Workers: one gone and one stale long ago, one gone long ago that still holds a live attempt (`running`),
  // and an active one not seen for long.
  p::ExitRequest bye{p::ExitReason::sigterm, ""};
  std::string gone = worker();
  store_->worker_exit(gone, bye, old).value();
  p::RegisterRequest r;
  r.launch_id = nymph::test::fresh_ulid();
  r.hostname = "h";
  r.runners = {"process"};
  std::string stale = store_->register_worker(r, agent_, old).value().reply.worker_id;
  EXPECT_TRUE(store_->mark_stale(stale));
  store_->worker_exit(w, bye, old).value();
  r.launch_id = nymph::test::fresh_ulid();
  std::string quiet = store_->register_worker(r, agent_, old).value().reply.worker_id;

  auto purged = store_->purge(cutoff, 100);
  EXPECT_EQ(purged.jobs, 1);
  EXPECT_EQ(purged.log_files, 2);
  EXPECT_EQ(purged.workers, 2);
  EXPECT_FALSE(purged.more);
  EXPECT_EQ(store_->get_job(old_job).error().code, "unknownJob");
  EXPECT_FALSE(std::filesystem::exists(path_ + ".logs/" + old_job + "-1.stdout"));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".logs/" + old_job + "-1.stderr"));
  for (const auto& kept : {new_job, running, queued}) EXPECT_TRUE(store_->get_job(kept)) << kept;
  std::vector<std::string> left;
  for (const auto& x : store_->list_workers().workers) left.push_back(x.id);
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected{w, quiet};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(left, expected);
  // In batches: a full batch says there may be more.
  store_->apply_event(running, event(got[2].lease_id, 1, p::EventState::succeeded, 0), w, old).value();
  const WallTime later = now() + std::chrono::hours(1);
  auto first = store_->purge(later, 1);
  EXPECT_EQ(first.jobs, 1);
  EXPECT_TRUE(first.more);
  EXPECT_EQ(store_->purge(later, 1).jobs, 1);
  EXPECT_EQ(store_->purge(later, 1).jobs, 0);
  EXPECT_TRUE(store_->get_job(queued));
}

// ---------------------------------------------------------------------------------------------------------
// Takeover (docs/protocol.md 8.1): a registration with an identity replaces the other workers of its token
// and identity.

namespace {
p::RegisterRequest manager_registration(const std::string& identity, std::vector<p::AttemptRef> running = {}) {
  p::RegisterRequest r;
  r.launch_id = nymph::test::fresh_ulid();
  r.hostname = "login1";
  r.runners = {"process"};
  r.identity = identity;
  r.running = std::move(running);
  return r;
}
}  // namespace

TEST_F(StoreTest, TakeoverMovesListedAttemptsWithTheirLeaseAndLosesTheRest) {
  StateCounts tracked = store_->counts();
  auto old = store_->register_worker(manager_registration("alice@c1"), agent_, now()).value().reply.worker_id;
  std::string kept = submit(), dropped = submit(), finished = submit();
  auto jobs = poll(old, {{"process", 3}}).reply.jobs;
  ASSERT_EQ(jobs.size(), 3u);
  std::string kept_lease = jobs[0].lease_id, dropped_lease = jobs[1].lease_id, finished_lease = jobs[2].lease_id;
  store_->apply_event(kept, event(kept_lease, 1, p::EventState::running), old, now()).value();
  store_->apply_event(finished, event(finished_lease, 1, p::EventState::succeeded, 0), old, now()).value();
  tracked += store_->take_changes();

  auto reg = manager_registration("alice@c1", {{kept, kept_lease}, {finished, finished_lease}});
  auto out = store_->register_worker(reg, agent_, now()).value();
  const std::string& fresh = out.reply.worker_id;
  EXPECT_NE(fresh, old);
  EXPECT_TRUE(out.reply.cancel.empty()) << out.reply.cancel.at(0).job_id;
  EXPECT_EQ(out.replaced_workers, std::vector<std::string>{old});
  EXPECT_EQ(out.adopted_leases, (std::vector<std::string>{kept_lease, finished_lease}));
  EXPECT_EQ(out.renewed_leases, (std::vector<LeaseRef>{{kept_lease, "process"}}));
  EXPECT_EQ(out.lost_leases, std::vector<std::string>{dropped_lease});
  ASSERT_EQ(out.requeued.size(), 1u);
  tracked += store_->take_changes();
  EXPECT_EQ(tracked, store_->counts()) << "the gauges follow a takeover";

  // The predecessor is gone and says why; its credential acts for nothing any more.
  auto workers = store_->list_workers().workers;
  ASSERT_EQ(workers.size(), 2u);
  const auto& gone = workers[0].id == old ? workers[0] : workers[1];
  EXPECT_EQ(gone.status, p::WorkerStatus::gone);
  EXPECT_EQ(gone.exit_reason, p::ExitReason::killed);
  EXPECT_EQ(gone.exit_message, "replaced by worker " + fresh);
  EXPECT_EQ(gone.identity, "alice@c1");
  EXPECT_EQ(store_->poll(old, {}, now()).error().code, "unknownWorker");
  EXPECT_EQ(store_->apply_event(kept, event(kept_lease, 2, p::EventState::succeeded, 0), old, now()).error().code,
            "forbidden");

  // The adopted attempt carries on under the same lease on the new worker, which finishes it.
  auto job = store_->get_job(kept).value();
  EXPECT_EQ(job.state, p::JobState::running);
  EXPECT_EQ(job.worker_id, fresh);
  EXPECT_EQ(job.attempts.at(0).lease_id, kept_lease);
  EXPECT_EQ(job.attempts.at(0).worker_id, fresh);
  EXPECT_TRUE(poll(fresh, {{"process", 0}}, {{kept, kept_lease}}).reply.cancel.empty());
  EXPECT_EQ(store_->apply_event(kept, event(kept_lease, 2, p::EventState::succeeded, 0), fresh, now())->reply.job_state,
            p::JobState::succeeded);
  // A final event the predecessor had delivered is a duplicate for its successor, not a refusal.
  EXPECT_TRUE(store_->apply_event(finished, event(finished_lease, 1, p::EventState::succeeded, 0), fresh, now())
                  ->reply.duplicate);
  // The unlisted attempt was lost and its job went back to the queue (attempt 2 of 2).
  auto d = store_->get_job(dropped).value();
  EXPECT_EQ(d.state, p::JobState::queued);
  EXPECT_EQ(d.attempts.at(0).state, p::AttemptState::lost);
  EXPECT_EQ(d.attempts.at(0).message, "its worker was replaced by worker " + fresh);
  EXPECT_EQ(store_->apply_event(dropped, event(dropped_lease, 1, p::EventState::running), old, now()).error().code,
            "leaseLost");
}

TEST_F(StoreTest, TakeoverAdoptsFromAGoneManagerWithoutTouchingItsOtherAttempts) {
  auto old = store_->register_worker(manager_registration("alice@c1"), agent_, now()).value().reply.worker_id;
  std::string listed = submit(), unlisted = submit();
  auto jobs = poll(old, {{"process", 2}}).reply.jobs;
  p::ExitRequest ex;
  ex.exit_reason = p::ExitReason::sigterm;
  store_->worker_exit(old, ex, now()).value();  // a manager that reported /exit before its successor started
  auto out = store_->register_worker(manager_registration("alice@c1", {{listed, jobs[0].lease_id}}), agent_, now())
                 .value();
  EXPECT_TRUE(out.reply.cancel.empty());
  EXPECT_TRUE(out.replaced_workers.empty());  // already gone: its exit reason stays
  EXPECT_EQ(out.adopted_leases, std::vector<std::string>{jobs[0].lease_id});
  EXPECT_TRUE(out.lost_leases.empty());        // a gone worker's attempts end by events or lease expiry
  EXPECT_EQ(store_->get_job(listed)->worker_id, out.reply.worker_id);
  EXPECT_EQ(store_->get_job(unlisted)->state, p::JobState::running);
  auto workers = store_->list_workers().workers;
  const auto& gone = workers[0].id == old ? workers[0] : workers[1];
  EXPECT_EQ(gone.exit_reason, p::ExitReason::sigterm);
}

TEST_F(StoreTest, NoTakeoverAcrossTokensOrIdentitiesOrWithoutAnIdentity) {
  TokenRecord other{token_hash("nym_other"), "other", Role::agent, {}, false};
  auto old = store_->register_worker(manager_registration("alice@c1"), agent_, now()).value().reply.worker_id;
  std::string j = submit();
  auto lease = poll(old).reply.jobs.at(0).lease_id;
  struct Case {
    const char* what;
    p::RegisterRequest reg;
    const TokenRecord* by;
  };
  std::vector<Case> cases{{"another identity", manager_registration("bob@c1", {{j, lease}}), &agent_},
                          {"another token", manager_registration("alice@c1", {{j, lease}}), &other},
                          {"no identity", manager_registration("", {{j, lease}}), &agent_}};
  cases[2].reg.identity.reset();
  for (auto& c : cases) {
    auto out = store_->register_worker(c.reg, *c.by, now()).value();
    ASSERT_EQ(out.reply.cancel.size(), 1u) << c.what;
    EXPECT_EQ(out.reply.cancel[0].reason, p::CancelReason::lease_lost) << c.what;
    EXPECT_TRUE(out.replaced_workers.empty()) << c.what;
    EXPECT_TRUE(out.adopted_leases.empty()) << c.what;
  }
  EXPECT_EQ(store_->get_job(j)->worker_id, old);
  EXPECT_TRUE(poll(old, {{"process", 0}}, {{j, lease}}).reply.cancel.empty());
}

// ---------------------------------------------------------------------------------------------------------
// Lost events with a reason (D1 of issue 15)

TEST_F(StoreTest, AnOverCapacityRefusalRequeuesTheJobWithoutCountingAnAttempt) {
  StateCounts tracked = store_->counts();
  std::string j = submit("process", {}, {}, /*max_attempts=*/1);
  std::string w = worker();
  auto first = poll(w, {{"process", 1}}).reply.jobs.at(0);
  auto refuse = event(first.lease_id, 1, p::EventState::lost);
  refuse.reason = p::EventReason::over_capacity;
  auto r = store_->apply_event(j, refuse, w, now()).value();
  EXPECT_EQ(r.reply.job_state, p::JobState::queued) << "maxAttempts 1, yet the refusal was not the job's attempt";
  ASSERT_TRUE(r.requeued);
  EXPECT_FALSE(r.freed_slot) << "a refused job never held a slot";
  auto job = store_->get_job(j).value();
  EXPECT_EQ(job.attempts.at(0).state, p::AttemptState::lost);
  EXPECT_EQ(job.attempts.at(0).message, "refused by the worker: over capacity");
  EXPECT_EQ(job.events.at(0).reason, p::EventReason::over_capacity);
  tracked += store_->take_changes();
  EXPECT_EQ(tracked, store_->counts());

  // The next attempt is numbered on (2) and is the job's one counted attempt: losing it loses the job.
  auto second = poll(w, {{"process", 1}}).reply.jobs.at(0);
  EXPECT_EQ(second.attempt, 2);
  auto stopping = event(second.lease_id, 1, p::EventState::lost);
  stopping.reason = p::EventReason::worker_stopping;
  EXPECT_EQ(store_->apply_event(j, stopping, w, now())->reply.job_state, p::JobState::lost);
  EXPECT_EQ(store_->get_job(j)->events.at(1).reason, p::EventReason::worker_stopping);
}

TEST_F(StoreTest, AnOverCapacityClaimAfterTheAttemptStartedCountsLikeAnyLostAttempt) {
  std::string j = submit("process", {}, {}, /*max_attempts=*/1);
  std::string w = worker();
  auto lease = poll(w, {{"process", 1}}).reply.jobs.at(0).lease_id;
  store_->apply_event(j, event(lease, 1, p::EventState::running), w, now()).value();
  auto late = event(lease, 2, p::EventState::lost);
  late.reason = p::EventReason::over_capacity;
  auto r = store_->apply_event(j, late, w, now()).value();
  EXPECT_EQ(r.reply.job_state, p::JobState::lost);
  EXPECT_TRUE(r.freed_slot);
}

TEST_F(StoreTest, WorkerStoppingAndLeaseExpiredRequeueWhileAttemptsRemain) {
  for (auto reason : {p::EventReason::worker_stopping, p::EventReason::lease_expired}) {
    std::string j = submit();  // maxAttempts 2
    std::string w = worker();
    auto lease = poll(w, {{"process", 1}}).reply.jobs.at(0).lease_id;
    store_->apply_event(j, event(lease, 1, p::EventState::running), w, now()).value();
    auto lost = event(lease, 2, p::EventState::lost);
    lost.reason = reason;
    EXPECT_EQ(store_->apply_event(j, lost, w, now())->reply.job_state, p::JobState::queued) << p::to_string(reason);
    auto again = poll(w, {{"process", 1}}).reply.jobs.at(0);
    EXPECT_EQ(again.attempt, 2);
    auto lost2 = event(again.lease_id, 1, p::EventState::lost);
    lost2.reason = reason;
    EXPECT_EQ(store_->apply_event(j, lost2, w, now())->reply.job_state, p::JobState::lost) << p::to_string(reason);
  }
}

TEST_F(StoreTest, LiveStateCarriesEachLeasesRunnerForItsTtlAfterARestart) {
  std::string p1 = submit("process"), s1 = submit("slurm");
  std::string w = worker({"process", "slurm"});
  auto jobs = poll(w, {{"process", 1}, {"slurm", 1}}).reply.jobs;
  ASSERT_EQ(jobs.size(), 2u);
  store_.reset();
  store_ = Store::open(path_);
  auto live = store_->live_state().live_leases;
  std::sort(live.begin(), live.end(), [](const LeaseRef& a, const LeaseRef& b) { return a.runner < b.runner; });
  const auto& pl = jobs[0].runner == "process" ? jobs[0] : jobs[1];
  const auto& sl = jobs[0].runner == "slurm" ? jobs[0] : jobs[1];
  EXPECT_EQ(live, (std::vector<LeaseRef>{{pl.lease_id, "process"}, {sl.lease_id, "slurm"}}));
}

TEST_F(StoreTest, TouchWorkerKeepsLastSeenToTheSecond) {
  auto t0 = now();
  std::string w = worker();  // lastSeen t0 (about)
  EXPECT_FALSE(store_->touch_worker(w, t0 + std::chrono::milliseconds(500))) << "within a second: not written";
  EXPECT_TRUE(store_->touch_worker(w, t0 + std::chrono::seconds(5)));
  EXPECT_EQ(store_->list_workers().workers.at(0).last_seen, p::format_time(t0 + std::chrono::seconds(5)));
  EXPECT_FALSE(store_->touch_worker("wrk_nope", t0));
}
