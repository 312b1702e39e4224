// Training profiles as data (runners/profile.hpp): start-up checks of scripts, parameter validation,
// input.json, result checking. No process is started.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "runners/profile.hpp"
#include "tests/runners/process_helpers.hpp"
#include "tests/support/files.hpp"

using nymph::test::read_file;

namespace nymph::runners {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

#define EXPECT_ERROR_HAS(result, text)                                                  \
  do {                                                                                  \
    auto&& r_ = (result);                                                               \
    ASSERT_FALSE(r_) << "expected an error containing: " << (text);                    \
    EXPECT_NE(r_.error().message.find(text), std::string::npos) << r_.error().message; \
  } while (0)

class ProfileTest : public ::testing::Test {
 protected:
  fs::path script(const std::string& name, fs::perms perms = fs::perms(0755)) {
    fs::path p = tmp / name;
    std::ofstream(p) << "#!/bin/sh\nexit 0\n";
    fs::permissions(p, perms);
    return p;
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(tmp / name, std::ios::binary) << text; }
  test::TempDir tmp;
};

TEST_F(ProfileTest, ScriptMustBeAbsoluteExistingRegularAndNotGroupOrOtherWritable) {
  EXPECT_TRUE(check_profile_script({"ok", script("ok.sh")}));
  EXPECT_TRUE(check_profile_script({"ro", script("ro.sh", fs::perms(0500))}));
  fs::create_symlink(tmp / "ok.sh", tmp / "link.sh");
  EXPECT_TRUE(check_profile_script({"link", tmp / "link.sh"})) << "a symlink to an acceptable script is followed";

  EXPECT_ERROR_HAS(check_profile_script({"rel", "smoke.sh"}), "profile rel: script smoke.sh: the path must be absolute");
  EXPECT_ERROR_HAS(check_profile_script({"gone", tmp / "missing.sh"}), "No such file or directory");
  EXPECT_ERROR_HAS(check_profile_script({"gone", tmp / "missing.sh"}), "profile gone");
  fs::create_directory(tmp / "dir.sh");
  EXPECT_ERROR_HAS(check_profile_script({"dir", tmp / "dir.sh"}), "not a regular file");
  EXPECT_ERROR_HAS(check_profile_script({"gw", script("gw.sh", fs::perms(0775))}), "profile gw: script");
  EXPECT_ERROR_HAS(check_profile_script({"gw", tmp / "gw.sh"}), "writable by group");
  EXPECT_ERROR_HAS(check_profile_script({"ow", script("ow.sh", fs::perms(0757))}), "writable by others");
}

TEST_F(ProfileTest, CatalogCheckNamesTheFirstBadProfile) {
  auto good = script("good.sh");
  EXPECT_TRUE(check_profiles(ProfileCatalog({{"smoke", good}, {"train-2.v1", good}})));
  EXPECT_TRUE(check_profiles(ProfileCatalog()));
  EXPECT_ERROR_HAS(check_profiles(ProfileCatalog({{"smoke", good}, {"bad", script("bad.sh", fs::perms(0766))}})),
                   "profile bad:");
  EXPECT_ERROR_HAS(check_profiles(ProfileCatalog({{"smoke", good}, {"smoke", good}})), "defined more than once");
  EXPECT_ERROR_HAS(check_profiles(ProfileCatalog({{"a b", good}})), "profile 'a b': names are");
  EXPECT_ERROR_HAS(check_profiles(ProfileCatalog({{"", good}})), "names are");
  EXPECT_ERROR_HAS(check_profiles(ProfileCatalog({{"-x", good}})), "names are");
  ProfileCatalog c({{"smoke", good}});
  ASSERT_NE(c.find("smoke"), nullptr);
  EXPECT_EQ(c.find("smoke")->script, good);
  EXPECT_EQ(c.find("other"), nullptr);
}

TEST_F(ProfileTest, ResolveTrainingRefusesWhatIsNotAPlainTrainingJob) {
  ProfileCatalog c({{"smoke", script("smoke.sh")}});
  JobSpec s;
  s.job_id = "j";
  s.kind = "training";
  s.profile = "smoke";
  auto ok = resolve_training(c, s);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ((*ok)->name, "smoke");

  auto with = [&](auto change) {
    JobSpec x = s;
    change(x);
    return resolve_training(c, x);
  };
  EXPECT_ERROR_HAS(with([](JobSpec& x) { x.profile = "nope"; }), "unknown training profile 'nope'");
  EXPECT_ERROR_HAS(with([](JobSpec& x) { x.profile.reset(); }), "without a profile name");
  EXPECT_ERROR_HAS(with([](JobSpec& x) { x.kind = "command"; }), "not a training job");
  EXPECT_ERROR_HAS(with([](JobSpec& x) { x.argv = {"/bin/true"}; }), "not argv or command");
  EXPECT_ERROR_HAS(with([](JobSpec& x) { x.command = "id"; }), "not argv or command");
  EXPECT_ERROR_HAS(with([](JobSpec& x) { x.env["PATH"] = "/tmp"; }), "not environment variables");
  fs::permissions(tmp / "smoke.sh", fs::perms(0777));
  EXPECT_ERROR_HAS(with([](JobSpec&) {}), "writable by group");
}

TEST_F(ProfileTest, ParametersAreAnObjectWithinTheCapAndAllowedNames) {
  Profile any{"any", "/x", {}, 64};
  auto empty = render_input(any, json::value());
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, "{}") << "no parameters: an empty object";
  auto obj = render_input(any, json::object{{"message", "hi"}});
  ASSERT_TRUE(obj);
  EXPECT_EQ(*obj, R"({"message":"hi"})");
  EXPECT_ERROR_HAS(render_input(any, json::array{1}), "must be a JSON object");
  EXPECT_ERROR_HAS(render_input(any, json::value("text")), "must be a JSON object");
  EXPECT_ERROR_HAS(render_input(any, json::value(3)), "must be a JSON object");

  // The cap is on the serialized bytes: exactly max_input_bytes is accepted, one more is not.
  std::string fill(64 - std::string(R"({"m":""})").size(), 'x');
  EXPECT_TRUE(render_input(any, json::object{{"m", fill}}));
  EXPECT_ERROR_HAS(render_input(any, json::object{{"m", fill + "x"}}), "65 bytes of JSON; profile any accepts at most 64");

  Profile strict{"strict", "/x", {"lr", "epochs"}, 4096};
  EXPECT_TRUE(render_input(strict, json::object{{"lr", 0.1}, {"epochs", 3}}));
  EXPECT_TRUE(render_input(strict, json::object{}));
  EXPECT_ERROR_HAS(render_input(strict, json::object{{"lr", 0.1}, {"$(id)", 1}}), "parameter '$(id)' is not allowed by profile strict");
}

TEST_F(ProfileTest, HostileParametersRoundTripThroughInputJson) {
  json::object params{{"message", "$(id) `id`; rm -rf / 'single' \"double\" \\ \n\r\t \x01 \xc3\xa9"},
                      {"nul", std::string("a\0b", 3)}};
  Profile p{"p", "/x", {}, 4096};
  auto text = render_input(p, params);
  ASSERT_TRUE(text);
  ASSERT_TRUE(write_input(tmp.path(), *text));
  EXPECT_EQ(read_file(tmp / "input.json"), *text);
  EXPECT_EQ(json::parse(read_file(tmp / "input.json")), json::value(params)) << "every byte survives";
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "input.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ProfileTest, WriteInputReplacesAPlantedSymlinkWithoutFollowingIt) {
  write("victim", "keep");
  fs::create_symlink(tmp / "victim", tmp / "input.json");
  ASSERT_TRUE(write_input(tmp.path(), "{}"));
  EXPECT_EQ(read_file(tmp / "victim"), "keep");
  EXPECT_FALSE(fs::is_symlink(tmp / "input.json"));
  EXPECT_EQ(read_file(tmp / "input.json"), "{}");
}

TEST_F(ProfileTest, ResultMustBeValidBoundedJson) {
  auto ok = check_result(R"({"loss":0.25,"tags":["a"]})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->as_object().at("loss"), 0.25);
  EXPECT_TRUE(check_result("42")) << "any JSON value";
  EXPECT_ERROR_HAS(check_result(""), "not valid JSON");
  EXPECT_ERROR_HAS(check_result("{\"a\":1"), "not valid JSON");
  EXPECT_ERROR_HAS(check_result("{} {}"), "not valid JSON");
  EXPECT_ERROR_HAS(check_result("\"\xff\xfe\""), "not valid JSON");
  EXPECT_ERROR_HAS(check_result("[1,2,3]", 6), "7 bytes (at most 6)");
  std::string deep = std::string(kMaxResultDepth, '[') + std::string(kMaxResultDepth, ']');
  EXPECT_TRUE(check_result(deep));
  EXPECT_ERROR_HAS(check_result("[" + deep + "]"), "nested deeper than 20");
  std::string wide = "[0";
  for (std::size_t i = 1; i <= kMaxResultElements; ++i) wide += ",0";
  EXPECT_ERROR_HAS(check_result(wide + "]"), "10001 elements");
}

// Found by fuzz/records: Boost.JSON reads a number beyond a double's range as infinity, which was accepted and
// then reported as the non-JSON 1e99999.
TEST_F(ProfileTest, ResultNumbersMustBeFinite) {
  EXPECT_ERROR_HAS(check_result("[1e316, -0.0]"), "too large");
  EXPECT_ERROR_HAS(check_result(R"({"a":{"b":-1e400}})"), "too large");
  EXPECT_TRUE(check_result("[1e308, -0.0, 12345678901234567890]"));
}

TEST_F(ProfileTest, ReadResultNeedsARegularFile) {
  EXPECT_ERROR_HAS(read_result(tmp.path()), "the profile wrote no result.json");
  write("result.json", R"({"ok":true})");
  auto r = read_result(tmp.path());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, json::parse(R"({"ok":true})"));
  write("result.json", std::string(kMaxResultBytes + 1, ' '));
  EXPECT_ERROR_HAS(read_result(tmp.path()), "at most");

  fs::remove(tmp / "result.json");
  write("elsewhere.json", "{}");
  fs::create_symlink(tmp / "elsewhere.json", tmp / "result.json");
  EXPECT_FALSE(read_result(tmp.path())) << "a symlink is not followed";
  fs::remove(tmp / "result.json");
  ASSERT_EQ(::mkfifo((tmp / "result.json").c_str(), 0600), 0);
  EXPECT_ERROR_HAS(read_result(tmp.path()), "not a regular file");  // and does not block
}

TEST_F(ProfileTest, AttachResultOnlyToASuccess) {
  JobUpdate done{JobState::succeeded};
  done.message = "Slurm job 7 COMPLETED";
  auto missing = attach_result(done, tmp.path());
  EXPECT_EQ(missing.state, JobState::failed);
  EXPECT_EQ(missing.message, "Slurm job 7 COMPLETED, but the profile wrote no result.json");
  EXPECT_FALSE(missing.result);

  write("result.json", R"({"ok":1})");
  auto good = attach_result(done, tmp.path());
  EXPECT_EQ(good.state, JobState::succeeded);
  ASSERT_TRUE(good.result);
  EXPECT_EQ(*good.result, json::parse(R"({"ok":1})"));

  JobUpdate failed{JobState::failed};
  failed.exit_code = 3;
  auto f = attach_result(failed, tmp.path());
  EXPECT_EQ(f.state, JobState::failed);
  EXPECT_EQ(f.exit_code, 3);
  EXPECT_FALSE(f.result) << "a result.json left by a failed job is not reported";
}

}  // namespace
}  // namespace nymph::runners
