#include "agent/outbox.hpp"

#include <stdexcept>

namespace nymph::agent {

std::int64_t AttemptOutbox::push_event(runners::JobUpdate update, std::chrono::system_clock::time_point at) {
  if (final_queued_) throw std::logic_error("event queued after the final event");
  if (runners::is_final(update.state)) final_queued_ = true;
  events_.push_back(OutboxEvent{next_seq_, std::move(update), at});
  return next_seq_++;
}

void AttemptOutbox::push_output(runners::Stream stream, std::uint64_t offset, std::string_view bytes) {
  auto& b = buffer(stream);
  if (offset > b.end()) throw std::logic_error("gap in job output offsets");
  std::uint64_t skip = b.end() - offset;
  if (skip >= bytes.size()) return;
  b.pending.append(bytes.substr(static_cast<std::size_t>(skip)));
}

std::optional<Upload> AttemptOutbox::next_upload() const {
  if (!events_.empty() && !runners::is_final(events_.front().update.state))
    return Upload{.kind = Upload::Kind::event, .event = &events_.front()};
  for (auto s : {runners::Stream::out, runners::Stream::err}) {
    const auto& b = buffer(s);
    if (!b.pending.empty()) {
      return Upload{.kind = Upload::Kind::log,
                    .stream = s,
                    .offset = b.acked,
                    .bytes = std::string_view(b.pending).substr(0, max_chunk_)};
    }
  }
  if (!events_.empty()) return Upload{.kind = Upload::Kind::event, .event = &events_.front()};
  return std::nullopt;
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
  b.pending.erase(0, u.bytes.size());
  b.acked += u.bytes.size();
}

bool AttemptOutbox::expected_offset(runners::Stream stream, std::uint64_t expected) {
  auto& b = buffer(stream);
  if (expected < b.acked) return false;
  if (expected > b.end()) return false;
  b.pending.erase(0, static_cast<std::size_t>(expected - b.acked));
  b.acked = expected;
  return true;
}

}  // namespace nymph::agent
