#include "agent/attempt.hpp"

namespace nymph::agent {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kMaxLogUpload = 1 << 20;  // bytes per log PUT (the protocol allows 8 MiB)
}  // namespace

void AttemptReporter::update(runners::JobUpdate u) {
  if (attempt_.stopped() || runners::is_final(u.state)) return;  // final updates are run()'s return value
  attempt_.outbox.push_event(std::move(u), std::chrono::system_clock::now(), Clock::now());
  attempt_.queued();
}

asio::awaitable<void> AttemptReporter::output(runners::Stream stream, std::uint64_t offset, std::string bytes) {
  if (attempt_.stopped()) co_return;
  attempt_.outbox.push_output(stream, offset, bytes);
  attempt_.queued();
  while (attempt_.outbox.buffered_bytes() > bound_ && !attempt_.stopped()) co_await attempt_.drained.wait();
}

Attempt::Attempt(const DaemonSettings& s, ShipperStarter& starter)
    : outbox(kMaxLogUpload, s.progress_event_hold),
      reporter(*this, s.max_buffered_output),
      shipper_starter(starter) {}

bool Attempt::stops_with_agent() const {
  return runner && runner->lifetime() == runners::Lifetime::stops_with_agent;
}

bool Attempt::survives_agent() const {
  return runner && runner->lifetime() == runners::Lifetime::survives_agent;
}

void Attempt::wake_all() {
  wake.notify();
  drained.notify();
}

void Attempt::queued() {
  if (shipper_active)
    wake.notify();
  else if (!stopped())
    shipper_starter.start_shipper(*this);
}

}  // namespace nymph::agent
