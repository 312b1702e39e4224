#pragma once
// What a peer that can reach the port, with or without a token, can make the HTTP front hold: open
// connections, bytes of request bodies being read, and the pace of accept() once descriptors run out
// (docs/protocol.md sections 4 and 9). Sans-io policy: control/http_server.cpp drives it, tests step it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>

namespace nymph::control {

// The limits of the HTTP front; `nymph-control serve` flags.
struct FrontLimits {
  std::size_t max_connections = 1000;            // open connections (--max-connections)
  std::size_t max_body_memory = 64 << 20;        // bytes of request bodies being read at once (--max-body-memory)
  std::chrono::milliseconds head_timeout{10'000};  // a new connection's first request head (--head-timeout)
};

// The soft limit on open files before and after raise_open_files_limit().
struct OpenFilesLimit {
  std::uint64_t before = 0;
  std::uint64_t after = 0;
};

// Raises the soft RLIMIT_NOFILE of this process to its hard limit (to at most 1 << 20 when the hard limit is
// unlimited). Never fails: `after` is `before` when the limit cannot be read or raised.
OpenFilesLimit raise_open_files_limit();

// The default --max-connections under a soft limit of `open_files` descriptors: the limit minus a reserve for
// the database, log files, the listener and the one connection accepted past the cap (64, or half of a
// limit below 128), at most 16 384. At least 1.
std::size_t default_max_connections(std::uint64_t open_files);

// The open connections and which one to close to make room for a new one. A connection is `waiting` for a
// request head (new or idle keep-alive), `busy` with a request that passed admission (reading its body,
// handled, held, replied to), or `rejecting` (draining the rest of a refused request before closing).
// Only waiting and rejecting connections may be closed to make room: an unauthenticated peer can hold
// nothing else. Rejecting ones go first, then waiting ones, each oldest first (by when they entered that
// state).
class ConnectionTable {
 public:
  using Id = std::uint64_t;
  enum class State { waiting, busy, rejecting };

  // `max_open` >= 1.
  explicit ConnectionTable(std::size_t max_open);

  // What to do with a connection just accepted: `open` it; first `close` `victim` (which is removed from the
  // table now) then open it; or `refuse` it (close it at once) because every open connection is busy.
  struct Admission {
    enum class Kind { open, close_victim, refuse } kind = Kind::open;
    Id victim = 0;
  };
  Admission admit();

  // Registers a newly opened connection, `waiting`. Returns its id.
  Id add();
  // Moves a connection to `state` (the back of that state's queue). Ignored for an id no longer open.
  void set(Id id, State state);
  // Forgets a connection (closed). Idempotent.
  void remove(Id id);
  // True while `id` is open (added, and neither removed nor evicted).
  bool contains(Id id) const { return entries_.count(id) != 0; }
  // The connection to close to make room, removed from the table; nullopt when every connection is busy.
  std::optional<Id> evict();

  std::size_t size() const { return entries_.size(); }
  // The open connections in `state`.
  std::size_t count(State state) const;
  std::size_t max_open() const { return max_open_; }

 private:
  struct Entry {
    State state = State::waiting;
    std::list<Id>::iterator queued;  // position in waiting_ or rejecting_ (unused while busy)
  };
  std::list<Id>* queue_of(State s);

  std::size_t max_open_;
  Id next_id_ = 1;
  std::unordered_map<Id, Entry> entries_;
  std::list<Id> waiting_, rejecting_;
};

// The server-wide budget of bytes of request bodies being read or held until their handler returns. Only
// admitted (authenticated) requests take from it.
class BodyBudget {
 public:
  explicit BodyBudget(std::size_t capacity) : capacity_(capacity) {}
  // Takes `bytes`; false, taking nothing, when they do not fit in what is left.
  bool take(std::size_t bytes);
  // Returns bytes taken before.
  void give_back(std::size_t bytes);
  std::size_t in_use() const { return in_use_; }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::size_t in_use_ = 0;
};

// Bytes one request holds of a BodyBudget; returned when it goes. Movable, not copyable.
class BodyReservation {
 public:
  explicit BodyReservation(BodyBudget& budget) : budget_(&budget) {}
  ~BodyReservation();
  BodyReservation(BodyReservation&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.bytes_ = 0; }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;
  BodyReservation& operator=(BodyReservation&&) = delete;

  // Holds `more` bytes more; false, holding nothing more, when the budget has not that much left.
  bool grow(std::size_t more);
  std::size_t bytes() const { return bytes_; }

 private:
  BodyBudget* budget_;
  std::size_t bytes_ = 0;
};

// How long a connection that has just read and discarded `bytes` of a refused request waits before reading
// more, so that the `draining` connections together discard at most `rate` bytes per second: draining lets a
// client that writes its whole body before reading see the error reply instead of a reset, but must not let
// thousands of clients make the server copy gigabytes for nothing.
std::chrono::microseconds drain_pause(std::size_t bytes, std::size_t draining, std::size_t rate);

// The pause of the accept loop after accept() fails (out of descriptors, EMFILE/ENFILE, and the like):
// 100 ms, doubling up to 1 s, until an accept succeeds. One log line per burst of failures, not one per
// attempt.
class AcceptBackoff {
 public:
  struct Step {
    std::chrono::milliseconds pause;
    bool log;  // the first failure of a burst
  };
  // One more failure.
  Step failed();
  // An accept succeeded: ends the burst. Returns how many failures the burst had (0: there was none).
  std::size_t succeeded();

 private:
  std::size_t failures_ = 0;
};

}  // namespace nymph::control
