#pragma once
// A Slurm runner over the scripted FakeSlurm, for the runner's tests: a fresh launch directory per test (removed
// before and after), fast poll and output intervals, and a plain /bin/true job spec.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/logging.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "tests/runners/slurm/fake_slurm.hpp"

namespace nymph::test {

struct SlurmRunnerFixture : ::testing::Test {
  std::filesystem::path launch =
      std::filesystem::temp_directory_path() /
      ("nymph-slurm-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
       "-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  boost::asio::io_context ioc;
  FakeSlurm fake;

  void SetUp() override { std::filesystem::remove_all(launch); }
  void TearDown() override { std::filesystem::remove_all(launch); }

  // The runner's configuration for `launch`, polling and reading output every millisecond.
  runners::slurm::SlurmRunnerConfig config() {
    runners::slurm::SlurmRunnerConfig c;
    c.launch_dir = launch;
    c.poll_interval = std::chrono::milliseconds(1);
    c.output_interval = std::chrono::milliseconds(1);
    return c;
  }
  // A runner on `ioc` whose Slurm commands go to `fake`, logging to `log` (by default nowhere, or to stderr with
  // NYMPH_TEST_LOG set).
  std::unique_ptr<runners::slurm::SlurmRunner> make_runner(runners::slurm::SlurmRunnerConfig c,
                                                           std::shared_ptr<spdlog::logger> log = nullptr) {
    if (!log) log = std::getenv("NYMPH_TEST_LOG") ? make_logger("test", "debug", "") : null_logger();
    return std::make_unique<runners::slurm::SlurmRunner>(ioc.get_executor(), std::move(c),
                                                         std::make_unique<Forward>(fake), std::move(log));
  }
  // A command job `id` (lease "lease-<id>") running /bin/true.
  static runners::JobSpec spec(std::string id) {
    runners::JobSpec s;
    s.job_id = std::move(id);
    s.lease_id = "lease-" + s.job_id;
    s.argv = {"/bin/true"};
    return s;
  }
};

}  // namespace nymph::test
