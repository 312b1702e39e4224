// Rows of the real schema mapped to wire structs; a value the code never writes is a corrupt row, reported
// as std::runtime_error and not as a storage outage.
#include <gtest/gtest.h>

#include "control/rows.hpp"
#include "control/schema.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::control;
using nymph::test::TempDir;
namespace p = nymph::protocol;

namespace {

class RowsTest : public ::testing::Test {
 protected:
  RowsTest() : db_(sql::Connection::open((dir_.path() / "r.db").string())) { db_.migrate(schema_migrations()); }

  void insert_job(const std::string& state, const std::string& spec) {
    db_.query("INSERT INTO jobs(id, state, runner, kind, spec, required_tags, max_attempts, attempts, result, "
              "created_at, updated_at) VALUES('job_1', ?, 'process', 'command', ?, '{\"gpu\":\"a100\",\"n\":1}', 3, 1, "
              "'{\"loss\":0.5}', 't0', 't1')")
        .bind(state, spec)
        .run();
  }

  p::JobInfo read_job() {
    static const std::string sql = std::string("SELECT ") + rows::kJobColumns + " FROM jobs";
    auto q = db_.query(sql.c_str());
    if (!q.step()) throw std::logic_error("no row");
    return rows::job_from(q);
  }

  TempDir dir_{"nymph-rows"};
  sql::Connection db_;
};

}  // namespace

TEST_F(RowsTest, AJobRowBecomesJobInfo) {
  insert_job("running", R"({"argv":["/bin/true"]})");
  auto j = read_job();
  EXPECT_EQ(j.id, "job_1");
  EXPECT_EQ(j.state, p::JobState::running);
  EXPECT_EQ(j.spec.argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(j.required_tags, (std::map<std::string, std::string>{{"gpu", "a100"}}));  // non-strings skipped
  EXPECT_EQ(j.max_attempts, 3);
  EXPECT_EQ(j.attempt, 1);
  EXPECT_FALSE(j.worker_id);
  ASSERT_TRUE(j.result);
  EXPECT_EQ(j.result->as_object().at("loss").as_double(), 0.5);
  EXPECT_EQ(j.created_at, "t0");
  EXPECT_FALSE(j.finished_at);
}

TEST_F(RowsTest, ACorruptRowIsNotAStorageOutage) {
  insert_job("bogus", R"({"argv":["/bin/true"]})");
  try {
    read_job();
    FAIL() << "expected a throw";
  } catch (const StorageError& e) {
    FAIL() << "a corrupt row is not an outage: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt job state 'bogus'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rows::spec_from("{not json"), std::runtime_error);
  EXPECT_THROW(rows::spec_from(R"({"argv":"not an array"})"), std::runtime_error);
}

TEST_F(RowsTest, JsonTextColumnsRoundTrip) {
  std::map<std::string, int> capacity{{"process", 4}, {"slurm", 2}};
  EXPECT_EQ(rows::int_map_from(rows::to_text(capacity)), capacity);
  std::vector<std::string> runners{"process", "slurm"};
  EXPECT_EQ(rows::strings_from(rows::to_text(runners)), runners);
  EXPECT_TRUE(rows::strings_from("{}").empty());  // the wrong shape reads as empty
}
