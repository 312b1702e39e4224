#include "protocol/protocol.hpp"

#include <array>

#include "common/text.hpp"

namespace nymph::protocol {

// ---------------------------------------------------------------------------------------------------------
// Enumerations (wire names)

namespace {

template <class E, std::size_t N>
std::string_view name_of(E e, const std::array<std::string_view, N>& names) {
  auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : std::string_view("?");
}

template <class E, std::size_t N>
std::optional<E> value_of(std::string_view s, const std::array<std::string_view, N>& names) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 6> kEventStates{"pending", "running", "succeeded",
                                                       "failed",  "cancelled", "lost"};
constexpr std::array<std::string_view, 7> kJobStates{"queued", "running",   "cancelling", "succeeded",
                                                     "failed", "cancelled", "lost"};
constexpr std::array<std::string_view, 7> kAttemptStates{"assigned", "pending",   "running", "succeeded",
                                                         "failed",   "cancelled", "lost"};
constexpr std::array<std::string_view, 2> kCancelReasons{"user", "leaseLost"};
constexpr std::array<std::string_view, 2> kDirectives{"kill", "drain"};
constexpr std::array<std::string_view, 6> kExitReasons{"sigterm", "sigint", "killed", "walltime", "idle", "error"};
constexpr std::array<std::string_view, 3> kWorkerStatuses{"active", "stale", "gone"};
constexpr std::array<std::string_view, 2> kLogStreams{"stdout", "stderr"};
constexpr std::array<std::string_view, 3> kEventReasons{"workerStopping", "leaseExpired", "overCapacity"};

}  // namespace

std::string_view to_string(EventState s) { return name_of(s, kEventStates); }
std::string_view to_string(JobState s) { return name_of(s, kJobStates); }
std::string_view to_string(AttemptState s) { return name_of(s, kAttemptStates); }
std::string_view to_string(CancelReason r) { return name_of(r, kCancelReasons); }
std::string_view to_string(Directive d) { return name_of(d, kDirectives); }
std::string_view to_string(ExitReason r) { return name_of(r, kExitReasons); }
std::string_view to_string(WorkerStatus s) { return name_of(s, kWorkerStatuses); }
std::string_view to_string(LogStream s) { return name_of(s, kLogStreams); }
std::string_view to_string(EventReason r) { return name_of(r, kEventReasons); }
std::optional<EventState> parse_event_state(std::string_view s) { return value_of<EventState>(s, kEventStates); }
std::optional<JobState> parse_job_state(std::string_view s) { return value_of<JobState>(s, kJobStates); }
std::optional<AttemptState> parse_attempt_state(std::string_view s) {
  return value_of<AttemptState>(s, kAttemptStates);
}
std::optional<CancelReason> parse_cancel_reason(std::string_view s) {
  return value_of<CancelReason>(s, kCancelReasons);
}
std::optional<Directive> parse_directive(std::string_view s) { return value_of<Directive>(s, kDirectives); }
std::optional<ExitReason> parse_exit_reason(std::string_view s) { return value_of<ExitReason>(s, kExitReasons); }
std::optional<WorkerStatus> parse_worker_status(std::string_view s) {
  return value_of<WorkerStatus>(s, kWorkerStatuses);
}
std::optional<LogStream> parse_log_stream(std::string_view s) { return value_of<LogStream>(s, kLogStreams); }
std::optional<EventReason> parse_event_reason(std::string_view s) {
  return value_of<EventReason>(s, kEventReasons);
}

bool is_final(JobState s) { return s >= JobState::succeeded; }
bool is_final(EventState s) { return s >= EventState::succeeded; }
bool is_final(AttemptState s) { return s >= AttemptState::succeeded; }

// ---------------------------------------------------------------------------------------------------------
// Ids

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<void> check_id(std::string_view field, std::string_view id) {
  if (is_valid_id(id)) return {};
  return fail("field '" + std::string(field) + "': '" + printable_excerpt(id, 128) +
              "' is not an id (1-128 characters of [0-9A-Za-z_-])");
}

}  // namespace nymph::protocol
