#pragma once
// The JSON text of a poll (POST /v1/workers/{id}/poll) written straight from the worker's own state.
//
// A manager's poll lists every attempt it holds: ten thousand tracked Slurm jobs make a poll of about 0.9 MB.
// Built as a PollRequest, then a json::value, then serialised into doubling text, that one poll was the agent's
// peak memory (about 5 MB at N = 10 000, bench/README.md). poll_request_text() writes the same bytes into one
// string allocated once at its size, with no copy of the ids.
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace nymph::protocol {

namespace detail {
// Writes a poll's JSON text piece by piece into `out`, or only counts its bytes when `out` is null.
// Call begin, then running per listed attempt, then end.
class PollTextWriter {
 public:
  explicit PollTextWriter(std::string* out) : out_(out) {}
  void begin(const std::map<std::string, int>& free);
  void running(std::string_view job_id, std::string_view lease_id);
  void end(bool draining);
  // The bytes written (or counted) so far.
  std::size_t size() const { return size_; }

 private:
  void raw(std::string_view s);
  void string(std::string_view s);  // quoted and escaped as Boost.JSON serialises a string
  std::string* out_;
  std::size_t size_ = 0;
  bool first_running_ = true;
};
}  // namespace detail

// The JSON text of the PollRequest {free, running, draining}: byte for byte what to_json_text(PollRequest) writes
// for the same contents. `for_each_running(emit)` calls emit(job_id, lease_id) for each attempt the poll lists; it is
// called twice (once to size the text, once to write it) and must list the same attempts in the same order both
// times.
template <class ForEachRunning>
std::string poll_request_text(const std::map<std::string, int>& free, bool draining, ForEachRunning&& for_each_running) {
  auto pass = [&](detail::PollTextWriter& w) {
    w.begin(free);
    for_each_running([&w](std::string_view job_id, std::string_view lease_id) { w.running(job_id, lease_id); });
    w.end(draining);
  };
  detail::PollTextWriter counter(nullptr);
  pass(counter);
  std::string text;
  text.reserve(counter.size());
  detail::PollTextWriter writer(&text);
  pass(writer);
  return text;
}

}  // namespace nymph::protocol
