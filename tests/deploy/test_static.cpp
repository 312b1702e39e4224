// The portable binary of the `static` preset: statically linked with no dynamic symbol, and working on a
// RHEL 7-era kernel (old-kernel: every syscall newer than Linux 3.10 fails with ENOSYS, uname says 2.6):
// `nymph probe`, `nymph install --dry-run`, `nymph doctor`, and a real process job through a real nymph-control.
#include <gtest/gtest.h>

#include "tests/deploy/deploy_support.hpp"
#include "tests/support/agent_process.hpp"

using namespace nymph::test;
using namespace nymph::test::deploy;

namespace {

std::vector<std::string> old_kernel(std::vector<std::string> argv) {
  std::vector<std::string> full{NYMPH_OLD_KERNEL, "setarch", "--uname-2.6", "x86_64"};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

}  // namespace

TEST(StaticBinary, IsStaticallyLinkedWithoutDynamicSymbols) {
  auto nymph = static_nymph();
  auto file = run_command({"file", "-b", nymph});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_NE(file.out.find("statically linked"), std::string::npos) << file.out;
  EXPECT_NE(file.out.find("stripped"), std::string::npos) << file.out;
  EXPECT_EQ(file.out.find("not stripped"), std::string::npos) << file.out;
  EXPECT_EQ(file.out.find("interpreter"), std::string::npos) << file.out;
  auto dyn = run_command({"objdump", "-T", nymph});
  EXPECT_EQ(dyn.out.find("GLIBC_"), std::string::npos) << dyn.out;
  EXPECT_NE((dyn.out + dyn.err).find("not a dynamic object"), std::string::npos) << dyn.out << dyn.err;
  auto headers = run_command({"objdump", "-p", nymph});
  EXPECT_EQ(headers.out.find("NEEDED"), std::string::npos) << headers.out;
}

TEST(StaticBinary, ProbeAndVersionOnAnOldKernel) {
  auto version = run_command(old_kernel({static_nymph(), "--version"}));
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out, std::string("nymph ") + NYMPH_VERSION + "\n");
  auto probe = run_command(old_kernel({static_nymph(), "probe", "--json"}));
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  auto o = one_object(probe.out);
  EXPECT_FALSE(o.at("hostname").as_string().empty()) << probe.out;
}

TEST(StaticBinary, InstallDryRunOnAnOldKernel) {
  TempDir home;
  write_file(home / "token", "static-secret\n", fs::perms(0600));
  auto r = run_with_env({{"HOME", home.path().string()}, {"PATH", "/usr/bin:/bin"}},
                        old_kernel({static_nymph(), "install", "--server", "http://127.0.0.1:9", "--token-file",
                                    (home / "token").string(), "--dry-run", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto o = one_object(r.out);
  EXPECT_EQ(o.at("dryRun"), true);
  EXPECT_EQ(r.out.find("static-secret"), std::string::npos);
  EXPECT_FALSE(fs::exists(home / ".local"));  // a dry run touches nothing
}

TEST(StaticBinary, RunsAProcessJobOnAnOldKernel) {
  ControlServer cp({.poll_timeout = "2s"});
  Agent agent(cp, static_nymph(), {NYMPH_OLD_KERNEL, "setarch", "--uname-2.6", "x86_64"});
  // `ls` lists its own descriptors: 0-2 and the directory it reads. Anything more leaked from the agent
  // (Boost.Process's close_range() is ENOSYS here; the runner's own /proc/self/fd walk must have closed them).
  auto job = run_job(cp, {"/bin/sh", "-c",
                          "echo seccomp: $(awk '/^Seccomp:/ {print $2}' /proc/self/status); "
                          "echo fds: $(ls /proc/self/fd); echo static-job-ok"});
  EXPECT_EQ(job.state, "succeeded") << job.json << agent.log();
  EXPECT_NE(job.logs.find("static-job-ok"), std::string::npos) << job.logs;
  // The job inherited old-kernel's seccomp filter (mode 2), so the agent above it ran under it too. (uname's
  // 2.6 personality is not a check: recent kernels ignore UNAME26.)
  EXPECT_NE(job.logs.find("seccomp: 2\n"), std::string::npos) << job.logs;
  EXPECT_NE(job.logs.find("fds: 0 1 2 3\n"), std::string::npos) << job.logs;
  EXPECT_EQ(agent.stop(), 143) << agent.log();
}

TEST(StaticBinary, DoctorOnAnOldKernel) {
  TempDir home;
  auto r = run_with_env({{"HOME", home.path().string()}, {"PATH", "/usr/bin:/bin"}, {"USER", "nobody"}},
                        old_kernel({static_nymph(), "doctor", "--json", "--timeout", "10"}));
  auto o = one_object(r.out);  // exactly one object whatever the verdicts on this machine
  EXPECT_GE(o.at("checks").as_array().size(), 4u) << r.out;
}
