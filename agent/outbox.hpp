#pragma once
// What one attempt still owes the control plane: its events and its log bytes, kept until acknowledged.
// Sans-io: the agent's shipper coroutine asks next_upload(), performs it, and reports the outcome.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
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
  std::chrono::steady_clock::time_point held_until;  // a progress event is not offered before this
  bool offered = false;                              // returned by next_upload(): may be on the wire
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
  using SteadyTime = std::chrono::steady_clock::time_point;

  // `max_chunk` bounds one log upload. A progress event (pending, running) is held back for `progress_hold`
  // after it is queued, unless log bytes queue behind it: a job that ends within the hold reports its final
  // event only, saving the control plane a request and a commit per short job.
  explicit AttemptOutbox(std::size_t max_chunk = 1 << 20,
                         std::chrono::milliseconds progress_hold = std::chrono::milliseconds(0))
      : max_chunk_(static_cast<std::uint32_t>(std::min<std::size_t>(max_chunk, UINT32_MAX))),
        progress_hold_(std::min<std::chrono::milliseconds>(progress_hold, std::chrono::milliseconds(UINT32_MAX))) {}

  // Queues a state change at wall time `at` (steady time `now`); assigns and returns its seq. A final event
  // replaces the progress events still held back (never offered, within their hold, no log bytes queued): it
  // takes the first one's seq (so seqs stay contiguous) and its Slurm job id when it has none of its own.
  std::int64_t push_event(runners::JobUpdate update, std::chrono::system_clock::time_point at, SteadyTime now);
  // Queues output bytes at `offset`. Offsets must be contiguous per stream; bytes before what is already
  // queued or delivered are dropped (an overlap), a gap is a bug in the producer and throws std::logic_error.
  void push_output(runners::Stream stream, std::uint64_t offset, std::string_view bytes);

  // The control plane takes no more bytes of `stream` (its job's log cap, or the attempt is final): drops
  // what is queued of it; bytes pushed later are dropped at once. Events are not affected.
  void close_stream(runners::Stream stream);

  // Log bytes queued but not yet acknowledged, both streams.
  std::size_t buffered_bytes() const { return streams_ ? streams_->out.size + streams_->err.size : 0; }

  // What to send next at `now`, or nullopt when nothing is sendable now. Progress events go first; log bytes
  // next; a final event only once every log byte before it is acknowledged, so a finished job's logs are
  // complete. An event returned here counts as offered and is never replaced afterwards.
  std::optional<Upload> next_upload(SteadyTime now);
  // When a held progress event becomes sendable, if next_upload() returned nothing because of it.
  std::optional<SteadyTime> held_until(SteadyTime now) const;
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
  // An attempt taken over from a previous run: the control plane already applied events up to `seq` of this
  // lease, so the next event queued gets seq + 1 at least (the same seq would be dropped as a duplicate).
  void continue_after(std::int64_t seq) {
    if (next_seq_ <= seq) next_seq_ = seq + 1;
  }

 private:
  // The bytes [acked, acked + size) of one stream, in chunks of at most max_chunk_ bytes, so that an
  // acknowledgement drops a chunk instead of moving everything behind it. Lists, not deques: an empty one
  // allocates nothing (libstdc++'s deque allocates 576 bytes at construction), and a tracked Slurm job's
  // outbox is empty nearly all its life; an element stays where it is while others are added (an Upload views
  // the front one).
  struct StreamBuffer {
    std::uint64_t acked = 0;         // bytes the server has
    std::list<std::string> chunks;   // pending bytes; the first front_skip bytes of chunks.front() are acked
    std::size_t front_skip = 0;
    std::size_t size = 0;            // pending bytes in all chunks
    bool closed = false;             // close_stream(): nothing more is queued
    std::uint64_t end() const { return acked + size; }
    // Drops the first `n` pending bytes (n <= size) and counts them as acknowledged.
    void drop(std::size_t n);
  };
  // Both streams' buffers, made by the first output, close or 409 of either: a tracked Slurm job's outbox is
  // empty nearly all its life, and a manager keeps ten thousand (104 bytes each saved).
  struct Streams {
    StreamBuffer out, err;
  };
  // `s`'s buffer, making both when there are none yet.
  StreamBuffer& buffer(runners::Stream s);

  bool holding(SteadyTime now) const;

  // Both 32 bits wide (up to 4 GiB, 49 days; clamped): a manager keeps ten thousand outboxes.
  std::uint32_t max_chunk_;
  std::chrono::duration<std::uint32_t, std::milli> progress_hold_;
  std::list<OutboxEvent> events_;  // a list for the reason StreamBuffer's chunks are one
  std::unique_ptr<Streams> streams_;
  std::int64_t next_seq_ = 1;
  bool final_queued_ = false;
  bool final_acked_ = false;
};

}  // namespace nymph::agent
