// The submission journal: appended entries read back, done entries dropped, torn last lines tolerated.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "runners/slurm/journal.hpp"

namespace {

using namespace nymph::runners::slurm;
namespace fs = std::filesystem;

struct JournalTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("nymph-journal-test-" + std::to_string(::getpid()));
  fs::path path = dir / kJournalFile;
  void SetUp() override {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  static JournalEntry entry(std::string job, int attempt, std::string slurm) {
    return {job, attempt, "lease-" + job, slurm, "/launch/" + job + "-" + std::to_string(attempt),
            WallClock::time_point(std::chrono::milliseconds(1'800'000'000'123))};
  }
};

TEST_F(JournalTest, MissingFileIsEmpty) { EXPECT_TRUE(read_journal(path).value().empty()); }

TEST_F(JournalTest, AppendedEntriesSurviveReopeningAndDoneOnesAreDropped) {
  {
    auto j = Journal::open(path);
    ASSERT_TRUE(j) << j.error().message;
    ASSERT_TRUE(j->append(entry("a", 1, "10")));
    ASSERT_TRUE(j->append(entry("b", 1, "11")));
    ASSERT_TRUE(j->append(entry("c", 1, "12")));
    ASSERT_TRUE(j->mark_done("b", 1));
  }
  auto j = Journal::open(path);
  ASSERT_TRUE(j->append(entry("a", 2, "13")));
  auto read = read_journal(path);
  ASSERT_TRUE(read) << read.error().message;
  std::vector<JournalEntry> expected{entry("a", 1, "10"), entry("c", 1, "12"), entry("a", 2, "13")};
  EXPECT_EQ(*read, expected);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(JournalTest, ATornLastLineIsIgnoredButCorruptionInTheMiddleIsAnError) {
  {
    auto j = Journal::open(path);
    ASSERT_TRUE(j->append(entry("a", 1, "10")));
  }
  std::ofstream(path, std::ios::app) << R"({"op":"submit","job_id":"b","atte)";
  auto read = read_journal(path);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->size(), 1u);

  std::ofstream(path, std::ios::app) << "\n" << R"({"op":"submit","job_id":"c"})" << "\n";
  auto bad = read_journal(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;
}

TEST_F(JournalTest, CompactKeepsOnlyTheGivenEntries) {
  {
    auto j = Journal::open(path);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(j->append(entry("j" + std::to_string(i), 1, std::to_string(i))));
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(j->mark_done("j" + std::to_string(i), 1));
  }
  auto live = read_journal(path).value();
  ASSERT_EQ(live.size(), 1u);
  ASSERT_TRUE(compact_journal(path, live));
  EXPECT_EQ(read_journal(path).value(), live);
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 1);
}

TEST_F(JournalTest, OpenFailureNamesThePath) {
  auto j = Journal::open(dir / "missing-dir" / kJournalFile);
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("missing-dir"), std::string::npos);
}

TEST_F(JournalTest, IdentityFieldsRoundTripAndOldLinesWithoutThemStayReadable) {
  auto e = entry("a", 1, "10");
  e.job_name = "nymph-a";
  e.cluster = "nymphlab";
  {
    auto j = Journal::open(path);
    ASSERT_TRUE(j->append(e));
  }
  // A line written before the identity fields existed.
  std::ofstream(path, std::ios::app) << R"({"op":"submit","job_id":"b","attempt":2,"lease_id":"lease-b",)"
                                     << R"("slurm_job_id":"11","dir":"/launch/b-2","submitted_at_ms":1800000000123})"
                                     << "\n";
  auto read = read_journal(path);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0], e);
  EXPECT_EQ((*read)[1].slurm_job_id, "11");
  EXPECT_EQ((*read)[1].job_name, "nymph-b") << "the name the runner has always given its jobs";
  EXPECT_EQ((*read)[1].cluster, "") << "unknown: not checked";
}

}  // namespace

namespace {

// Found by fuzz/records: submitted_at_ms beyond what system_clock holds overflowed (undefined behaviour), and an
// attempt beyond int or an empty id was read as an entry.
TEST_F(JournalTest, OutOfRangeNumbersAndEmptyIdsAreCorruption) {
  for (std::string bad : {R"({"op":"submit","job_id":"a","attempt":1,"lease_id":"l","slurm_job_id":"1","dir":"/d",)"
                          R"("submitted_at_ms":18000000001223000})",
                          R"({"op":"submit","job_id":"a","attempt":4294967297,"lease_id":"l","slurm_job_id":"1",)"
                          R"("dir":"/d","submitted_at_ms":1})",
                          R"({"op":"submit","job_id":"","attempt":1,"lease_id":"l","slurm_job_id":"1","dir":"/d",)"
                          R"("submitted_at_ms":1})",
                          R"({"op":"submit","job_id":"a","attempt":1,"lease_id":"l","slurm_job_id":"","dir":"/d",)"
                          R"("submitted_at_ms":1})"}) {
    std::ofstream(path, std::ios::trunc) << bad << "\n" << R"({"op":"done","job_id":"z","attempt":1})" << "\n";
    EXPECT_FALSE(read_journal(path)) << bad;
  }
}

}  // namespace
