#include "control/connection_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <utility>

namespace nymph::control {

using namespace std::chrono_literals;

OpenFilesLimit raise_open_files_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return {};
  OpenFilesLimit out{lim.rlim_cur, lim.rlim_cur};
  rlim_t target = lim.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : lim.rlim_max;
  if (target <= lim.rlim_cur) return out;
  lim.rlim_cur = target;
  if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) out.after = target;
  return out;
}

std::size_t default_max_connections(std::uint64_t open_files) {
  std::uint64_t reserve = std::min<std::uint64_t>(64, open_files / 2);
  std::uint64_t n = std::min<std::uint64_t>(open_files - reserve, 16'384);
  return static_cast<std::size_t>(std::max<std::uint64_t>(n, 1));
}

ConnectionTable::ConnectionTable(std::size_t max_open) : max_open_(std::max<std::size_t>(max_open, 1)) {}

std::list<ConnectionTable::Id>* ConnectionTable::queue_of(State s) {
  switch (s) {
    case State::waiting: return &waiting_;
    case State::rejecting: return &rejecting_;
    case State::busy: return nullptr;
  }
  return nullptr;
}

ConnectionTable::Admission ConnectionTable::admit() {
  if (entries_.size() < max_open_) return {};
  if (auto victim = evict()) return {Admission::Kind::close_victim, *victim};
  return {Admission::Kind::refuse, 0};
}

ConnectionTable::Id ConnectionTable::add() {
  Id id = next_id_++;
  waiting_.push_back(id);
  entries_.emplace(id, Entry{State::waiting, std::prev(waiting_.end())});
  return id;
}

void ConnectionTable::set(Id id, State state) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (auto* q = queue_of(e.state)) q->erase(e.queued);
  e.state = state;
  if (auto* q = queue_of(state)) {
    q->push_back(id);
    e.queued = std::prev(q->end());
  }
}

void ConnectionTable::remove(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (auto* q = queue_of(it->second.state)) q->erase(it->second.queued);
  entries_.erase(it);
}

std::optional<ConnectionTable::Id> ConnectionTable::evict() {
  auto& q = rejecting_.empty() ? waiting_ : rejecting_;
  if (q.empty()) return std::nullopt;
  Id victim = q.front();
  remove(victim);
  return victim;
}

std::size_t ConnectionTable::count(State state) const {
  switch (state) {
    case State::waiting: return waiting_.size();
    case State::rejecting: return rejecting_.size();
    case State::busy: return entries_.size() - waiting_.size() - rejecting_.size();
  }
  return 0;
}

std::chrono::microseconds drain_pause(std::size_t bytes, std::size_t draining, std::size_t rate) {
  long double seconds = static_cast<long double>(bytes) * static_cast<long double>(std::max<std::size_t>(draining, 1)) /
                        static_cast<long double>(std::max<std::size_t>(rate, 1));
  return std::chrono::microseconds(static_cast<std::int64_t>(seconds * 1e6L));
}

bool BodyBudget::take(std::size_t bytes) {
  if (bytes > capacity_ - in_use_) return false;
  in_use_ += bytes;
  return true;
}

void BodyBudget::give_back(std::size_t bytes) { in_use_ -= std::min(bytes, in_use_); }

BodyReservation::~BodyReservation() { budget_->give_back(bytes_); }

bool BodyReservation::grow(std::size_t more) {
  if (!budget_->take(more)) return false;
  bytes_ += more;
  return true;
}

AcceptBackoff::Step AcceptBackoff::failed() {
  ++failures_;
  auto pause = 100ms * (1 << std::min<std::size_t>(failures_ - 1, 4));
  return {std::min<std::chrono::milliseconds>(pause, 1000ms), failures_ == 1};
}

std::size_t AcceptBackoff::succeeded() { return std::exchange(failures_, 0); }

}  // namespace nymph::control
