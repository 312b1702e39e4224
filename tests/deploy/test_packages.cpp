// The release artifacts of packaging/release.sh: the tarball (checksum, contents, and its nymph running a job
// against a real nymph-control after unpacking into an empty directory), the .deb (dpkg -i, nymph --version,
// dpkg -r) and the .rpm (contents).
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/deploy/deploy_support.hpp"
#include "tests/support/agent_process.hpp"

using namespace nymph::test;
using namespace nymph::test::deploy;

namespace {

const std::string kName = std::string("nymph-") + NYMPH_VERSION + "-linux-x86_64";

fs::path only_file(const std::string& suffix) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dist_dir()))
    if (e.path().string().ends_with(suffix)) found.push_back(e.path());
  if (found.size() != 1) throw std::runtime_error("expected one *" + suffix + " in " + dist_dir().string());
  return found.front();
}

}  // namespace

TEST(ReleaseTarball, ChecksumMatches) {
  auto r = run_command({"sh", "-c", "cd \"$0\" && sha256sum -c \"$1\"", dist_dir().string(), kName + ".tar.gz.sha256"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(kName + ".tar.gz: OK"), std::string::npos) << r.out;
}

TEST(ReleaseTarball, UnpacksAndItsNymphRunsAJob) {
  TempDir empty;
  auto untar = run_command({"tar", "-C", empty.path().string(), "-xzf", (dist_dir() / (kName + ".tar.gz")).string()});
  ASSERT_EQ(untar.exit_code, 0) << untar.err;
  fs::path top = empty / kName;
  for (auto f : {"bin/nymph", "bin/nymph-control", "config.example.toml", "LICENSE", "README.md", "docs/install.md",
                 "examples/slurm-smoke.sh",
                 "docs/config.md", "systemd/nymph.service", "systemd/README.md"})
    EXPECT_TRUE(fs::exists(top / f)) << f;
  auto file = run_command({"file", "-b", (top / "bin/nymph").string()});
  EXPECT_NE(file.out.find("statically linked"), std::string::npos) << file.out;

  ControlServer cp({.poll_timeout = "2s"});
  Agent agent(cp, (top / "bin/nymph").string());
  auto job = run_job(cp, {"/bin/echo", "from-the-tarball"});
  EXPECT_EQ(job.state, "succeeded") << job.json << agent.log();
  EXPECT_NE(job.logs.find("from-the-tarball"), std::string::npos) << job.logs;
  EXPECT_EQ(agent.stop(), 143) << agent.log();
}

TEST(ReleaseDeb, InstallsRunsAndRemoves) {
  if (::geteuid() != 0) GTEST_SKIP() << "dpkg -i needs root";
  if (run_command({"dpkg-query", "-W", "-f=${Status}", "nymph"}).out.find("installed") != std::string::npos)
    GTEST_SKIP() << "a nymph package is already installed on this machine; not touching it";
  auto deb = only_file(".deb");
  auto install = run_command({"dpkg", "-i", deb.string()});
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  auto version = run_command({"/usr/bin/nymph", "--version"});
  auto control = run_command({"/usr/bin/nymph-control", "--help"});
  bool unit = fs::exists("/usr/lib/systemd/user/nymph.service");
  auto remove = run_command({"dpkg", "-r", "nymph"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out, std::string("nymph ") + NYMPH_VERSION + "\n");
  EXPECT_EQ(control.exit_code, 0) << control.err;
  EXPECT_TRUE(unit);
  EXPECT_EQ(remove.exit_code, 0) << remove.out << remove.err;
  EXPECT_FALSE(fs::exists("/usr/bin/nymph"));
}

TEST(ReleaseRpm, HoldsBothBinariesAndTheUnit) {
  auto rpm = only_file(".rpm");
  auto list = run_command({"rpm", "-qpl", rpm.string()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (auto f : {"/usr/bin/nymph\n", "/usr/bin/nymph-control\n", "/usr/lib/systemd/user/nymph.service\n",
                 "/usr/share/doc/nymph/config.example.toml\n"})
    EXPECT_NE(list.out.find(f), std::string::npos) << f << " not in\n" << list.out;
  auto info = run_command({"rpm", "-qpi", rpm.string()});
  EXPECT_NE(info.out.find("Version     : " + std::string(NYMPH_VERSION)), std::string::npos) << info.out;
}
