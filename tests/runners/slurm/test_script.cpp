// The sbatch script renderer. Besides checking the text, the rendered script is run by /bin/sh outside
// Slurm (#SBATCH lines are comments there), so quoting is proved by what the shell really does.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runners/slurm/script.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/files.hpp"

using nymph::test::read_file;

namespace {

using namespace nymph::runners::slurm;
using nymph::runners::JobSpec;
namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

struct ScriptTest : ::testing::Test {
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("nymph-script-test-" + std::to_string(::getpid()) + "-" +
                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  JobSpec spec_with_argv(std::vector<std::string> argv) {
    JobSpec s;
    s.job_id = "job-1";
    s.argv = std::move(argv);
    return s;
  }
  // Renders, writes and runs the script with /bin/sh; returns (exit code, stdout).
  nymph::test::CommandOutput run_rendered(const JobSpec& spec) {
    auto r = render_job(spec, dir, {});
    EXPECT_TRUE(r) << r.error().message;
    write_file(dir / kScriptFile, r->script);
    if (r->command) write_file(dir / kCommandFile, *r->command);
    return nymph::test::run_command({"/bin/sh", (dir / kScriptFile).string()});
  }
};

TEST_F(ScriptTest, HeaderHasJobNameDirectoriesAndOptionsInOrder) {
  JobSpec spec = spec_with_argv({"/bin/true"});
  spec.attempt = 2;
  auto r = render_job(spec, "/scratch/launch/job-1-2", {{"partition", "long"}, {"cpus-per-task", "2"}, {"exclusive", ""}});
  ASSERT_TRUE(r) << r.error().message;
  const std::string expected_head =
      "#!/bin/sh\n"
      "#SBATCH --job-name=nymph-job-1\n"
      "#SBATCH --chdir=/scratch/launch/job-1-2\n"
      "#SBATCH --output=/scratch/launch/job-1-2/stdout.log\n"
      "#SBATCH --error=/scratch/launch/job-1-2/stderr.log\n"
      "#SBATCH --partition=long\n"
      "#SBATCH --cpus-per-task=2\n"
      "#SBATCH --exclusive\n";
  EXPECT_EQ(r->script.substr(0, expected_head.size()), expected_head);
  EXPECT_NE(r->script.find("\n'/bin/true'\n"), std::string::npos) << r->script;
  EXPECT_FALSE(r->command);
}

TEST_F(ScriptTest, TimeoutBecomesMinutesUnlessTimeIsGiven) {
  JobSpec spec = spec_with_argv({"x"});
  spec.timeout = std::chrono::seconds(61);
  EXPECT_NE(render_job(spec, "/d", {}).value().script.find("#SBATCH --time=2\n"), std::string::npos);
  auto with_time = render_job(spec, "/d", {{"time", "30"}}).value().script;
  EXPECT_NE(with_time.find("#SBATCH --time=30\n"), std::string::npos);
  EXPECT_EQ(with_time.find("--time=2"), std::string::npos);
}

TEST_F(ScriptTest, ArgvIsDataEvenWhenItLooksLikeShell) {
  std::vector<std::string> nasty{"$(touch pwned)", "`touch pwned`", "a'b", "\"q\"", "line1\nline2", "; touch pwned",
                                 "$HOME", "*", "", "back\\slash", "#not-a-comment", "\t"};
  std::vector<std::string> argv{"/usr/bin/printf", "[%s]\\n"};
  argv.insert(argv.end(), nasty.begin(), nasty.end());
  auto res = run_rendered(spec_with_argv(argv));
  ASSERT_EQ(res.exit_code, 0) << res.err;
  std::string expected;
  for (const auto& a : nasty) expected += "[" + a + "]\n";
  EXPECT_EQ(res.out, expected);
  EXPECT_FALSE(fs::exists(dir / "pwned"));
  EXPECT_FALSE(fs::exists("pwned"));
}

TEST_F(ScriptTest, ExitStatusIsRecordedOnExit) {
  auto res = run_rendered(spec_with_argv({"/bin/sh", "-c", "exit 3"}));
  EXPECT_EQ(res.exit_code, 3);
  EXPECT_EQ(read_file(dir / kExitStatusFile), "3\n");
  EXPECT_FALSE(fs::exists(dir / (std::string(kExitStatusFile) + ".tmp")));
  res = run_rendered(spec_with_argv({"/bin/true"}));
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(read_file(dir / kExitStatusFile), "0\n") << "a stale status from an earlier run is replaced";
}

TEST_F(ScriptTest, ACommandGoesIntoItsOwnFileVerbatim) {
  JobSpec spec;
  spec.job_id = "j";
  spec.command = "echo \"$((6*7))\" 'single'; exit 5";
  auto r = render_job(spec, dir, {});
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->command);
  EXPECT_EQ(*r->command, *spec.command + "\n");
  EXPECT_EQ(r->script.find("6*7"), std::string::npos) << "the command never appears in job.sbatch";
  auto res = run_rendered(spec);
  EXPECT_EQ(res.exit_code, 5);
  EXPECT_EQ(res.out, "42 single\n");
  EXPECT_EQ(read_file(dir / kExitStatusFile), "5\n");
}

TEST_F(ScriptTest, EnvironmentValuesAreQuotedAndNamesChecked) {
  JobSpec spec = spec_with_argv({"/bin/sh", "-c", "printf '%s|%s' \"$A\" \"$B_2\""});
  spec.env = {{"A", "$(touch pwned) 'x'"}, {"B_2", "multi\nline"}};
  auto res = run_rendered(spec);
  EXPECT_EQ(res.out, "$(touch pwned) 'x'|multi\nline");
  EXPECT_FALSE(fs::exists(dir / "pwned"));
  for (const char* bad : {"", "1A", "A-B", "A B", "A=B", "A;touch x"}) {
    spec.env = {{bad, "v"}};
    auto r = render_job(spec, dir, {});
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("env"), std::string::npos);
  }
}

TEST_F(ScriptTest, BadSpecsAreErrors) {
  JobSpec spec;
  spec.job_id = "j";
  EXPECT_FALSE(render_job(spec, dir, {})) << "neither argv nor command";
  spec.argv = {"x"};
  spec.command = "y";
  EXPECT_FALSE(render_job(spec, dir, {})) << "both";
  spec.command.reset();
  spec.kind = "training";
  EXPECT_FALSE(render_job(spec, dir, {}));
  spec.kind = "command";
  spec.argv = {std::string("a\0b", 3)};
  EXPECT_FALSE(render_job(spec, dir, {})) << "NUL cannot be passed to a program";
  spec.argv = {""};
  EXPECT_FALSE(render_job(spec, dir, {}));
}

TEST_F(ScriptTest, JobIdsAndPathsThatCannotGoIntoTheScript) {
  for (const char* bad : {"", "-x", ".x", "a b", "a/b", "a\nb", "$(id)", "a%j"}) {
    JobSpec spec = spec_with_argv({"x"});
    spec.job_id = bad;
    EXPECT_FALSE(render_job(spec, dir, {})) << bad;
  }
  // The path grammar itself is slurm/options' (tests/slurm/test_options.cpp).
  for (const char* bad : {"relative/dir", "/with space", "/pct%j"})
    EXPECT_FALSE(render_job(spec_with_argv({"x"}), bad, {})) << bad;
}

TEST(ShellQuote, Words) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}


// Which site-default keys a profile script sets itself, read as sbatch reads its directives.
TEST(ScriptSiteKeys, ReadsDirectivesAsSbatchDoes) {
  using Keys = std::set<std::string>;
  EXPECT_EQ(script_site_keys("#!/bin/sh\n#SBATCH --mem=1G\nexit 0\n"), Keys{});
  EXPECT_EQ(script_site_keys("#!/bin/sh\n#SBATCH --account=a\n#SBATCH --qos q\n#SBATCH --partition=p\n"),
            (Keys{"account", "qos", "partition"}));
  EXPECT_EQ(script_site_keys("#!/bin/sh\n#SBATCH -A a -q q\n#SBATCH -pdebug\n"), (Keys{"account", "qos", "partition"}));
  EXPECT_EQ(script_site_keys("#SBATCH -H -A a\n"), Keys{"account"}) << "after a flag without an argument";
  EXPECT_EQ(script_site_keys("#SBATCH -Hp debug\n"), Keys{"partition"}) << "a cluster of short flags";
  EXPECT_EQ(script_site_keys("#SBATCH --acc=a --part=p\n"), (Keys{"account", "partition"})) << "abbreviations";
  EXPECT_EQ(script_site_keys("\n  \n# a comment\n#SBATCH -A a\n"), Keys{"account"}) << "blank lines and comments";
  EXPECT_EQ(script_site_keys("#PBS -A a\n#PBS -q batch\n"), (Keys{"account", "partition"}))
      << "#PBS as sbatch reads it";
}

TEST(ScriptSiteKeys, IgnoresWhatSbatchIgnores) {
  using Keys = std::set<std::string>;
  EXPECT_EQ(script_site_keys("#!/bin/sh\necho hi\n#SBATCH -A late\n"), Keys{}) << "after the first command";
  EXPECT_EQ(script_site_keys(" #SBATCH -A a\n"), Keys{}) << "not in column 0";
  EXPECT_EQ(script_site_keys("#SBATCHX -A a\n##SBATCH -A a\n#sbatch -A a\n"), Keys{});
  EXPECT_EQ(script_site_keys("#SBATCH --mem=1G # -A a later in a comment\n"), Keys{});
  EXPECT_EQ(script_site_keys("#SBATCH --acctg-freq=task=30 --output=/x-p\n"), Keys{});
  EXPECT_EQ(script_site_keys("#SBATCH -o /tmp/x.p\n"), Keys{}) << "a short option with an argument ends the cluster";
  EXPECT_EQ(script_site_keys(""), Keys{});
}

}  // namespace
