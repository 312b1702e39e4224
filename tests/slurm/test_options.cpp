// runConfig.slurm validation: the allow-list, each key's grammar, control characters and injection attempts.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "slurm/options.hpp"

namespace {

using namespace nymph::slurm;
namespace json = boost::json;

struct Case {
  const char* key;
  const char* value;
};

class Accepted : public ::testing::TestWithParam<Case> {};
TEST_P(Accepted, Value) {
  auto r = check_option(GetParam().key, GetParam().value);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, GetParam().value);
}
INSTANTIATE_TEST_SUITE_P(
    Grammars, Accepted,
    ::testing::Values(Case{"partition", "debug"}, Case{"partition", "debug,long"}, Case{"partition", "gpu_a100.x-1"},
                      Case{"time", "1"}, Case{"time", "90"}, Case{"time", "10:30"}, Case{"time", "2:00:00"},
                      Case{"time", "1-0"}, Case{"time", "1-12"}, Case{"time", "2-12:30"}, Case{"time", "0-0:0:30"},
                      Case{"nodes", "1"}, Case{"nodes", "2-4"}, Case{"ntasks", "16"}, Case{"ntasks-per-node", "4"},
                      Case{"cpus-per-task", "2"}, Case{"mem", "0"}, Case{"mem", "4096"}, Case{"mem", "16G"},
                      Case{"mem-per-cpu", "500M"}, Case{"mem-per-gpu", "1t"}, Case{"gres", "gpu"},
                      Case{"gres", "gpu:2"}, Case{"gres", "gpu:a100:2,shard:1"}, Case{"gpus", "2"},
                      Case{"gpus", "a100:2"}, Case{"gpus-per-node", "v100:1,a100:1"}, Case{"gpus-per-task", "1"},
                      Case{"constraint", "intel&gpu"}, Case{"constraint", "[rack1|rack2]"},
                      Case{"constraint", "knl*2"}, Case{"account", "nymph"}, Case{"qos", "normal"},
                      Case{"reservation", "maint_2024"}, Case{"exclusive", ""}, Case{"exclusive", "user"},
                      Case{"licenses", "matlab:2"}, Case{"licenses", "ansys@flex:1,fluent"}));

class Rejected : public ::testing::TestWithParam<Case> {};
TEST_P(Rejected, ValueWithAMessageNamingKeyAndValue) {
  auto r = check_option(GetParam().key, GetParam().value);
  ASSERT_FALSE(r) << "accepted " << GetParam().key << "=" << GetParam().value;
  EXPECT_NE(r.error().message.find(std::string("runConfig.slurm.") + GetParam().key), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find(printable(GetParam().value)), std::string::npos) << r.error().message;
  // The message itself carries no raw control character into a log line.
  for (char c : r.error().message) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << r.error().message;
}
INSTANTIATE_TEST_SUITE_P(
    Grammars, Rejected,
    ::testing::Values(
        Case{"partition", ""}, Case{"partition", "debug long"}, Case{"partition", "-debug"},
        Case{"partition", "debug\n#SBATCH --uid=0"}, Case{"partition", "a;rm -rf /"}, Case{"partition", "$(id)"},
        Case{"partition", "`id`"}, Case{"partition", "deb'ug"}, Case{"partition", "debug,"},
        Case{"time", "0"}, Case{"time", "0:0"}, Case{"time", "1:2:3:4"}, Case{"time", "1-24"}, Case{"time", "10:60"},
        Case{"time", "1-2:60"}, Case{"time", "-1"}, Case{"time", "UNLIMITED"}, Case{"time", "1h"}, Case{"time", "1 "},
        Case{"nodes", "0"}, Case{"nodes", "4-2"}, Case{"nodes", "1-2-3"}, Case{"nodes", "two"},
        Case{"ntasks", "0"}, Case{"ntasks", "-3"}, Case{"ntasks", "1e3"}, Case{"ntasks", "9999999999"},
        Case{"ntasks-per-node", "x"}, Case{"cpus-per-task", "2.5"}, Case{"mem", "16GB"}, Case{"mem", "G"},
        Case{"mem", "-1"}, Case{"mem-per-cpu", "1 G"}, Case{"mem-per-gpu", "lots"}, Case{"gres", "gpu:0"},
        Case{"gres", "gpu::2"}, Case{"gres", "gpu:a:b:c"}, Case{"gres", "gpu 2"}, Case{"gpus", "a100"},
        Case{"gpus", "0"}, Case{"gpus-per-node", "a:b:1"}, Case{"gpus-per-task", ""},
        Case{"constraint", "a b"}, Case{"constraint", "a;b"}, Case{"constraint", "$x"}, Case{"constraint", "-x"},
        Case{"account", "a/b"}, Case{"account", "a\tb"}, Case{"qos", "high\r"}, Case{"reservation", "r\x7f"},
        Case{"exclusive", "yes"}, Case{"licenses", "matlab:0"}, Case{"licenses", "a@b@c"},
        Case{"licenses", "x:1:2"}));

TEST(Options, NulAndOtherControlCharactersAreRejectedByName) {
  for (const std::string& bad : {std::string("debug\0x", 7), std::string("debug\n"), std::string("\x1b[31mred"),
                                  std::string("a\vb")}) {
    auto r = check_option("partition", bad);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("control character"), std::string::npos) << r.error().message;
  }
}

TEST(Options, UnknownKeysAreRejectedByName) {
  for (const char* key : {"uid", "export", "wrap", "output", "chdir", "job-name", "PARTITION", "cpus_per_task", ""}) {
    auto r = validate_options(json::parse(std::string("{\"") + key + "\": \"x\"}").as_object(), {});
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find("unknown key \"" + std::string(key) + "\""), std::string::npos)
        << r.error().message;
  }
}

TEST(Options, AllowListHasEveryIssueKey) {
  std::vector<std::string_view> expected{"partition", "time", "nodes", "ntasks", "ntasks-per-node", "cpus-per-task",
                                         "mem", "mem-per-cpu", "mem-per-gpu", "gres", "gpus", "gpus-per-node",
                                         "gpus-per-task", "constraint", "account", "qos", "reservation",
                                         "exclusive", "licenses"};
  EXPECT_EQ(allowed_option_keys(), expected);
}

TEST(Options, JsonTypesAndDefaults) {
  auto obj = json::parse(R"({"cpus-per-task": 2, "time": "10", "exclusive": true, "partition": "long"})").as_object();
  auto r = validate_options(obj, {"nymph", "normal", "debug"});
  ASSERT_TRUE(r) << r.error().message;
  std::vector<SbatchOption> expected{{"partition", "long"}, {"time", "10"}, {"cpus-per-task", "2"},
                                     {"account", "nymph"}, {"qos", "normal"}, {"exclusive", ""}};
  EXPECT_EQ(*r, expected) << "job values win over defaults; allow-list order";

  auto no_excl = validate_options(json::parse(R"({"exclusive": false})").as_object(), {});
  ASSERT_TRUE(no_excl);
  EXPECT_TRUE(no_excl->empty());
}

TEST(Options, WrongJsonTypesAreRejected) {
  for (const char* text : {R"({"nodes": -1})", R"({"nodes": 1.5})", R"({"time": [1]})", R"({"mem": {"a":1}})",
                           R"({"partition": null})", R"({"partition": true})"}) {
    auto r = validate_options(json::parse(text).as_object(), {});
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find("wrong type"), std::string::npos) << r.error().message;
  }
}

TEST(Options, ABadSiteDefaultIsReportedAsSuch) {
  auto r = validate_options({}, {"bad account", "", ""});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("[runners.slurm] default"), std::string::npos) << r.error().message;
}

TEST(Options, PrintableEscapes) {
  EXPECT_EQ(printable("a\nb\"c\\"), R"("a\nb\"c\\")");
  EXPECT_EQ(printable(std::string("\0\x7f\xc3", 3)), R"("\x00\x7f\xc3")");
}

TEST(SbatchPath, OnlyAbsolutePathsOfSafeCharacters) {
  for (const char* bad : {"relative/dir", "/with space", "/pct%j", "/quote'", "/nl\n", ""})
    EXPECT_FALSE(check_sbatch_path(bad)) << bad;
  EXPECT_TRUE(check_sbatch_path("/var/lib/nymph-slurm-lab/jobs/launch_1/a-1"));
  EXPECT_TRUE(is_sbatch_path("/home/ada/.local/share/nymph/launches/x:y+z@h,a=b~"));
  EXPECT_NE(check_sbatch_path("/a b").error().message.find("\"/a b\""), std::string::npos);
}

TEST(SbatchOptionText, ArgumentsAndDirectives) {
  EXPECT_EQ(sbatch_argument("exclusive", ""), "--exclusive");
  EXPECT_EQ(sbatch_argument("time", "10"), "--time=10");
  EXPECT_EQ(sbatch_directive("partition", "debug"), "#SBATCH --partition=debug\n");
  EXPECT_EQ(sbatch_directive("exclusive", ""), "#SBATCH --exclusive\n");
}

}  // namespace
