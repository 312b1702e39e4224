#pragma once
// Helpers for the process-runner tests: a recording reporter, plus the process helpers of
// tests/support/processes.hpp.
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runners/runner.hpp"
#include "tests/support/processes.hpp"

namespace nymph::test {

// Collects everything a runner reports for one attempt and checks the offsets as it goes.
class RecordingReporter : public runners::JobReporter {
 public:
  std::vector<runners::JobUpdate> updates;
  std::string out, err;
  bool offsets_contiguous = true;
  std::size_t output_calls = 0;
  std::vector<std::chrono::steady_clock::time_point> output_times;

  void update(runners::JobUpdate u) override { updates.push_back(std::move(u)); }

  boost::asio::awaitable<void> output(runners::Stream stream, std::uint64_t offset, std::string bytes) override {
    std::string& into = stream == runners::Stream::out ? out : err;
    if (offset != into.size()) offsets_contiguous = false;
    into += bytes;
    ++output_calls;
    output_times.push_back(std::chrono::steady_clock::now());
    co_return;
  }
};

}  // namespace nymph::test
