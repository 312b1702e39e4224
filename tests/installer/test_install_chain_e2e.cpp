// Kept launches (`nymph install --slurm --keep`, issue 18) on the lab cluster, with 2-minute walltimes: each
// generation submits its successor from inside its allocation, the successor serves before its predecessor stops,
// jobs submitted throughout are never cut by a walltime and each ends once; a successor that cannot be submitted
// pauses the chain and says why; `nymph kill` ends the chain with nothing left in squeue. The launches run in the
// lab's `chain` partition, which the tests drain or take down; the lab declares at least 4 CPUs, so two overlapping
// generations find one each while another lab test runs beside them.
#include <map>

#include "common/time.hpp"
#include "tests/installer/slurm_e2e_fixture.hpp"

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace nymph::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The lab's `chain` partition in another state for one test; back to UP whatever happens.
class PartitionState {
 public:
  explicit PartitionState(std::string state) {
    auto r = run_command({"scontrol", "update", "PartitionName=chain", "State=" + state});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  ~PartitionState() { run_command({"scontrol", "update", "PartitionName=chain", "State=UP"}); }
  PartitionState(const PartitionState&) = delete;
  PartitionState& operator=(const PartitionState&) = delete;
};

std::chrono::system_clock::time_point at(const json::object& w, const char* key) {
  return nymph::parse_time(str(w, key)).value();
}

class KeptLaunchE2E : public InstallSlurmE2E {
 protected:
  KeptLaunchE2E() { partition_ = "chain"; }

  // The worker rows of this launch by generation.
  std::map<std::int64_t, json::object> generations(const ControlServer& cp) {
    std::map<std::int64_t, json::object> out;
    auto list = one_object(cp.admin({"workers", "--json"}));
    for (const auto& w : list["workers"].as_array())
      if (str(w.as_object(), "launchId") == id_) out[w.at("generation").to_number<std::int64_t>()] = w.as_object();
    return out;
  }

  // This launch as `nymph launches --json` shows it.
  json::object launch() {
    auto list = one_object(nymph({"launches", "--json"}));
    for (const auto& l : list["launches"].as_array())
      if (str(l.as_object(), "launchId") == id_) return l.as_object();
    ADD_FAILURE() << "launch " << id_ << " not listed: " << json::serialize(list);
    return {};
  }

  // Polls `done` (bounded): Slurm and the daemons move on their own clocks.
  template <class Done>
  bool eventually(Done done, std::chrono::seconds bound) {
    for (auto deadline = Clock::now() + bound; Clock::now() < deadline; std::this_thread::sleep_for(500ms))
      if (done()) return true;
    return done();
  }

  // The jobs of this launch's name in squeue.
  std::string queued_jobs() {
    return run_as(kLabUser, {"squeue", "--noheader", "-o", "%i %T", "--name=lakeshore-nymph-" + id_}).out;
  }

  // A site fragment with the chain's timing for 2-minute allocations, readable by the lab user.
  fs::path chain_fragment(const std::string& text) {
    auto p = home_ / "chain.toml";
    std::ofstream(p) << text;
    EXPECT_EQ(::chown(p.c_str(), uid_, gid_), 0);
    return p;
  }

  std::string log_text() { return read_file(home_ / ".local" / "share" / ("nymph-" + id_ + ".log")); }
};

}  // namespace

// Three generations of 2 minutes (SIGUSR1 and the daemon's own lead 30 s before the end, so each serves ~90 s):
// each submits its successor half-way (the floor of 60 s is capped at half the serving time), the successor
// registers before its predecessor is gone, and short jobs submitted throughout all succeed at their first attempt.
TEST_F(KeptLaunchE2E, ThreeGenerationsHandOverWithoutAGapAndNoJobIsCut) {
  ControlServer cp({.poll_timeout = "1s"});
  auto frag = chain_fragment("[chain]\nsuccessor_floor = \"60s\"\n");
  auto o = install(cp, {"--slurm-time", "2", "--slurm-signal-lead", "30", "--keep", "--keep-max", "3",
                        "--config-fragment", frag.native()});
  ASSERT_FALSE(id_.empty());

  std::vector<std::string> jobs;
  auto submit_one = [&] { jobs.push_back(submit(cp, {"--timeout", "20s", "--", "/bin/sleep", "2"})); };
  // Jobs arrive every ~3 s until the third generation serves, and a few after.
  auto third_serves = [&] {
    auto g = generations(cp);
    return g.contains(3) && str(g[3], "status") == "active";
  };
  for (auto deadline = Clock::now() + 330s; Clock::now() < deadline && !third_serves(); std::this_thread::sleep_for(3s))
    submit_one();
  ASSERT_TRUE(third_serves()) << json::serialize(launch()) << "\n" << log_text();
  for (int i = 0; i < 5; ++i) submit_one();

  auto final_state = [](const std::string& j) {
    auto s = job_state(j);
    return s == "succeeded" || s == "failed" || s == "lost" || s == "cancelled";
  };
  int succeeded_first_time = 0;
  for (const auto& j : jobs) {
    auto v = json::parse(wait_for_job(cp, j, final_state, 150s)).as_object();
    const json::object& job = v.contains("job") ? v.at("job").as_object() : v;
    bool once =
        str(job, "state") == "succeeded" && job.contains("attempts") && job.at("attempts").as_array().size() == 1;
    EXPECT_TRUE(once) << "job cut or retried: " << json::serialize(job);
    succeeded_first_time += once;
  }
  EXPECT_EQ(succeeded_first_time, static_cast<int>(jobs.size()));
  std::printf("jobs: %zu submitted across the hand-overs, %d succeeded at their first attempt, %zu cut or retried\n",
              jobs.size(), succeeded_first_time, jobs.size() - static_cast<std::size_t>(succeeded_first_time));

  // Generations 1 and 2 are gone at their walltime; each successor registered before its predecessor was gone.
  ASSERT_TRUE(eventually([&] { return str(generations(cp)[2], "status") == "gone"; }, 150s)) << log_text();
  auto g = generations(cp);
  ASSERT_EQ(g.size(), 3u) << "the chain stops at --keep-max 3";
  for (std::int64_t n : {2, 3}) {
    const auto& before = g[n - 1];
    EXPECT_EQ(str(before, "exitReason"), "walltime") << json::serialize(before);
    auto overlap =
        std::chrono::duration_cast<std::chrono::milliseconds>(at(before, "lastSeen") - at(g[n], "registeredAt"));
    std::printf("hand-over %lld -> %lld: serving gap %lld ms (overlap %lld ms)\n", static_cast<long long>(n - 1),
                static_cast<long long>(n), static_cast<long long>(std::max<long long>(0, -overlap.count())),
                static_cast<long long>(overlap.count()));
    EXPECT_GT(overlap.count(), 0) << "generation " << n << " registered after generation " << n - 1 << " was gone";
  }

  auto l = launch();
  ASSERT_TRUE(l.contains("chain")) << json::serialize(l);
  const auto& chain = l.at("chain").as_object();
  EXPECT_EQ(chain.at("generations").as_array().size(), 3u) << json::serialize(chain);
  EXPECT_EQ(str(l, "state"), "running");
  // One sbatch per generation after the first (the install submitted that one).
  auto log = log_text();
  std::size_t submissions = 0;
  for (auto at = log.find("kept launch: submitting generation"); at != std::string::npos;
       at = log.find("kept launch: submitting generation", at + 1))
    ++submissions;
  EXPECT_EQ(submissions, 2u) << log;
  std::printf("slurm calls: %zu sbatch by the chain for %zu generations after the first\n", submissions, g.size() - 1);

  // lakeshore's `daemon kill <worker-id>`: the serving generation's worker id names the whole chain.
  auto k = nymph({"kill", str(g[3], "id"), "--timeout", "60", "--json"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
  EXPECT_EQ(str(one_object(k), "launchId"), id_) << k.out;
  EXPECT_EQ(queued_jobs(), "");
}

// A successor that cannot be submitted (the partition drains: sbatch refuses new jobs, the running generation keeps
// its allocation) is retried after the backoff, then the chain pauses and says why in `nymph launches` and in the
// generation's status.json.
TEST_F(KeptLaunchE2E, AFailingSuccessorSubmissionPausesTheChain) {
  ControlServer cp({.poll_timeout = "1s"});
  auto frag = chain_fragment("[chain]\nsuccessor_floor = \"60s\"\nsubmit_backoff = [\"2s\"]\npause_after = 2\n");
  install(cp, {"--slurm-time", "2", "--slurm-signal-lead", "30", "--keep", "--config-fragment", frag.native()});
  ASSERT_TRUE(eventually([&] { return generations(cp).contains(1); }, 120s)) << log_text();
  PartitionState drained("DRAIN");
  ASSERT_TRUE(eventually(
      [&] {
        auto l = launch();
        return l.contains("chain") && str(l.at("chain").as_object(), "state") == "paused";
      },
      120s))
      << json::serialize(launch()) << "\n"
      << log_text();
  auto l = launch();
  const auto& chain = l.at("chain").as_object();
  EXPECT_NE(str(chain, "reason").find("could not be submitted 2 times in a row"), std::string::npos)
      << json::serialize(chain);
  EXPECT_EQ(chain.at("failures"), 2);
  EXPECT_EQ(chain.at("generations").as_array().size(), 1u) << "no successor was queued";
  ASSERT_TRUE(chain.at("serving").is_object()) << json::serialize(chain);
  EXPECT_EQ(str(chain.at("serving").as_object(), "state"), "paused") << "status.json says so too";
  auto status = json::parse(run_as(kLabUser, {"cat", str(l, "launchDir") + "/status.json"}).out).as_object();
  EXPECT_EQ(str(status.at("chain").as_object(), "state"), "paused");

  auto k = nymph({"kill", id_, "--timeout", "60"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
  EXPECT_EQ(queued_jobs(), "");
}

// `nymph kill` of a kept launch whose successor is queued (the partition is down: queued jobs do not start) cancels
// the successor and drains the running generation: nothing of the launch is left in squeue, and the chain says it
// was stopped.
TEST_F(KeptLaunchE2E, KillEndsTheChainAndCancelsTheQueuedSuccessor) {
  ControlServer cp({.poll_timeout = "1s"});
  auto frag = chain_fragment("[chain]\nsuccessor_floor = \"60s\"\n");
  install(cp, {"--slurm-time", "2", "--slurm-signal-lead", "30", "--keep", "--config-fragment", frag.native()});
  ASSERT_TRUE(eventually([&] { return generations(cp).contains(1); }, 120s)) << log_text();
  PartitionState down("DOWN");
  ASSERT_TRUE(eventually(
      [&] {
        auto l = launch();
        return l.contains("chain") && l.at("chain").as_object().at("next").is_object();
      },
      120s))
      << json::serialize(launch()) << "\n"
      << log_text();
  std::string successor = str(launch().at("chain").as_object().at("next").as_object(), "slurmJobId");
  EXPECT_NE(queued_jobs().find(successor + " PENDING"), std::string::npos) << queued_jobs();

  auto k = nymph({"kill", id_, "--timeout", "60", "--json"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
  EXPECT_EQ(queued_jobs(), "") << "the successor and the running generation are gone";
  auto l = launch();
  EXPECT_EQ(str(l, "state"), "exited") << json::serialize(l);
  const auto& chain = l.at("chain").as_object();
  EXPECT_EQ(str(chain, "state"), "ended");
  EXPECT_EQ(chain.at("stopRequested"), true);
  auto g = generations(cp);
  ASSERT_TRUE(g.contains(1));
  EXPECT_FALSE(g.contains(2)) << "the successor never ran";
  EXPECT_EQ(str(g[1], "status"), "gone");
  EXPECT_EQ(str(g[1], "exitReason"), "sigterm");
}

// Where a compute node has no sbatch (here: the launch's sbatch names a path that does not exist), the first
// generation hands the chain to the login-node manager of the same user, which submits the successor in time: the
// successor registers before its predecessor is gone, and chain.json says who submitted it.
TEST_F(KeptLaunchE2E, TheLoginNodeManagerSubmitsWhenTheComputeNodeHasNoSbatch) {
  ControlServer cp({.poll_timeout = "1s"});
  auto tok = home_ / "mgr-tok";
  std::ofstream(tok) << cp.agent_token() << "\n";
  ASSERT_EQ(::chown(tok.c_str(), uid_, gid_), 0);
  ASSERT_EQ(::chmod(tok.c_str(), 0600), 0);
  auto m = nymph({"install", "--server", cp.url(), "--token-file", tok.native(), "--label", "mgr", "--cluster",
                  "chain-e2e-" + std::to_string(::getpid()), "--json"});
  ASSERT_EQ(m.exit_code, 0) << m.err << m.out;
  local_launch_ = str(one_object(m), "launchId");

  auto frag = chain_fragment("[runners.slurm]\nsbatch = \"/nonexistent/sbatch\"\n[chain]\nsuccessor_floor = \"60s\"\n");
  install(cp, {"--slurm-time", "2", "--slurm-signal-lead", "30", "--keep", "--keep-max", "2", "--config-fragment",
               frag.native()});
  ASSERT_TRUE(eventually([&] { return str(generations(cp)[2], "status") == "active"; }, 200s))
      << json::serialize(launch()) << "\n"
      << log_text();
  auto l = launch();
  const auto& chain = l.at("chain").as_object();
  EXPECT_EQ(str(chain, "submitter"), "manager") << json::serialize(chain);
  const auto& gens = chain.at("generations").as_array();
  ASSERT_EQ(gens.size(), 2u) << json::serialize(chain);
  EXPECT_EQ(str(gens[0].as_object(), "submittedBy"), "install");
  EXPECT_EQ(str(gens[1].as_object(), "submittedBy"), "manager");
  auto g = generations(cp);
  if (str(g[1], "status") == "gone") {
    EXPECT_LT(at(g[2], "registeredAt"), at(g[1], "lastSeen")) << "generation 2 registered after generation 1 was gone";
  }

  auto k = nymph({"kill", id_, "--timeout", "60"});
  EXPECT_EQ(k.exit_code, 0) << k.err << k.out;
  EXPECT_EQ(queued_jobs(), "");
}
