#include "agent/job_mapping.hpp"

#include <algorithm>
#include <cmath>

namespace nymph::agent {

std::optional<std::chrono::seconds> timeout_of(const protocol::JobSpec& spec) {
  if (!spec.timeout_s) return std::nullopt;
  const double seconds = std::ceil(std::clamp(*spec.timeout_s, 0.0, protocol::kMaxTimeoutS));
  return std::chrono::seconds(static_cast<long long>(seconds));
}

runners::JobSpec to_runner_spec(const protocol::JobAssignment& job) {
  runners::JobSpec spec;
  spec.job_id = job.job_id;
  spec.attempt = job.attempt;
  spec.lease_id = job.lease_id;
  spec.kind = job.kind;
  if (job.spec.argv) spec.argv = *job.spec.argv;
  spec.command = job.spec.command;
  spec.env = job.spec.env;
  spec.timeout = timeout_of(job.spec);
  if (auto it = job.spec.run_config.find("slurm"); it != job.spec.run_config.end() && it->value().is_object())
    spec.slurm_options = it->value().as_object();
  if (job.spec.payload) {
    spec.profile = job.spec.payload->profile;
    spec.parameters = job.spec.payload->parameters;
  }
  return spec;
}

protocol::EventState to_event_state(runners::JobState state) {
  using runners::JobState;
  switch (state) {
    case JobState::pending: return protocol::EventState::pending;
    case JobState::running: return protocol::EventState::running;
    case JobState::succeeded: return protocol::EventState::succeeded;
    case JobState::failed: return protocol::EventState::failed;
    case JobState::cancelled: return protocol::EventState::cancelled;
    case JobState::lost: return protocol::EventState::lost;
  }
  return protocol::EventState::failed;
}

protocol::EventRequest to_event(const std::string& lease_id, std::int64_t seq, const runners::JobUpdate& update,
                                std::chrono::system_clock::time_point at) {
  protocol::EventRequest r;
  r.lease_id = lease_id;
  r.seq = seq;
  r.state = to_event_state(update.state);
  r.exit_code = update.exit_code;
  r.signal = update.signal;
  r.message = update.message;
  r.slurm_job_id = update.slurm_job_id;
  r.result = update.result;
  r.at = protocol::format_time(at);
  if (update.state == runners::JobState::lost && update.reason) r.reason = to_event_reason(*update.reason);
  return r;
}

protocol::EventReason to_event_reason(runners::LostReason reason) {
  switch (reason) {
    case runners::LostReason::worker_stopping: return protocol::EventReason::worker_stopping;
    case runners::LostReason::lease_expired: return protocol::EventReason::lease_expired;
    case runners::LostReason::over_capacity: return protocol::EventReason::over_capacity;
  }
  return protocol::EventReason::worker_stopping;
}

protocol::LogStream to_log_stream(runners::Stream stream) {
  return stream == runners::Stream::out ? protocol::LogStream::out : protocol::LogStream::err;
}

runners::StopReason to_stop_reason(protocol::CancelReason reason) {
  return reason == protocol::CancelReason::user ? runners::StopReason::user_cancel : runners::StopReason::lease_lost;
}

Directive to_directive(protocol::Directive directive) {
  return directive == protocol::Directive::kill ? Directive::kill : Directive::drain;
}

protocol::ExitReason to_wire_exit_reason(ExitReason reason) {
  switch (reason) {
    case ExitReason::sigterm: return protocol::ExitReason::sigterm;
    case ExitReason::sigint: return protocol::ExitReason::sigint;
    case ExitReason::killed: return protocol::ExitReason::killed;
    case ExitReason::walltime: return protocol::ExitReason::walltime;
    case ExitReason::idle: return protocol::ExitReason::idle;
    case ExitReason::error: return protocol::ExitReason::error;
  }
  return protocol::ExitReason::error;
}

}  // namespace nymph::agent
