#include "agent/lifecycle.hpp"

namespace nymph::agent {

std::string_view to_string(ExitReason r) {
  switch (r) {
    case ExitReason::sigterm: return "sigterm";
    case ExitReason::sigint: return "sigint";
    case ExitReason::killed: return "killed";
    case ExitReason::walltime: return "walltime";
    case ExitReason::idle: return "idle";
    case ExitReason::error: return "error";
  }
  return "error";
}

int exit_status(ExitReason r) {
  switch (r) {
    case ExitReason::sigterm: return 143;
    case ExitReason::sigint: return 130;
    case ExitReason::error: return 1;
    default: return 0;
  }
}

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::registering: return "registering";
    case Phase::serving: return "serving";
    case Phase::draining: return "draining";
    case Phase::exited: return "exited";
  }
  return "exited";
}

Lifecycle::Lifecycle(LifecycleConfig config, Clock::time_point now) : config_(config), idle_since_(now) {}

void Lifecycle::registered(Clock::time_point now) {
  if (phase_ == Phase::registering) {
    phase_ = Phase::serving;
    idle_since_ = now;
  }
}

LifecycleActions Lifecycle::begin_drain(ExitReason reason, std::string message, Clock::time_point now) {
  if (phase_ == Phase::exited) return {};
  if (phase_ == Phase::draining) {
    // A second stop request: stop at once.
    return {.stop_agent_bound_jobs = true, .exit_now = false};
  }
  reason_ = reason;
  message_ = std::move(message);
  if (phase_ == Phase::registering) {
    phase_ = Phase::exited;
    return {.exit_now = true};
  }
  phase_ = Phase::draining;
  drain_deadline_ = now + config_.drain_grace;
  exit_when_idle_ = false;
  return {};
}

bool at_walltime(const LifecycleConfig& c, Clock::time_point now) {
  return c.walltime_end && now + c.walltime_lead >= *c.walltime_end;
}

LifecycleActions Lifecycle::on_signal(Signal s, Clock::time_point now) {
  if (phase_ == Phase::draining) {
    kill_sent_ = true;
    drain_deadline_ = now;
    return {.stop_agent_bound_jobs = true};
  }
  switch (s) {
    case Signal::usr1: return begin_drain(ExitReason::walltime, "the allocation's walltime is near (SIGUSR1)", now);
    case Signal::interrupt: return begin_drain(ExitReason::sigint, "stopped by SIGINT", now);
    case Signal::term:
      if (at_walltime(config_, now)) return begin_drain(ExitReason::walltime, "SIGTERM at the allocation's walltime", now);
      return begin_drain(ExitReason::sigterm, "stopped by SIGTERM", now);
  }
  return {};
}

LifecycleActions Lifecycle::on_directive(Directive d, Clock::time_point now) {
  if (d == Directive::kill) return begin_drain(ExitReason::killed, "stopped by the control plane", now);
  if (d == Directive::drain && phase_ == Phase::serving) {
    auto actions = begin_drain(ExitReason::killed, "drained by the control plane", now);
    drain_deadline_.reset();  // a drain lets every job finish, Slurm jobs included
    exit_when_idle_ = true;
    return actions;
  }
  return {};
}

LifecycleActions Lifecycle::on_fatal(std::string message) {
  if (phase_ == Phase::exited) return {};
  reason_ = ExitReason::error;
  message_ = std::move(message);
  phase_ = Phase::exited;
  return {.stop_agent_bound_jobs = true, .exit_now = true};
}

LifecycleActions Lifecycle::on_tick(int agent_bound_jobs, int all_jobs, Clock::time_point now) {
  if (phase_ == Phase::serving) {
    if (all_jobs > 0) {
      was_idle_ = false;
    } else if (!was_idle_) {
      was_idle_ = true;
      idle_since_ = now;
    }
    if (at_walltime(config_, now))
      return begin_drain(ExitReason::walltime, "the allocation's walltime is near", now);
    if (config_.idle_exit && all_jobs == 0 && now - idle_since_ >= *config_.idle_exit) {
      reason_ = ExitReason::idle;
      message_ = "no work for the configured idle_exit time";
      phase_ = Phase::exited;
      return {.exit_now = true};
    }
    return {};
  }
  if (phase_ == Phase::draining) {
    int remaining = exit_when_idle_ ? all_jobs : agent_bound_jobs;
    if (remaining == 0) {
      phase_ = Phase::exited;
      return {.exit_now = true};
    }
    if (drain_deadline_ && now >= *drain_deadline_ && !kill_sent_) {
      kill_sent_ = true;
      return {.stop_agent_bound_jobs = true};
    }
  }
  return {};
}

std::optional<Clock::time_point> Lifecycle::next_deadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  if (phase_ == Phase::serving) {
    if (config_.idle_exit && was_idle_) consider(idle_since_ + *config_.idle_exit);
    if (config_.walltime_end) consider(*config_.walltime_end - config_.walltime_lead);
  }
  if (phase_ == Phase::draining && drain_deadline_ && !kill_sent_) consider(*drain_deadline_);
  return next;
}

bool Lifecycle::fits_before_walltime(std::optional<std::chrono::milliseconds> timeout, Clock::time_point now) const {
  if (!config_.walltime_end) return true;
  if (!timeout) return false;  // an unbounded job cannot be promised to finish inside the allocation
  return now + *timeout + config_.walltime_lead <= *config_.walltime_end;
}

}  // namespace nymph::agent
