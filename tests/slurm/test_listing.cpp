// `nymph slurm jobs` listing: parsers on captured squeue outputs and the JSON → text fallback.
#include <gtest/gtest.h>

#include <deque>

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "slurm/listing.hpp"
#include "tests/support/run_coro.hpp"

namespace {

using namespace nymph::slurm;
using nymph::Result;

// Trimmed from `runuser -u nymphci -- squeue --me --json` on the lab (22.05.8): the second job is another
// user's — 22.05 ignores --me with --json.
constexpr const char* kCapturedJson = R"({
 "meta": {"plugin": {"type": "openapi\/v0.0.38", "name": "Slurm OpenAPI v0.0.38"}},
 "errors": [],
 "jobs": [
  {"account": "nymph", "job_id": 4, "job_state": "PENDING", "name": "wrap", "partition": "debug",
   "submit_time": 1795985164, "user_id": 1001, "user_name": "nymphci", "state_reason": "JobHeldUser", "exit_code": 0},
  {"account": "root", "job_id": 9, "job_state": "RUNNING", "name": "other", "partition": "long",
   "submit_time": 1795985170, "user_id": 0, "user_name": "root"},
  {"account": "nymph", "job_id": 5, "job_state": "RUNNING", "name": "nymph-j1", "partition": "long",
   "submit_time": 1795985164, "user_id": 1001, "user_name": "nymphci"},
  {"account": "nymph", "job_id": 6, "job_state": "COMPLETING", "name": "n", "partition": "debug",
   "submit_time": 1795985164, "user_id": 1001, "user_name": "nymphci"},
  {"account": "nymph", "job_id": 7, "job_state": "COMPLETED", "name": "n", "partition": "debug",
   "submit_time": 1795985164, "user_id": 1001, "user_name": "nymphci"}
 ]
})";

TEST(ListingState, Mapping) {
  EXPECT_EQ(listing_state("RUNNING"), "running");
  EXPECT_EQ(listing_state("PENDING"), "starting");
  EXPECT_EQ(listing_state("COMPLETING"), "stopping");
  EXPECT_EQ(listing_state("STOPPING"), "stopping");
  for (auto s : {"COMPLETED", "FAILED", "CONFIGURING", "SUSPENDED", ""}) EXPECT_EQ(listing_state(s), "unknown") << s;
}

TEST(ParseSqueueJson, FiltersByUserAndMapsFields) {
  auto r = parse_squeue_json_jobs(kCapturedJson, "nymphci");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 4u) << "root's job is filtered out";
  const auto& j = (*r)[1];
  EXPECT_EQ(j.id, "5");
  EXPECT_EQ(j.state, "running");
  EXPECT_EQ(j.type, "long");
  EXPECT_EQ(j.name, "nymph-j1");
  EXPECT_EQ(j.tags.at("account"), "nymph");
  EXPECT_EQ(j.submitted.size(), 19u) << j.submitted;
  EXPECT_EQ((*r)[0].state, "starting");
  EXPECT_EQ((*r)[2].state, "stopping");
  EXPECT_EQ((*r)[3].state, "unknown");
}

TEST(ParseSqueueJson, NewerShapes) {
  auto r = parse_squeue_json_jobs(
      R"({"jobs":[{"job_id":8,"job_state":["RUNNING"],"user_name":"u","partition":"p","name":"n",
          "submit_time":{"set":true,"infinite":false,"number":1795985164},"account":"a"}]})",
      "u");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].state, "running");
  EXPECT_FALSE((*r)[0].submitted.empty());
}

TEST(ParseSqueueJson, NotJson) {
  EXPECT_FALSE(parse_squeue_json_jobs("squeue: unrecognized option '--json'", "u"));
  EXPECT_FALSE(parse_squeue_json_jobs(R"({"meta":{}})", "u"));
}

TEST(ParseSqueueList, CapturedFallbackOutput) {
  auto r = parse_squeue_list("7,PENDING,debug,2026-11-29T20:46:04,wrap,nymph\n"
                             "5,RUNNING,debug,2026-11-29T20:46:04,name,with,commas,nymph\n"
                             "8,COMPLETING,long,2026-11-29T20:46:05,x,(null)\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], (SlurmJobRow{"7", "starting", "PENDING", "debug", "2026-11-29T20:46:04", "wrap", {{"account", "nymph"}}}));
  EXPECT_EQ((*r)[1].name, "name,with,commas");
  EXPECT_TRUE((*r)[2].tags.empty()) << "(null) account without accounting";
  EXPECT_FALSE(parse_squeue_list("7,PENDING,debug\n"));
}

// A CommandRunner that answers from a script and records what it was asked.
struct FakeCommands : CommandRunner {
  std::deque<Result<CommandResult>> answers;
  std::vector<std::vector<std::string>> calls;
  boost::asio::awaitable<Result<CommandResult>> run(std::vector<std::string> argv,
                                                   std::optional<std::map<std::string, std::string>>,
                                                   std::chrono::milliseconds) override {
    calls.push_back(argv);
    auto a = answers.front();
    answers.pop_front();
    co_return a;
  }
};

// Found by fuzz/slurm_output: an id with NUL bytes ("7\0\0...") was listed as a job.
TEST(ParseSqueueList, IdsMustBeJobIds) {
  EXPECT_FALSE(parse_squeue_list(std::string("7\0\0,PENDING,debug,2026-11-29T20:46:04,wrap,nymph\n", 49)));
  EXPECT_FALSE(parse_squeue_list("\x01,PENDING,debug,2026-11-29T20:46:04,wrap,nymph\n"));
  auto r = parse_squeue_json_jobs(R"({"jobs":[{"job_id":"","user_name":"u"},{"job_id":" ","user_name":"u"},)"
                                  R"({"job_id":8,"user_name":"u","job_state":"RUNNING"}]})", "u");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u) << "jobs without an id are skipped";
  EXPECT_EQ((*r)[0].id, "8");
}

TEST(ListSlurmJobs, JsonFirst) {
  FakeCommands fake;
  fake.answers.emplace_back(CommandResult{0, kCapturedJson, ""});
  boost::asio::io_context ioc;
  auto rows = nymph::test::run_coro(ioc, list_slurm_jobs(fake, {"squeue", std::chrono::seconds(5), "nymphci"}));
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(rows->size(), 4u);
  ASSERT_EQ(fake.calls.size(), 1u);
  EXPECT_EQ(fake.calls[0], (std::vector<std::string>{"squeue", "--me", "--json"}));
}

TEST(ListSlurmJobs, FallsBackWhenJsonIsUnsupported) {
  FakeCommands fake;
  fake.answers.emplace_back(CommandResult{1, "", "squeue: unrecognized option '--json'\n"});
  fake.answers.emplace_back(CommandResult{0, "7,RUNNING,debug,2026-11-29T20:46:04,wrap,nymph\n", ""});
  boost::asio::io_context ioc;
  auto rows = nymph::test::run_coro(ioc, list_slurm_jobs(fake, {"/opt/slurm/bin/squeue", std::chrono::seconds(5), "u"}));
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.calls[1], (std::vector<std::string>{"/opt/slurm/bin/squeue", "--me", "--noheader", "-o",
                                                     "%i,%T,%P,%V,%j,%a"}));
}

TEST(ListSlurmJobs, BothFailing) {
  FakeCommands fake;
  fake.answers.emplace_back(nymph::fail("squeue did not finish within 5s"));
  fake.answers.emplace_back(CommandResult{1, "", "slurm_load_jobs error: Unable to contact slurm controller\n"});
  boost::asio::io_context ioc;
  auto rows = nymph::test::run_coro(ioc, list_slurm_jobs(fake, {"squeue", std::chrono::seconds(5), "u"}));
  ASSERT_FALSE(rows);
  EXPECT_NE(rows.error().message.find("Unable to contact slurm controller"), std::string::npos);
}

TEST(ListingOutput, JsonAndTable) {
  std::vector<SlurmJobRow> rows{{"5", "running", "RUNNING", "long", "2026-11-29T20:46:04", "n", {{"account", "a"}}}};
  EXPECT_EQ(boost::json::serialize(listing_to_json(rows)),
            R"({"jobs":[{"id":"5","state":"running","slurmState":"RUNNING","type":"long",)"
            R"("submitted":"2026-11-29T20:46:04","name":"n","tags":{"account":"a"}}]})");
  EXPECT_EQ(listing_to_table(rows),
            "ID  STATE    TYPE  SUBMITTED            NAME  TAGS\n"
            "5   running  long  2026-11-29T20:46:04  n     account=a\n");
}

}  // namespace
