// 100 MB of job output through a deliberately slow reporter: every byte arrives in order at the right
// offset, and the runner reads no faster than the reporter accepts (bounded memory).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include "common/logging.hpp"
#include "runners/process_runner.hpp"
#include "tests/runners/process_helpers.hpp"
#include "tests/support/run_coro.hpp"

// Keep ASan's quarantine of freed chunks small so the peak-RSS figure measures the runner, not ASan.
extern "C" const char* __asan_default_options() {
  return "quarantine_size_mb=4";
}

namespace nymph::runners {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr std::uint64_t total = 100ull * 1000 * 1000;

// Bytes written so far by process `pid` (/proc/<pid>/io wchar), or nullopt once it is gone.
std::optional<std::uint64_t> bytes_written(pid_t pid) {
  std::ifstream io("/proc/" + std::to_string(pid) + "/io");
  for (std::string key; io >> key;) {
    std::uint64_t value = 0;
    io >> value;
    if (key == "wchar:") return value;
  }
  return std::nullopt;
}

long vm_hwm_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// Checks each byte against the helper's pattern (offset % 256), keeps no data, and is slow: every output()
// call suspends on a timer, like an agent whose control plane accepts less than the job prints.
class SlowVerifyingReporter : public JobReporter {
 public:
  explicit SlowVerifyingReporter(std::string pid_file) : pid_file_(std::move(pid_file)) {}

  std::uint64_t received = 0;
  std::uint64_t max_chunk = 0;
  std::uint64_t max_ahead = 0;  // most bytes the job had written beyond what had reached this reporter
  int max_in_flight = 0;
  int in_flight = 0;
  bool pattern_ok = true;
  bool offsets_ok = true;
  std::size_t calls = 0;

  void update(JobUpdate) override {}

  asio::awaitable<void> output(Stream stream, std::uint64_t offset, std::string bytes) override {
    if (stream != Stream::out || offset != received) offsets_ok = false;
    for (std::size_t i = 0; i < bytes.size(); ++i)
      if (static_cast<unsigned char>(bytes[i]) != (offset + i) % 256) pattern_ok = false;
    received += bytes.size();
    max_chunk = std::max<std::uint64_t>(max_chunk, bytes.size());
    if (auto written = writer_wchar()) max_ahead = std::max(max_ahead, *written - std::min(*written, received));
    ++calls;
    max_in_flight = std::max(max_in_flight, ++in_flight);
    asio::steady_timer slow(co_await asio::this_coro::executor, 1ms);
    co_await slow.async_wait(asio::as_tuple(asio::use_awaitable));
    --in_flight;
  }

 private:
  std::optional<std::uint64_t> writer_wchar() {
    if (pid_ <= 0) {
      std::ifstream f(pid_file_);
      f >> pid_;
    }
    return pid_ > 0 ? bytes_written(pid_) : std::nullopt;
  }
  std::string pid_file_;
  pid_t pid_ = 0;
};

TEST(ProcessRunnerOutput, HundredMegabytesThroughASlowReporterInOrderWithBoundedMemory) {
  test::TempDir tmp;
  ProcessRunnerConfig config;
  config.work_dir = tmp / "work";
  ProcessRunner runner(config, null_logger());
  auto pid_file = (tmp / "pid").string();
  SlowVerifyingReporter reporter(pid_file);
  JobSpec spec;
  spec.job_id = "big";
  spec.argv = {NYMPH_TEST_CHILD, "--pid-file", pid_file, "--write", std::to_string(total)};

  asio::io_context ioc;
  const long hwm_before = vm_hwm_kib();
  auto final = test::run_coro(ioc, runner.run(spec, reporter), 300s);
  const long hwm_growth_mib = (vm_hwm_kib() - hwm_before) / 1024;

  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(reporter.received, total);
  EXPECT_TRUE(reporter.offsets_ok);
  EXPECT_TRUE(reporter.pattern_ok);
  EXPECT_LE(reporter.max_chunk, config.output_chunk);
  EXPECT_EQ(reporter.max_in_flight, 1);  // never a second output() while one is suspended
  // The job can only be ahead by what the pipe and the runner's one chunk buffer hold: it was slowed down
  // instead of the runner buffering the backlog.
  EXPECT_LT(reporter.max_ahead, 2u * 1024 * 1024) << "max bytes ahead " << reporter.max_ahead;
  EXPECT_LT(hwm_growth_mib, 32) << "VmHWM grew by " << hwm_growth_mib << " MiB";
  std::cout << "output() calls " << reporter.calls << ", max bytes ahead of the reporter " << reporter.max_ahead
            << ", VmHWM growth " << hwm_growth_mib << " MiB\n";
}

// What the runner hands on for a few bytes of output is a string of about their size, not a chunk-sized buffer:
// the agent's outbox counts a chunk by its bytes, so a job printing a line now and then must not make it hold
// output_chunk (64 KiB) per line while the control plane is slow.
TEST(ProcessRunnerOutput, AFewBytesOfOutputAreHandedOnInAStringOfTheirSize) {
  class CapacityReporter : public JobReporter {
   public:
    std::string out;
    std::size_t max_capacity = 0;
    void update(JobUpdate) override {}
    asio::awaitable<void> output(Stream, std::uint64_t, std::string bytes) override {
      max_capacity = std::max(max_capacity, bytes.capacity());
      out += bytes;
      co_return;
    }
  };
  test::TempDir tmp;
  ProcessRunnerConfig config;
  config.work_dir = tmp / "work";
  ProcessRunner runner(config, null_logger());
  CapacityReporter reporter;
  JobSpec spec;
  spec.job_id = "small";
  spec.argv = {NYMPH_TEST_CHILD, "--text", "--write", "10"};
  asio::io_context ioc;
  auto final = test::run_coro(ioc, runner.run(spec, reporter), 60s);
  EXPECT_EQ(final.state, JobState::succeeded) << final.message;
  EXPECT_EQ(reporter.out, "abcdefghij");
  EXPECT_LT(reporter.max_capacity, 1024u) << "a 10-byte chunk kept " << reporter.max_capacity << " bytes";
}

}  // namespace
}  // namespace nymph::runners
