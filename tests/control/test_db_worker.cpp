// The DB thread's gauges: counted at start, moved only by the state changes of committed operations.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/logging.hpp"
#include "control/db_worker.hpp"

using namespace nymph::control;
namespace p = nymph::protocol;

namespace {

class DbWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = std::filesystem::temp_directory_path().string() + "/nymph-dbworker-XXXXXX";
    dir_ = ::mkdtemp(templ.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static p::JobSubmission command() {
    p::JobSubmission s;
    s.spec.argv = std::vector<std::string>{"/bin/true"};
    return s;
  }

  std::string dir_;
};

}  // namespace

TEST_F(DbWorkerTest, GaugesStartFromTheDatabaseAndFollowOnlyCommittedChanges) {
  {
    auto store = Store::open(dir_ + "/c.db");
    store->submit(command(), std::chrono::system_clock::now());
  }
  DbWorker db(Store::open(dir_ + "/c.db"), nymph::null_logger());
  EXPECT_EQ(db.gauges()[p::JobState::queued], 1);
  db.run_blocking([](Store& s) { return s.submit(command(), std::chrono::system_clock::now()).job.id; });
  EXPECT_EQ(db.gauges()[p::JobState::queued], 2);
  // An operation that fails is rolled back, and so are its changes.
  auto refused = db.run_blocking([](Store& s) -> ApiResult<int> {
    s.submit(command(), std::chrono::system_clock::now());
    return bad_request("changed my mind");
  });
  EXPECT_FALSE(refused);
  EXPECT_THROW(db.run_blocking([](Store& s) -> int {
    s.submit(command(), std::chrono::system_clock::now());
    throw std::runtime_error("a bug");
  }),
               std::runtime_error);
  EXPECT_EQ(db.gauges()[p::JobState::queued], 2);
  EXPECT_EQ(db.gauges(), db.run_blocking([](Store& s) { return s.counts(); }));
}
