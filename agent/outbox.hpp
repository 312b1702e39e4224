#pragma once
// What one attempt still owes the control plane: its events and its log bytes, kept until acknowledged.
// Sans-io: the agent's shipper coroutine asks next_upload(), performs it, and reports the outcome.
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "runners/runner.hpp"

namespace nymph::agent {

// One event as the protocol numbers it: seq starts at 1 per attempt.
struct OutboxEvent {
  std::int64_t seq = 0;
  runners::JobUpdate update;
  std::chrono::system_clock::time_point at;
};

// The next thing to send. Exactly one of `event` / log fields is meaningful.
struct Upload {
  enum class Kind { event, log } kind = Kind::event;
  const OutboxEvent* event = nullptr;  // kind == event
  runners::Stream stream = runners::Stream::out;
  std::uint64_t offset = 0;            // kind == log: byte offset of `bytes` in the stream
  std::string_view bytes;              // kind == log: a view into the outbox, valid until the next mutation
};

class AttemptOutbox {
 public:
  // `max_chunk` bounds one log upload.
  explicit AttemptOutbox(std::size_t max_chunk = 1 << 20) : max_chunk_(max_chunk) {}

  // Queues a state change; assigns and returns its seq.
  std::int64_t push_event(runners::JobUpdate update, std::chrono::system_clock::time_point at);
  // Queues output bytes at `offset`. Offsets must be contiguous per stream; bytes before what is already
  // queued or delivered are dropped (an overlap), a gap is a bug in the producer and throws std::logic_error.
  void push_output(runners::Stream stream, std::uint64_t offset, std::string_view bytes);

  // Log bytes queued but not yet acknowledged, both streams.
  std::size_t buffered_bytes() const { return out_.pending.size() + err_.pending.size(); }

  // What to send next, or nullopt when nothing is sendable now. Progress events go first; log bytes next;
  // a final event only once every log byte before it is acknowledged, so a finished job's logs are complete.
  std::optional<Upload> next_upload() const;
  // The upload returned by next_upload() was acknowledged (2xx, or an idempotent duplicate).
  void acknowledged(const Upload& u);
  // The server answered a log upload with 409 and the offset it expects next. When it expects more than we
  // sent (an earlier upload whose reply was lost), the acknowledged part is dropped. Returns false when
  // the server expects bytes we no longer have (its data lost): the caller must treat that as an error.
  bool expected_offset(runners::Stream stream, std::uint64_t expected);

  // The final event has been queued and acknowledged: nothing remains.
  bool finished() const { return final_acked_; }
  // A final event has been queued.
  bool has_final() const { return final_queued_; }
  // Events queued so far (acknowledged or not).
  std::int64_t last_seq() const { return next_seq_ - 1; }

 private:
  struct StreamBuffer {
    std::uint64_t acked = 0;   // bytes the server has
    std::string pending;       // bytes [acked, acked + pending.size())
    std::uint64_t end() const { return acked + pending.size(); }
  };
  StreamBuffer& buffer(runners::Stream s) { return s == runners::Stream::out ? out_ : err_; }
  const StreamBuffer& buffer(runners::Stream s) const { return s == runners::Stream::out ? out_ : err_; }

  std::size_t max_chunk_;
  std::deque<OutboxEvent> events_;
  StreamBuffer out_, err_;
  std::int64_t next_seq_ = 1;
  bool final_queued_ = false;
  bool final_acked_ = false;
};

}  // namespace nymph::agent
