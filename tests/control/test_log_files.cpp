// Job-log files beside the database: durable writes at offsets, private modes, short reads at the end, and
// I/O failures reported as StorageError.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "control/log_files.hpp"
#include "control/storage_error.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

using namespace nymph::control;
using nymph::test::read_file;
using nymph::test::TempDir;
namespace fs = std::filesystem;

TEST(LogFiles, WritesAtOffsetsIntoPrivateFilesInAPrivateDirectory) {
  TempDir dir("nymph-logs");
  LogFiles logs(dir.path() / "c.db.logs");
  EXPECT_EQ(logs.path("job_1", 2, "stderr"), dir.path() / "c.db.logs" / "job_1-2.stderr");
  logs.write("job_1", 2, "stderr", 0, "hello");
  logs.write("job_1", 2, "stderr", 5, " world");
  logs.write("job_1", 2, "stderr", 0, "J");  // overwrites in place
  auto file = logs.path("job_1", 2, "stderr");
  EXPECT_EQ(read_file(file), "Jello world");
  EXPECT_EQ(fs::status(logs.dir()).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(LogFiles, ReadsAreShortOnlyAtTheEnd) {
  TempDir dir("nymph-logs");
  LogFiles logs(dir.path() / "logs");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  logs.write("job_2", 1, "stdout", 0, all);
  EXPECT_EQ(logs.read("job_2", 1, "stdout", 0, 256), all);
  EXPECT_EQ(logs.read("job_2", 1, "stdout", 250, 100), all.substr(250));
  EXPECT_EQ(logs.read("job_2", 1, "stdout", 300, 10), "");
}

TEST(LogFiles, FailuresAreStorageErrorsNamingTheFile) {
  TempDir dir("nymph-logs");
  LogFiles missing(dir.path() / "logs");
  try {
    missing.read("job_3", 1, "stdout", 0, 10);
    FAIL() << "expected StorageError";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("job_3-1.stdout"), std::string::npos) << e.what();
  }
  std::ofstream(dir.path() / "blocked") << "a file where the directory should be";
  LogFiles blocked(dir.path() / "blocked");
  EXPECT_THROW(blocked.write("job_3", 1, "stdout", 0, "x"), StorageError);
  LogFiles orphan(dir.path() / "no" / "parent");
  EXPECT_THROW(orphan.write("job_3", 1, "stdout", 0, "x"), StorageError);
}
