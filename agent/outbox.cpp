#include "agent/outbox.hpp"

#include <algorithm>
#include <stdexcept>

namespace nymph::agent {

std::int64_t AttemptOutbox::push_event(runners::JobUpdate update, std::chrono::system_clock::time_point at,
                                       SteadyTime now) {
  if (final_queued_) throw std::logic_error("event queued after the final event");
  bool final = runners::is_final(update.state);
  if (final) {
    final_queued_ = true;
    // Progress events still held (not offered, within the hold, no output behind them) are replaced.
    while (!events_.empty() && !events_.back().offered && now < events_.back().held_until && buffered_bytes() == 0) {
      if (!update.slurm_job_id) update.slurm_job_id = events_.back().update.slurm_job_id;
      next_seq_ = events_.back().seq;
      events_.pop_back();
    }
  }
  events_.push_back(OutboxEvent{next_seq_, std::move(update), at, final ? now : now + progress_hold_, false});
  return next_seq_++;
}

void AttemptOutbox::push_output(runners::Stream stream, std::uint64_t offset, std::string_view bytes) {
  auto& b = buffer(stream);
  if (b.closed) return;
  if (offset > b.end()) throw std::logic_error("gap in job output offsets");
  std::uint64_t skip = b.end() - offset;
  if (skip >= bytes.size()) return;
  bytes.remove_prefix(static_cast<std::size_t>(skip));
  b.size += bytes.size();
  while (!bytes.empty()) {
    if (b.chunks.empty() || b.chunks.back().size() >= max_chunk_) b.chunks.emplace_back();
    auto& back = b.chunks.back();
    std::size_t n = std::min(bytes.size(), max_chunk_ - back.size());
    back.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
}

void AttemptOutbox::close_stream(runners::Stream stream) {
  auto& b = buffer(stream);
  b.drop(b.size);
  b.closed = true;
}

void AttemptOutbox::StreamBuffer::drop(std::size_t n) {
  size -= n;
  acked += n;
  while (n > 0) {
    std::size_t here = std::min(n, chunks.front().size() - front_skip);
    front_skip += here;
    n -= here;
    if (front_skip == chunks.front().size()) {
      chunks.pop_front();
      front_skip = 0;
    }
  }
}

AttemptOutbox::StreamBuffer& AttemptOutbox::buffer(runners::Stream s) {
  if (!streams_) streams_ = std::make_unique<Streams>();
  return s == runners::Stream::out ? streams_->out : streams_->err;
}

bool AttemptOutbox::holding(SteadyTime now) const {
  if (events_.empty() || runners::is_final(events_.front().update.state)) return false;
  const auto& e = events_.front();
  return !e.offered && now < e.held_until && buffered_bytes() == 0;
}

std::optional<AttemptOutbox::SteadyTime> AttemptOutbox::held_until(SteadyTime now) const {
  if (!holding(now)) return std::nullopt;
  return events_.front().held_until;
}

std::optional<Upload> AttemptOutbox::next_upload(SteadyTime now) {
  if (holding(now)) return std::nullopt;
  if (!events_.empty() && !runners::is_final(events_.front().update.state)) {
    events_.front().offered = true;
    return Upload{.kind = Upload::Kind::event, .event = &events_.front()};
  }
  if (streams_) {
    for (auto s : {runners::Stream::out, runners::Stream::err}) {
      const auto& b = s == runners::Stream::out ? streams_->out : streams_->err;
      if (b.size > 0) {
        return Upload{.kind = Upload::Kind::log,
                      .stream = s,
                      .offset = b.acked,
                      .bytes = std::string_view(b.chunks.front()).substr(b.front_skip)};
      }
    }
  }
  if (events_.empty()) return std::nullopt;
  events_.front().offered = true;
  return Upload{.kind = Upload::Kind::event, .event = &events_.front()};
}

void AttemptOutbox::acknowledged(const Upload& u) {
  if (u.kind == Upload::Kind::event) {
    if (events_.empty() || events_.front().seq != u.event->seq) throw std::logic_error("ack of an event not in front");
    if (runners::is_final(events_.front().update.state)) final_acked_ = true;
    events_.pop_front();
    return;
  }
  auto& b = buffer(u.stream);
  if (u.offset != b.acked) return;  // stale acknowledgement
  b.drop(u.bytes.size());
}

bool AttemptOutbox::expected_offset(runners::Stream stream, std::uint64_t expected) {
  auto& b = buffer(stream);
  if (expected < b.acked) return false;
  if (expected > b.end()) return false;
  b.drop(static_cast<std::size_t>(expected - b.acked));
  return true;
}

}  // namespace nymph::agent
