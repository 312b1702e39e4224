#pragma once
// The one place where wire types (protocol/) meet what the agent's runners and lifecycle use: a job
// assignment becomes a runner JobSpec, a runner JobUpdate becomes an event, and the wire's cancel reasons,
// directives and exit reasons become the agent's own enums and back. Pure functions, no I/O.
#include <chrono>
#include <cstdint>
#include <string>

#include "agent/lifecycle.hpp"
#include "protocol/protocol.hpp"
#include "runners/runner.hpp"

namespace nymph::agent {

// What one assigned attempt asks its runner to do: ids, kind, argv or command, env, timeout (fractional
// seconds rounded up to whole seconds, within 0..protocol::kMaxTimeoutS), runConfig.slurm (only when it is an
// object), and for training the profile name and parameters.
runners::JobSpec to_runner_spec(const protocol::JobAssignment& job);

// The job's timeoutS as whole seconds, rounded up and clamped to 0..kMaxTimeoutS; nullopt when it has none.
std::optional<std::chrono::seconds> timeout_of(const protocol::JobSpec& spec);

// The wire state for a runner state (the same six states).
protocol::EventState to_event_state(runners::JobState state);

// The event that reports `update` for lease `lease_id` as number `seq`, stamped with the worker's wall time `at`.
protocol::EventRequest to_event(const std::string& lease_id, std::int64_t seq, const runners::JobUpdate& update,
                                std::chrono::system_clock::time_point at);

// The wire reason of a lost attempt (the same three reasons); to_event sets it on `lost` events only.
protocol::EventReason to_event_reason(runners::LostReason reason);

// The wire name of a log stream ("stdout" / "stderr").
protocol::LogStream to_log_stream(runners::Stream stream);

// How a cancel order stops an attempt: a user's cancel, or the lease lost.
runners::StopReason to_stop_reason(protocol::CancelReason reason);

// The lifecycle's directive for a directive in a poll reply.
Directive to_directive(protocol::Directive directive);

// The wire exit reason for the lifecycle's (the same six reasons).
protocol::ExitReason to_wire_exit_reason(ExitReason reason);

}  // namespace nymph::agent
