#include "protocol/poll_text.hpp"

#include <array>
#include <charconv>

#include <boost/json/serializer.hpp>

namespace nymph::protocol::detail {

void PollTextWriter::raw(std::string_view s) {
  size_ += s.size();
  if (out_) out_->append(s);
}

void PollTextWriter::string(std::string_view s) {
  boost::json::serializer sr;
  sr.reset(s);
  std::array<char, 256> chunk{};
  while (!sr.done()) raw(sr.read(chunk.data(), chunk.size()));
}

void PollTextWriter::begin(const std::map<std::string, int>& free) {
  raw(R"({"free":{)");
  bool first = true;
  for (const auto& [runner, slots] : free) {
    if (!first) raw(",");
    first = false;
    string(runner);
    raw(":");
    std::array<char, 16> digits{};
    const auto written = std::to_chars(digits.data(), digits.data() + digits.size(), slots);
    raw({digits.data(), static_cast<std::size_t>(written.ptr - digits.data())});
  }
  raw(R"(},"running":[)");
}

void PollTextWriter::running(std::string_view job_id, std::string_view lease_id) {
  raw(first_running_ ? R"({"jobId":)" : R"(,{"jobId":)");
  first_running_ = false;
  string(job_id);
  raw(R"(,"leaseId":)");
  string(lease_id);
  raw("}");
}

void PollTextWriter::end(bool draining) {
  raw(draining ? R"(],"draining":true})" : R"(],"draining":false})");
}

}  // namespace nymph::protocol::detail
