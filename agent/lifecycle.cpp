#include "agent/lifecycle.hpp"

#include <algorithm>

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

std::chrono::milliseconds delivery_reserve(std::chrono::milliseconds stop_budget) {
  return std::min<std::chrono::milliseconds>(std::chrono::seconds(5), stop_budget / 3);
}

Lifecycle::Lifecycle(LifecycleConfig config, Clock::time_point now) : config_(config), idle_since_(now) {}

void Lifecycle::registered(Clock::time_point now) {
  if (phase_ == Phase::registering) {
    phase_ = Phase::serving;
    idle_since_ = now;
  }
}

LifecycleActions Lifecycle::start_budget(Clock::time_point now) {
  exit_deadline_ = now + config_.stop_budget;
  hard_kill_at_ = *exit_deadline_ - delivery_reserve(config_.stop_budget);
  // drain_grace lets jobs finish, but SIGTERM must come kill_grace before the hard kill.
  Clock::time_point term_at = std::min(now + config_.drain_grace, *hard_kill_at_ - config_.kill_grace);
  if (drain_deadline_) term_at = std::min(term_at, *drain_deadline_);
  drain_deadline_ = std::max(now, term_at);
  LifecycleActions actions{.report_exit = true};
  if (*drain_deadline_ <= now && !kill_sent_) {
    kill_sent_ = true;
    actions.stop_agent_bound_jobs = true;
  }
  return actions;
}

LifecycleActions Lifecycle::begin_drain(ExitReason reason, std::string message, Clock::time_point now) {
  if (phase_ == Phase::exited) return {};
  if (phase_ == Phase::draining) {
    // A second stop request: stop at once (and, after a drain directive, start the budget).
    LifecycleActions actions;
    if (!exit_deadline_) actions = start_budget(now);
    kill_sent_ = true;
    drain_deadline_ = now;
    actions.stop_agent_bound_jobs = true;
    return actions;
  }
  reason_ = reason;
  message_ = std::move(message);
  if (phase_ == Phase::registering) {
    phase_ = Phase::exited;
    exit_deadline_ = now + config_.stop_budget;
    return {.exit_now = true};
  }
  phase_ = Phase::draining;
  exit_when_idle_ = false;
  return start_budget(now);
}

bool at_walltime(const LifecycleConfig& c, Clock::time_point now) {
  return c.walltime_end && now + c.walltime_lead >= *c.walltime_end;
}

LifecycleActions Lifecycle::on_signal(Signal s, Clock::time_point now) {
  if (phase_ == Phase::draining) return begin_drain(ExitReason::sigterm, {}, now);  // a second stop request
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
    // A drain lets every job finish, Slurm jobs included: no deadline, no budget, /exit at the end.
    reason_ = ExitReason::killed;
    message_ = "drained by the control plane";
    phase_ = Phase::draining;
    exit_when_idle_ = true;
    return {};
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
    if (remaining == 0 || (exit_deadline_ && now >= *exit_deadline_)) {
      phase_ = Phase::exited;
      return {.exit_now = true};
    }
    LifecycleActions actions;
    if (drain_deadline_ && now >= *drain_deadline_ && !kill_sent_) {
      kill_sent_ = true;
      actions.stop_agent_bound_jobs = true;
    }
    if (hard_kill_at_ && now >= *hard_kill_at_ && !hard_kill_sent_) {
      hard_kill_sent_ = true;
      actions.kill_agent_bound_jobs = true;
    }
    return actions;
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
  if (phase_ == Phase::draining) {
    if (drain_deadline_ && !kill_sent_) consider(*drain_deadline_);
    if (hard_kill_at_ && !hard_kill_sent_) consider(*hard_kill_at_);
    if (exit_deadline_) consider(*exit_deadline_);
  }
  return next;
}

bool Lifecycle::fits_before_walltime(std::optional<std::chrono::milliseconds> timeout, Clock::time_point now) const {
  if (!config_.walltime_end) return true;
  // A job without a timeout was placed here because no worker serves longer (docs/protocol.md): it may start
  // until the lead, and is stopped as `lost`/workerStopping (re-queued) if it is still running then.
  if (!timeout) return now + config_.walltime_lead < *config_.walltime_end;
  return now + *timeout + config_.walltime_lead <= *config_.walltime_end;
}

}  // namespace nymph::agent
