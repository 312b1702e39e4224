// Config: a good file parses to the documented defaults; a catalogue of bad files each gives its message.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "agent/config.hpp"
#include "common/toml_nesting.hpp"

namespace fs = std::filesystem;
using namespace nymph::agent;
using namespace std::chrono_literals;

TEST(Config, MinimalFileGetsDefaults) {
  auto c = parse_config("[server]\nurl = \"http://127.0.0.1:8470\"\n", "t.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->server.token_file, "token");
  EXPECT_EQ(c->server.poll_timeout, 30s);
  EXPECT_EQ(c->worker.max_process_jobs, 4);
  EXPECT_FALSE(c->worker.idle_exit.has_value());
  EXPECT_TRUE(c->process.allow_commands);
  EXPECT_EQ(c->slurm.enabled, "auto");
  EXPECT_EQ(c->slurm.max_poll_duration, 24h);
  EXPECT_EQ(c->slurm.poll_interval, 10s);
  EXPECT_EQ(c->slurm.poll_interval_max, 60s);
  EXPECT_EQ(c->slurm.rpc_budget_per_minute, 60);
  EXPECT_EQ(c->slurm.exit_scan_interval, 2s);
  EXPECT_EQ(c->slurm.max_concurrent_commands, 4);
  EXPECT_EQ(c->log.level, "info");
  EXPECT_EQ(c->manager.cluster, "");
  EXPECT_EQ(c->manager.state_dir, "");
  EXPECT_EQ(c->manager.heartbeat_interval, 10s);
}

TEST(Config, APollIntervalPastTheDefaultCeilingRaisesIt) {
  auto c = parse_config("[server]\nurl = \"http://127.0.0.1:8470\"\n[runners.slurm]\npoll_interval = \"2m\"\n", "t.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->slurm.poll_interval_max, 2min);
  c = parse_config("[server]\nurl = \"http://127.0.0.1:8470\"\n[runners.slurm]\npoll_interval = \"1s\"\n"
                   "poll_interval_max = \"5m\"\nrpc_budget_per_minute = 20\nexit_scan_interval = 0\n"
                   "max_concurrent_commands = 16\n", "t.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->slurm.max_concurrent_commands, 16);
  EXPECT_EQ(c->slurm.poll_interval_max, 5min);
  EXPECT_EQ(c->slurm.rpc_budget_per_minute, 20);
  EXPECT_EQ(c->slurm.exit_scan_interval, 0s);
}

TEST(Config, ManagerSection) {
  auto c = parse_config("[server]\nurl = \"http://127.0.0.1:8470\"\n[manager]\ncluster = \"lab-2\"\n"
                        "state_dir = \"/scratch/ada/nymph\"\nheartbeat_interval = \"2s\"\n",
                        "t.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->manager.cluster, "lab-2");
  EXPECT_EQ(c->manager.state_dir, "/scratch/ada/nymph");
  EXPECT_EQ(c->manager.heartbeat_interval, 2s);
}

TEST(Config, FullFileParses) {
  auto c = parse_config(R"(
[server]
url = "https://cp.example.org"
token_file = "tok"
ca_file = "/etc/ca.pem"
poll_timeout = "20s"
[worker]
label = "login1-01ABC"
launch_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
tags = { site = "lab", gpu = "none" }
work_dir = "/scratch/w"
max_process_jobs = 2
idle_exit = "10m"
drain_grace = 5
[runners.process]
enabled = true
allow_commands = false
kill_grace = "500ms"
keep_work_dirs = true
[runners.slurm]
enabled = false
poll_interval = "2s"
partition = "debug"
max_jobs = 7
[profiles]
smoke = "/opt/profiles/smoke.sh"
train = { script = "/opt/profiles/train.sh", parameters = ["lr", "epochs"], max_input_bytes = 4096 }
[log]
level = "debug"
file = "nymph.log"
)",
                        "full.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->worker.tags.at("site"), "lab");
  EXPECT_EQ(*c->worker.idle_exit, 10min);
  EXPECT_EQ(c->worker.drain_grace, 5s);
  EXPECT_EQ(c->process.kill_grace, 500ms);
  EXPECT_FALSE(c->process.allow_commands);
  EXPECT_EQ(c->slurm.enabled, "false");
  EXPECT_EQ(c->slurm.max_jobs, 7);
  ASSERT_EQ(c->profiles.size(), 2u);
  EXPECT_EQ(c->profiles[1].allowed_parameters, (std::vector<std::string>{"lr", "epochs"}));
  EXPECT_EQ(c->profiles[1].max_input_bytes, 4096u);
  EXPECT_EQ(c->log.file, "nymph.log");
}

struct BadConfig {
  const char* name;
  const char* text;
  const char* message;  // a substring the error must contain
};

class BadConfigs : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigs, AreRejectedWithAMessageNamingTheProblem) {
  auto c = parse_config(GetParam().text, "bad.toml");
  ASSERT_FALSE(c.has_value()) << GetParam().name;
  EXPECT_NE(c.error().message.find(GetParam().message), std::string::npos)
      << "got: " << c.error().message << "\nwanted: " << GetParam().message;
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, BadConfigs,
    ::testing::Values(
        BadConfig{"syntax", "[server\nurl = 1", "bad.toml:1: invalid TOML"},
        BadConfig{"missing url", "[worker]\nlabel = \"x\"\n", "[server] url is required"},
        BadConfig{"unknown top-level", "[server]\nurl = \"http://127.0.0.1:1\"\n[serverr]\nx = 1\n",
                  "bad.toml:3: unknown key serverr"},
        BadConfig{"unknown server key", "[server]\nurl = \"http://127.0.0.1:1\"\ntoken = \"abc\"\n",
                  "bad.toml:3: unknown key server.token (not a key of [server])"},
        BadConfig{"url wrong type", "[server]\nurl = 8470\n", "bad.toml:2: server.url: expected a string, got an integer"},
        BadConfig{"url not absolute", "[server]\nurl = \"cp.example.org\"\n", "[server] url: invalid URL 'cp.example.org'"},
        BadConfig{"ftp url", "[server]\nurl = \"ftp://cp.example.org\"\n", "the scheme must be https://"},
        BadConfig{"remote plain http", "[server]\nurl = \"http://cp.example.org\"\n", "plain http:// is only allowed to a loopback address"},
        BadConfig{"prefix-alike host", "[server]\nurl = \"http://127.attacker.example:8470\"\n",
                  "plain http:// is only allowed to a loopback address"},
        BadConfig{"port out of range", "[server]\nurl = \"https://cp.example.org:165535\"\n",
                  "the port must be between 1 and 65535"},
        BadConfig{"bad duration", "[server]\nurl = \"http://127.0.0.1:1\"\npoll_timeout = \"soon\"\n",
                  "bad.toml:3: server.poll_timeout: invalid duration 'soon'"},
        BadConfig{"negative jobs", "[server]\nurl = \"http://127.0.0.1:1\"\n[worker]\nmax_process_jobs = -1\n",
                  "bad.toml:4: worker.max_process_jobs: must be between 0 and 4096, got -1"},
        BadConfig{"jobs as string", "[server]\nurl = \"http://127.0.0.1:1\"\n[worker]\nmax_process_jobs = \"4\"\n",
                  "worker.max_process_jobs: expected an integer, got a string"},
        BadConfig{"tags not strings", "[server]\nurl = \"http://127.0.0.1:1\"\n[worker]\ntags = { a = 1 }\n",
                  "worker.tags.a: expected a string, got an integer"},
        BadConfig{"bool as string", "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.process]\nallow_commands = \"no\"\n",
                  "runners.process.allow_commands: expected true or false, got a string"},
        BadConfig{"unknown runner", "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.docker]\nenabled = true\n",
                  "unknown key runners.docker"},
        BadConfig{"slurm enabled bad", "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\nenabled = \"maybe\"\n",
                  "runners.slurm.enabled: expected auto, true or false"},
        BadConfig{"slurm account grammar", "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\naccount = \"a b\"\n",
                  "bad.toml:4: runners.slurm.account: invalid value \"a b\" (expected an account name"},
        BadConfig{"slurm partition grammar", "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\npartition = \"-x\"\n",
                  "runners.slurm.partition: invalid value \"-x\""},
        BadConfig{"slurm ceiling below the quick cycle",
                  "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\npoll_interval = \"30s\"\npoll_interval_max = \"5s\"\n",
                  "bad.toml:5: runners.slurm.poll_interval_max: must not be shorter than poll_interval"},
        BadConfig{"slurm rpc budget zero",
                  "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\nrpc_budget_per_minute = 0\n",
                  "runners.slurm.rpc_budget_per_minute: must be between 1 and 100000, got 0"},
        BadConfig{"slurm concurrent commands zero",
                  "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\nmax_concurrent_commands = 0\n",
                  "runners.slurm.max_concurrent_commands: must be between 1 and 256, got 0"},
        BadConfig{"unknown slurm key", "[server]\nurl = \"http://127.0.0.1:1\"\n[runners.slurm]\npartitions = \"x\"\n",
                  "unknown key runners.slurm.partitions"},
        BadConfig{"relative profile", "[server]\nurl = \"http://127.0.0.1:1\"\n[profiles]\nsmoke = \"smoke.sh\"\n",
                  "profiles.smoke: script path must be absolute"},
        BadConfig{"profile bad name", "[server]\nurl = \"http://127.0.0.1:1\"\n[profiles]\n\"a b\" = \"/x.sh\"\n",
                  "profile names use letters"},
        BadConfig{"profile unknown key",
                  "[server]\nurl = \"http://127.0.0.1:1\"\n[profiles]\nt = { script = \"/x\", param = [] }\n",
                  "unknown key profiles.t.param"},
        BadConfig{"log level", "[server]\nurl = \"http://127.0.0.1:1\"\n[log]\nlevel = \"loud\"\n",
                  "bad.toml:4: log.level: expected one of trace"},
        BadConfig{"section is a value", "server = \"http://127.0.0.1:1\"\n",
                  "bad.toml:1: server: expected a section/table, got a string"},
        BadConfig{"manager cluster with a slash", "[server]\nurl = \"http://127.0.0.1:1\"\n[manager]\ncluster = \"../x\"\n",
                  "bad.toml:4: manager.cluster: expected 1-64 letters"},
        BadConfig{"manager unknown key", "[server]\nurl = \"http://127.0.0.1:1\"\n[manager]\nlease = \"x\"\n",
                  "unknown key manager.lease (not a key of [manager])"},
        BadConfig{"manager empty state_dir", "[server]\nurl = \"http://127.0.0.1:1\"\n[manager]\nstate_dir = \"\"\n",
                  "manager.state_dir: must not be empty"},
        BadConfig{"manager heartbeat too short",
                  "[server]\nurl = \"http://127.0.0.1:1\"\n[manager]\nheartbeat_interval = \"10ms\"\n",
                  "manager.heartbeat_interval: must be between 100ms and 1h"},
        BadConfig{"empty token_file", "[server]\nurl = \"http://127.0.0.1:1\"\ntoken_file = \"\"\n",
                  "server.token_file: must not be empty"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (auto& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

class TokenFile : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("nymph-token-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  fs::path write(const std::string& content, mode_t mode) {
    auto p = dir / "token";
    std::ofstream(p) << content;
    ::chmod(p.c_str(), mode);
    return p;
  }
};

TEST_F(TokenFile, PrivateFileIsRead) {
  auto t = read_token_file(write("  s3cr3t-token\n", 0600));
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(*t, "s3cr3t-token");
}

TEST_F(TokenFile, GroupReadableIsRefusedWithoutLeakingTheToken) {
  auto t = read_token_file(write("s3cr3t-token", 0644));
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message.find("mode 0644"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("chmod 600"), std::string::npos);
  EXPECT_EQ(t.error().message.find("s3cr3t"), std::string::npos);
}

TEST_F(TokenFile, MissingEmptyAndNonRegularAreRefused) {
  EXPECT_NE(read_token_file(dir / "nope").error().message.find("No such file"), std::string::npos);
  EXPECT_NE(read_token_file(write("\n", 0600)).error().message.find("is empty"), std::string::npos);
  EXPECT_NE(read_token_file(dir).error().message.find("not a regular file"), std::string::npos);
  fs::create_symlink(write("abc", 0600), dir / "link");
  EXPECT_NE(read_token_file(dir / "link").error().message.find("symbolic link"), std::string::npos);
}

TEST(Config, AllowInsecureHttpIsTheOnlyWayAroundTheUrlRuleAndStillParses) {
  auto remote = parse_config("[server]\nurl = \"http://10.0.0.5:8470\"\nallow_insecure_http = true\n", "c.toml");
  EXPECT_TRUE(remote) << remote.error().message;
  auto wrapped = parse_config("[server]\nurl = \"http://127.0.0.1.example.com:8470\"\nallow_insecure_http = true\n", "c.toml");
  ASSERT_FALSE(wrapped);
  EXPECT_NE(wrapped.error().message.find("http://127.0.0.1.example.com:8470"), std::string::npos)
      << wrapped.error().message;
}

TEST(Config, LoadRefusesDevicesFifosAndHugeFilesAtOnce) {
  auto dev = load_config("/dev/zero");  // used to read without bound
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("not a regular file"), std::string::npos) << dev.error().message;
  auto missing = load_config("/nonexistent/nymph.toml");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("No such file"), std::string::npos) << missing.error().message;
}

// Found by fuzz/agent_config: a NUL byte (\u0000) in a tag, a profile's script or a parameter name was accepted;
// it would cut the argument or path it ends up in.
TEST(Config, NulBytesAreRefusedInEveryStringAndKey) {
  const std::string head = "[server]\nurl = \"http://127.0.0.1:8470\"\n";
  for (std::string bad : {"[worker]\ntags = { site = \"a\\u0000b\" }\n", "[worker]\ntags = { \"s\\u0000\" = \"a\" }\n",
                          "[profiles]\nsmoke = \"/opt/p/smoke.sh\\u0000x\"\n",
                          "[profiles.smoke]\nscript = \"/opt/s\"\nparameters = [\"a\\u0000\"]\n"}) {
    auto c = parse_config(head + bad, "nul.toml");
    ASSERT_FALSE(c.has_value()) << bad;
    EXPECT_NE(c.error().message.find("NUL"), std::string::npos) << c.error().message;
  }
}

// Found by fuzz/agent_config: a deeply dotted header or key, or deeply nested arrays, made toml++ and nymph recurse
// once per level (stack overflow, and memory quadratic in the depth when merging a fragment); an integer
// duration in seconds overflowed when converted to milliseconds.
TEST(Config, NestingAndHugeDurationsAreRefusedBeforeTheyCostAnything) {
  const std::string head = "[server]\nurl = \"http://127.0.0.1:8470\"\n";
  std::string dotted = "[a";
  for (int i = 0; i < 100'000; ++i) dotted += ".a";
  auto deep_header = parse_config(head + dotted + "]\n", "deep.toml");
  ASSERT_FALSE(deep_header.has_value());
  EXPECT_NE(deep_header.error().message.find("deep.toml:3: invalid TOML: dotted keys nested deeper than 32"),
            std::string::npos)
      << deep_header.error().message;
  auto deep_array = parse_config(head + "x = " + std::string(100'000, '[') + std::string(100'000, ']') + "\n", "a");
  ASSERT_FALSE(deep_array.has_value());
  EXPECT_NE(deep_array.error().message.find("arrays and tables nested deeper"), std::string::npos);
  EXPECT_TRUE(nymph::check_toml_nesting("s = \"" + std::string(100, '.') + "[[[[\" # ...." + std::string(50, '{') + "\n"
                                 "m = '''\n" + std::string(100, '[') + "'''\n", "strings.toml"))
      << "strings and comments do not count";
  auto huge = parse_config(head + "[worker]\ndrain_grace = 9223372036854775807\n", "d.toml");
  ASSERT_FALSE(huge.has_value());
  EXPECT_NE(huge.error().message.find("at most 36500d"), std::string::npos) << huge.error().message;
}
