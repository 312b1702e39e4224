#pragma once
// The JSON shape of every /v1 wire struct, listed once: one table per struct, read by protocol/json.cpp for
// both directions (decoding and encoding). Internal to nymph::protocol; include protocol/json.hpp instead.
//
// An entry is req("key", &S::member) (absent or null is an error when decoding), opt("key", &S::member)
// (absent or null leaves the default), or flat(&S::member) (the member struct's fields appear directly in
// this object). Encoding writes every entry in table order; an absent std::optional is omitted, unless the
// entry says Emit::null_when_absent (an explicit null), and Emit::unless_empty omits an empty container.
#include <string_view>
#include <tuple>

#include "protocol/types.hpp"

namespace nymph::protocol::fields {

enum class Need { optional, required };
enum class Emit { normal, null_when_absent, unless_empty };

template <class S, class M>
struct Field {
  std::string_view key;
  M S::*member;
  Need need = Need::optional;
  Emit emit = Emit::normal;
};

template <class S, class Sub>
struct Flat {
  Sub S::*member;
};

template <class S, class M>
constexpr Field<S, M> req(std::string_view key, M S::*member, Emit emit = Emit::normal) {
  return {key, member, Need::required, emit};
}
template <class S, class M>
constexpr Field<S, M> opt(std::string_view key, M S::*member, Emit emit = Emit::normal) {
  return {key, member, Need::optional, emit};
}
template <class S, class Sub>
constexpr Flat<S, Sub> flat(Sub S::*member) {
  return {member};
}

// Wire<T>::fields is T's table; only the structs below have one.
template <class T>
struct Wire;

template <class T>
concept HasFields = requires { Wire<T>::fields; };

template <>
struct Wire<ErrorBody> {
  using S = ErrorBody;
  static constexpr auto fields = std::tuple{
      req("code", &S::code),
      opt("message", &S::message),
      opt("expectedOffset", &S::expected_offset),
      opt("lastSeq", &S::last_seq)};
};
template <>
struct Wire<AttemptRef> {
  using S = AttemptRef;
  static constexpr auto fields = std::tuple{
      req("jobId", &S::job_id),
      req("leaseId", &S::lease_id)};
};
template <>
struct Wire<SlurmAllocation> {
  using S = SlurmAllocation;
  static constexpr auto fields = std::tuple{
      req("jobId", &S::job_id),
      opt("partition", &S::partition),
      opt("endTime", &S::end_time),
      opt("leadS", &S::lead_s)};
};
template <>
struct Wire<Payload> {
  using S = Payload;
  static constexpr auto fields = std::tuple{
      req("profile", &S::profile),
      opt("parameters", &S::parameters)};
};
template <>
struct Wire<JobSpec> {
  using S = JobSpec;
  static constexpr auto fields = std::tuple{
      opt("argv", &S::argv),
      opt("command", &S::command),
      opt("env", &S::env),
      opt("timeoutS", &S::timeout_s),
      opt("runConfig", &S::run_config),
      opt("payload", &S::payload)};
};
template <>
struct Wire<RegisterRequest> {
  using S = RegisterRequest;
  static constexpr auto fields = std::tuple{
      req("launchId", &S::launch_id),
      opt("label", &S::label),
      req("hostname", &S::hostname),
      opt("pid", &S::pid),
      opt("version", &S::version),
      opt("protocol", &S::protocol),
      opt("backend", &S::backend),
      req("runners", &S::runners),
      opt("tags", &S::tags),
      opt("capacity", &S::capacity),
      opt("profiles", &S::profiles),
      opt("slurm", &S::slurm),
      opt("running", &S::running),
      opt("identity", &S::identity),
      opt("generation", &S::generation)};
};
template <>
struct Wire<CancelOrder> {
  using S = CancelOrder;
  static constexpr auto fields = std::tuple{
      req("jobId", &S::job_id),
      opt("leaseId", &S::lease_id),
      req("reason", &S::reason)};
};
template <>
struct Wire<RegisterResponse> {
  using S = RegisterResponse;
  static constexpr auto fields = std::tuple{
      req("workerId", &S::worker_id),
      opt("workerToken", &S::worker_token, Emit::unless_empty),
      opt("pollTimeoutS", &S::poll_timeout_s),
      opt("leaseTtlS", &S::lease_ttl_s),
      opt("runnerLeaseTtlS", &S::runner_lease_ttl_s, Emit::unless_empty),
      opt("staleAfterS", &S::stale_after_s),
      opt("protocol", &S::protocol),
      opt("cancel", &S::cancel),
      opt("lastSeq", &S::last_seq, Emit::unless_empty)};
};
template <>
struct Wire<PollRequest> {
  using S = PollRequest;
  static constexpr auto fields = std::tuple{
      opt("free", &S::free),
      opt("running", &S::running),
      opt("draining", &S::draining)};
};
template <>
struct Wire<JobAssignment> {
  using S = JobAssignment;
  static constexpr auto fields = std::tuple{
      req("jobId", &S::job_id),
      req("attempt", &S::attempt),
      req("leaseId", &S::lease_id),
      req("runner", &S::runner),
      req("kind", &S::kind),
      req("spec", &S::spec),
      opt("leaseTtlS", &S::lease_ttl_s)};
};
template <>
struct Wire<PollResponse> {
  using S = PollResponse;
  static constexpr auto fields = std::tuple{
      opt("jobs", &S::jobs),
      opt("cancel", &S::cancel),
      opt("directive", &S::directive, Emit::null_when_absent)};
};
template <>
struct Wire<EventRequest> {
  using S = EventRequest;
  static constexpr auto fields = std::tuple{
      req("leaseId", &S::lease_id),
      req("seq", &S::seq),
      req("state", &S::state),
      opt("exitCode", &S::exit_code),
      opt("signal", &S::signal),
      opt("message", &S::message),
      opt("slurmJobId", &S::slurm_job_id),
      opt("result", &S::result),
      opt("at", &S::at),
      opt("reason", &S::reason),
      opt("takeNext", &S::take_next)};
};
template <>
struct Wire<EventResponse> {
  using S = EventResponse;
  static constexpr auto fields = std::tuple{
      opt("duplicate", &S::duplicate),
      req("jobState", &S::job_state),
      opt("jobs", &S::jobs, Emit::unless_empty),
      opt("slotHeld", &S::slot_held)};
};
template <>
struct Wire<LogAppendResponse> {
  using S = LogAppendResponse;
  static constexpr auto fields = std::tuple{
      req("nextOffset", &S::next_offset)};
};
template <>
struct Wire<ExitRequest> {
  using S = ExitRequest;
  static constexpr auto fields = std::tuple{
      req("exitReason", &S::exit_reason),
      opt("message", &S::message)};
};
template <>
struct Wire<JobSubmission> {
  using S = JobSubmission;
  static constexpr auto fields = std::tuple{
      opt("runner", &S::runner, Emit::unless_empty),
      opt("kind", &S::kind),
      flat(&S::spec),
      opt("requiredTags", &S::required_tags),
      opt("maxAttempts", &S::max_attempts)};
};
template <>
struct Wire<EventInfo> {
  using S = EventInfo;
  static constexpr auto fields = std::tuple{
      opt("attempt", &S::attempt),
      opt("leaseId", &S::lease_id),
      opt("seq", &S::seq),
      req("state", &S::state),
      opt("exitCode", &S::exit_code),
      opt("signal", &S::signal),
      opt("message", &S::message),
      opt("slurmJobId", &S::slurm_job_id),
      opt("result", &S::result),
      opt("at", &S::at),
      opt("receivedAt", &S::received_at),
      opt("reason", &S::reason)};
};
template <>
struct Wire<AttemptInfo> {
  using S = AttemptInfo;
  static constexpr auto fields = std::tuple{
      opt("attempt", &S::attempt),
      opt("leaseId", &S::lease_id),
      opt("workerId", &S::worker_id),
      req("state", &S::state),
      opt("exitCode", &S::exit_code),
      opt("signal", &S::signal),
      opt("message", &S::message),
      opt("slurmJobId", &S::slurm_job_id),
      opt("assignedAt", &S::assigned_at),
      opt("finishedAt", &S::finished_at)};
};
template <>
struct Wire<JobInfo> {
  using S = JobInfo;
  static constexpr auto fields = std::tuple{
      req("id", &S::id),
      req("state", &S::state),
      opt("runner", &S::runner),
      opt("kind", &S::kind),
      opt("spec", &S::spec),
      opt("requiredTags", &S::required_tags),
      opt("maxAttempts", &S::max_attempts),
      opt("attempt", &S::attempt),
      opt("workerId", &S::worker_id),
      opt("cancelRequested", &S::cancel_requested),
      opt("exitCode", &S::exit_code),
      opt("signal", &S::signal),
      opt("message", &S::message),
      opt("result", &S::result),
      opt("createdAt", &S::created_at),
      opt("updatedAt", &S::updated_at),
      opt("finishedAt", &S::finished_at),
      opt("attempts", &S::attempts, Emit::unless_empty),
      opt("events", &S::events, Emit::unless_empty)};
};
template <>
struct Wire<JobList> {
  using S = JobList;
  static constexpr auto fields = std::tuple{
      req("jobs", &S::jobs),
      opt("nextCursor", &S::next_cursor)};
};
template <>
struct Wire<WorkerInfo> {
  using S = WorkerInfo;
  static constexpr auto fields = std::tuple{
      req("id", &S::id),
      opt("launchId", &S::launch_id),
      opt("label", &S::label),
      opt("hostname", &S::hostname),
      opt("pid", &S::pid),
      opt("version", &S::version),
      opt("protocol", &S::protocol),
      opt("backend", &S::backend),
      opt("runners", &S::runners),
      opt("tags", &S::tags),
      opt("capacity", &S::capacity),
      opt("profiles", &S::profiles),
      opt("slurm", &S::slurm),
      opt("identity", &S::identity),
      opt("generation", &S::generation),
      req("status", &S::status),
      opt("exitReason", &S::exit_reason, Emit::null_when_absent),
      opt("exitMessage", &S::exit_message),
      opt("directive", &S::directive, Emit::null_when_absent),
      opt("registeredAt", &S::registered_at),
      opt("lastSeen", &S::last_seen),
      opt("runningJobs", &S::running_jobs)};
};
template <>
struct Wire<PurgeRequest> {
  using S = PurgeRequest;
  static constexpr auto fields = std::tuple{
      opt("olderThanS", &S::older_than_s)};
};
template <>
struct Wire<PurgeResponse> {
  using S = PurgeResponse;
  static constexpr auto fields = std::tuple{
      req("jobs", &S::jobs),
      req("workers", &S::workers),
      opt("logFiles", &S::log_files),
      opt("olderThanS", &S::older_than_s)};
};
template <>
struct Wire<WorkerList> {
  using S = WorkerList;
  static constexpr auto fields = std::tuple{
      req("workers", &S::workers),
      opt("nextCursor", &S::next_cursor)};
};
template <>
struct Wire<TokenInfo> {
  using S = TokenInfo;
  static constexpr auto fields = std::tuple{
      req("id", &S::id),
      opt("name", &S::name),
      req("role", &S::role),
      opt("scopeTags", &S::scope_tags),
      opt("scopeRunners", &S::scope_runners),
      opt("createdAt", &S::created_at),
      opt("lastUsedAt", &S::last_used_at, Emit::null_when_absent),
      opt("revokedAt", &S::revoked_at, Emit::null_when_absent)};
};
template <>
struct Wire<TokenList> {
  using S = TokenList;
  static constexpr auto fields = std::tuple{
      req("tokens", &S::tokens)};
};
template <>
struct Wire<RevokeRequest> {
  using S = RevokeRequest;
  static constexpr auto fields = std::tuple{
      req("token", &S::token)};
};
template <>
struct Wire<RevokeResponse> {
  using S = RevokeResponse;
  static constexpr auto fields = std::tuple{
      req("revoked", &S::revoked),
      opt("workers", &S::workers)};
};

}  // namespace nymph::protocol::fields
