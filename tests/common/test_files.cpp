// common/files: small and private files are read without blocking or growing, atomic writes are all or nothing.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/files.hpp"

namespace fs = std::filesystem;

namespace {

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nymph-files-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& content, fs::perms perms) {
    auto p = dir_ / name;
    std::ofstream(p) << content;
    fs::permissions(p, perms);
    return p;
  }

  fs::path dir_;
};

constexpr auto kPrivate = fs::perms::owner_read | fs::perms::owner_write;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_F(Files, PrivateFileIsReadAndEveryUnsafeKindIsRefusedNamingTheFix) {
  auto ok = write("token", "secret\n", kPrivate);
  EXPECT_EQ(nymph::read_private_file(ok, "token file").value(), "secret\n");

  auto open = write("open", "secret", kPrivate | fs::perms::group_read);
  auto r = nymph::read_private_file(open, "token file");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "has mode 0640")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "chmod 600")) << r.error().message;

  fs::create_symlink(ok, dir_ / "link");
  EXPECT_TRUE(contains(nymph::read_private_file(dir_ / "link", "token file").error().message, "symbolic link"));
  EXPECT_TRUE(nymph::read_small_file(dir_ / "link", "file"));  // a plain small file may be a link
}

TEST_F(Files, FifoAndOversizedFilesAreRefusedAtOnce) {
  auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = nymph::read_private_file(fifo, "token file");  // would block forever in open() without O_NONBLOCK
  ASSERT_FALSE(f);
  EXPECT_TRUE(contains(f.error().message, "not a regular file")) << f.error().message;

  auto big = write("big", std::string(2000, 'x'), kPrivate);
  auto b = nymph::read_small_file(big, "config", 1000);
  ASSERT_FALSE(b);
  EXPECT_TRUE(contains(b.error().message, "is larger than 1000 bytes")) << b.error().message;
  EXPECT_TRUE(contains(nymph::read_small_file(dir_ / "none", "config").error().message, "No such file"));
}

TEST_F(Files, TheLimitIsNamedAsAPersonWouldWriteIt) {
  auto token = write("token", std::string(nymph::kMaxTokenFileBytes + 1, 'x'), kPrivate);
  auto t = nymph::read_private_file(token, "token file");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message, "token file " + token.string() + ": is larger than 64 KiB");
  auto config = write("config", std::string(nymph::kMaxConfigFileBytes + 1, 'x'), kPrivate);
  auto c = nymph::read_small_file(config, "config file", nymph::kMaxConfigFileBytes);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "config file " + config.string() + ": is larger than 1 MiB");
}

TEST_F(Files, AtomicWriteReplacesWithTheGivenModeWhateverTheUmask) {
  auto p = dir_ / "status.json";
  std::ofstream(p) << "old";
  mode_t old_mask = ::umask(0);
  auto w = nymph::write_file_atomically(p, "new", 0600);
  ::umask(old_mask);
  ASSERT_TRUE(w) << w.error().message;
  std::ifstream in(p);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "new");
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all, kPrivate);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 1);  // no temporary file left

  auto bad = nymph::write_file_atomically(dir_ / "missing-dir" / "x", "y", 0600);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error().message, "missing-dir")) << bad.error().message;
}
