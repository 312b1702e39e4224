#include "agent/run_main.hpp"

#include <csignal>
#include <iostream>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "agent/chain_keeper.hpp"
#include "agent/chain_record.hpp"
#include "agent/config.hpp"
#include "agent/daemon.hpp"
#include "agent/managed_chains.hpp"
#include "agent/manager_lease.hpp"
#include "agent/probe.hpp"
#include "common/logging.hpp"
#include "common/spawn.hpp"
#include "common/ulid.hpp"
#include "protocol/protocol.hpp"
#include "nymph/version.hpp"
#include "platform/environment.hpp"
#include "platform/process_privacy.hpp"
#include "runners/process_runner.hpp"
#include "runners/profile.hpp"
#include "runners/slurm/slurm_runner.hpp"
#include "slurm/child_command_runner.hpp"
#include "slurm/commands.hpp"

namespace nymph::agent {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

// Start-up failure: printed once, exit status 2.
struct StartupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Another manager of this identity holds the lease: printed once, exit status 1.
struct LeaseRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

AgentConfig load_or_throw(const RunArgs& args) {
  auto config = load_config(args.config_file);
  if (!config) throw StartupError(config.error().message);
  for (const auto& entry : args.training_profiles) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      throw StartupError("--training-profile '" + entry + "': expected NAME=/absolute/script");
    ProfileConfig p{.name = entry.substr(0, eq), .script = entry.substr(eq + 1)};
    if (!p.script.is_absolute()) throw StartupError("--training-profile " + p.name + ": the script path must be absolute");
    config->profiles.push_back(std::move(p));
  }
  return std::move(*config);
}

// The approved training profiles; refuses to start (naming the profile and why) unless every script is an
// absolute path to an existing regular file that group and others cannot write.
runners::ProfileCatalog profiles_or_throw(const AgentConfig& c) {
  std::vector<runners::Profile> profiles;
  for (const auto& p : c.profiles) profiles.push_back({p.name, p.script, p.allowed_parameters, p.max_input_bytes});
  runners::ProfileCatalog catalog(std::move(profiles));
  if (auto r = runners::check_profiles(catalog); !r) throw StartupError(r.error().message);
  return catalog;
}

// Probes the host on `ioc` (inside an allocation, squeue says which; see agent/probe.hpp) before anything
// else runs there.
ProbeResult probe_or_throw(const AgentConfig& c, asio::io_context& ioc, std::shared_ptr<spdlog::logger> log) {
  ProbeInputs in = probe_inputs_from_environment();
  in.slurm_runner_enabled = c.slurm.enabled != "false";
  if (c.slurm.sbatch != "sbatch") in.sbatch_override = c.slurm.sbatch;
  in.squeue = c.slurm.squeue;
  in.command_timeout = c.slurm.command_timeout;
  slurm::ChildCommandRunner commands;
  std::optional<ProbeResult> probe;
  asio::co_spawn(ioc, agent::probe(std::move(in), commands, std::move(log)), [&](std::exception_ptr e, ProbeResult r) {
    if (e) std::rethrow_exception(e);
    probe = std::move(r);
  });
  ioc.run();
  ioc.restart();
  if (c.slurm.enabled == "true" && !probe->sbatch_path)
    throw StartupError("[runners.slurm] enabled = true but sbatch was not found on PATH");
  return std::move(*probe);
}

// A launch id for a worker started without [worker] launch_id (a `nymph run` by hand): a new ULID.
std::string new_launch_id() {
  UlidGenerator ids;
  auto id = ids.next();
  if (!id) throw StartupError("cannot make a launch id: " + id.error().message);
  return id->str();
}

// Who this manager is and where its state lives (docs/config.md, [manager]).
struct ManagerIdentity {
  std::string cluster;
  std::string identity;  // "<user>@<cluster>"
  fs::path state_dir;
};

// The cluster: [manager] cluster, else ClusterName from `scontrol show config` (run on `ioc`, bounded by
// command_timeout), else the short host name.
std::string resolve_cluster(const AgentConfig& c, asio::io_context& ioc, const std::string& hostname,
                            const std::shared_ptr<spdlog::logger>& log) {
  if (!c.manager.cluster.empty()) return c.manager.cluster;
  slurm::ChildCommandRunner commands;
  std::optional<std::string> found;
  std::vector<std::string> argv = slurm::show_config_argv("scontrol");
  asio::co_spawn(ioc, commands.run(argv, slurm::scrubbed_environment(), c.slurm.command_timeout),
                 [&](std::exception_ptr e, Result<slurm::CommandResult> r) {
                   if (e) std::rethrow_exception(e);
                   if (r && r->exit_code == 0) found = parse_cluster_name(r->out);
                   else log->debug("scontrol show config: {}", r ? r->err : r.error().message);
                 });
  ioc.run();
  ioc.restart();
  if (found) return *found;
  std::string host = is_valid_cluster_name(hostname) ? hostname : "localhost";
  log->info("no [manager] cluster and no ClusterName from `scontrol show config`: the cluster is named after this "
            "host, {}",
            host);
  return host;
}

ManagerIdentity resolve_identity(const AgentConfig& c, asio::io_context& ioc, const std::string& hostname,
                                 const std::shared_ptr<spdlog::logger>& log) {
  ManagerIdentity m;
  m.cluster = resolve_cluster(c, ioc, hostname, log);
  m.identity = current_user_name() + "@" + m.cluster;
  if (!c.manager.state_dir.empty()) {
    m.state_dir = fs::absolute(c.manager.state_dir).lexically_normal();
  } else {
    auto home = home_directory();
    if (home.empty()) throw StartupError("[manager] state_dir is not set and there is no home directory (HOME)");
    m.state_dir = default_manager_state_dir(home, m.cluster);
  }
  return m;
}

// Acquires the manager lease (after making its holder hand over, with --replace). Throws LeaseRefused when a
// live manager holds it, StartupError for other failures.
HeldLease acquire_lease(const AgentConfig& c, const ManagerIdentity& m, const RunArgs& args,
                        const std::string& launch_id, const std::string& hostname,
                        const std::shared_ptr<spdlog::logger>& log) {
  const std::string host = short_host_name().empty() ? hostname : short_host_name();
  const auto start = process_start_time(::getpid());
  if (!start) throw StartupError("cannot read /proc/self/stat: the manager lease needs the process start time");
  ManagerLease mine{.host = host, .pid = ::getpid(), .pid_start_time = *start, .launch_id = launch_id,
                    .heartbeat_interval = c.manager.heartbeat_interval};
  if (args.replace) {
    // The holder exits within its stop budget ([worker] stop_timeout, at most 35 s) after SIGTERM; wait that
    // long and a margin for its last heartbeat to be read (another host's holder sees the request at its next
    // heartbeat).
    auto bound = kMaxStopTimeout + c.manager.heartbeat_interval + std::chrono::seconds(10);
    log->info("--replace: asking the manager of {} to hand over (waiting up to {} s)", m.identity,
              std::chrono::duration_cast<std::chrono::seconds>(bound).count());
    auto requester = describe_holder(mine);
    if (auto r = replace_holder(m.state_dir, host, requester, bound); !r) throw LeaseRefused(r.error().message);
  }
  auto held = HeldLease::acquire(m.state_dir, mine, m.identity);
  if (!held) throw LeaseRefused(held.error().message);
  log->info("manager {}: holding {} (heartbeat every {} ms)", m.identity, held->path().string(),
            c.manager.heartbeat_interval.count());
  return std::move(*held);
}

// Rewrites the lease every interval until cancelled; asks the daemon to drain when the lease was lost (another
// manager judged this one gone and took over) or another manager asked for it (--replace from another host).
asio::awaitable<void> keep_lease(HeldLease& lease, std::chrono::milliseconds interval, Daemon& daemon,
                                 std::shared_ptr<spdlog::logger> log) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(interval);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto beat = lease.heartbeat(std::chrono::system_clock::now());
    if (!beat) {
      log->warn("manager lease heartbeat failed (retrying next interval): {}", beat.error().message);
      continue;
    }
    if (*beat == HeartbeatOutcome::lost) {
      log->error("the manager lease {} was taken over by another manager: stopping", lease.path().string());
      daemon.on_signal(Signal::term);
      co_return;
    }
    if (*beat == HeartbeatOutcome::replace_requested) {
      log->info("another manager asked to replace this one (--replace): draining and handing over");
      daemon.on_signal(Signal::term);
      co_return;
    }
  }
}

DaemonSettings make_settings(const AgentConfig& c, const ProbeResult& probe, const fs::path& cwd, int generation) {
  DaemonSettings s;
  s.lifecycle.walltime_lead = c.worker.walltime_lead;
  if (c.chain.keep) s.generation = generation;
  s.launch_id = c.worker.launch_id.empty() ? new_launch_id() : c.worker.launch_id;
  s.label = c.worker.label.empty() ? probe.hostname : c.worker.label;
  s.hostname = probe.hostname;
  s.backend = probe.backend;
  if (probe.allocation) {
    const SlurmAllocation& a = *probe.allocation;
    s.allocation = protocol::SlurmAllocation{.job_id = a.job_id, .partition = a.partition};
    if (a.end_time) s.allocation->end_time = protocol::format_time(*a.end_time);
    s.allocation->lead_s = std::chrono::duration_cast<std::chrono::seconds>(s.lifecycle.walltime_lead).count();
    s.lifecycle.walltime_end = a.walltime_end;
  }
  s.lifecycle.stop_budget = exit_budget(c.worker.stop_timeout, probe.allocation);
  s.lifecycle.kill_grace = c.process.kill_grace;
  s.tags = probe.tags;
  for (const auto& [k, v] : c.worker.tags) s.tags[k] = v;
  if (c.process.enabled) s.capacity["process"] = c.worker.max_process_jobs;
  for (const auto& p : c.profiles) s.profiles.push_back(p.name);
  s.poll_timeout = c.server.poll_timeout;
  s.lifecycle.drain_grace = c.worker.drain_grace;
  s.lifecycle.idle_exit = c.worker.idle_exit;
  s.status_file = cwd / status_file_name(s.generation);
  return s;
}

// `default_launch_dir`: <state_dir>/slurm for a manager (the identity's jobs outlive its launches), the working
// directory inside an allocation; [runners.slurm] launch_dir wins over both.
std::unique_ptr<runners::slurm::SlurmRunner> make_slurm_runner(asio::any_io_executor ex, const AgentConfig& c,
                                                               const runners::ProfileCatalog& profiles,
                                                               const fs::path& default_launch_dir,
                                                               std::shared_ptr<spdlog::logger> log) {
  runners::slurm::SlurmRunnerConfig sc;
  sc.enabled = c.slurm.enabled;
  sc.poll_interval = c.slurm.poll_interval;
  sc.poll_interval_max = c.slurm.poll_interval_max;
  sc.rpc_budget_per_minute = c.slurm.rpc_budget_per_minute;
  sc.exit_scan_interval = c.slurm.exit_scan_interval;
  sc.account = c.slurm.account;
  sc.qos = c.slurm.qos;
  sc.partition = c.slurm.partition;
  sc.launch_dir = c.slurm.launch_dir.empty() ? default_launch_dir : fs::absolute(c.slurm.launch_dir);
  sc.max_jobs = c.slurm.max_jobs;
  sc.max_array_tasks = static_cast<std::size_t>(c.slurm.max_array_tasks);
  sc.max_concurrent_commands = static_cast<std::size_t>(c.slurm.max_concurrent_commands);
  sc.max_poll_duration = c.slurm.max_poll_duration;
  sc.max_queue_duration = c.slurm.max_queue_duration;
  sc.command_timeout = c.slurm.command_timeout;
  sc.sbatch = c.slurm.sbatch;
  sc.squeue = c.slurm.squeue;
  sc.sacct = c.slurm.sacct;
  sc.scancel = c.slurm.scancel;
  sc.keep_job_dirs = c.slurm.keep_job_dirs;
  sc.profiles = profiles;
  sc.profiles_only = !c.process.allow_commands;
  try {
    return std::make_unique<runners::slurm::SlurmRunner>(ex, sc, std::make_unique<slurm::ChildCommandRunner>(), log);
  } catch (const std::exception& e) {
    throw StartupError(std::string("[runners.slurm]: ") + e.what());
  }
}

// What the chain keeper of a kept launch ([chain]) needs, inside an allocation with an end; nullopt otherwise (the
// log says why when [chain] is set but there is nothing to renew).
std::optional<ChainKeeperSettings> chain_keeper_settings(const AgentConfig& c, const ProbeResult& probe,
                                                         const DaemonSettings& settings, const RunArgs& args,
                                                         const fs::path& cwd,
                                                         const std::shared_ptr<spdlog::logger>& log) {
  if (!c.chain.keep) return std::nullopt;
  if (!probe.allocation || !settings.lifecycle.walltime_end) {
    log->warn("[chain]: {}: this generation submits no successor",
              probe.allocation ? "the allocation has no time limit" : "not inside a Slurm allocation");
    return std::nullopt;
  }
  ChainKeeperSettings k{.launch_dir = cwd,
                        .script = fs::absolute(c.chain.script),
                        .generation = args.generation,
                        .slurm_job_id = probe.allocation->job_id,
                        .serving_end = *settings.lifecycle.walltime_end - settings.lifecycle.walltime_lead,
                        .policy = successor_config(c.chain),
                        // Empty when this compute node has no sbatch: the login-node manager submits instead.
                        .sbatch = platform::find_on_path(c.slurm.sbatch, probe_inputs_from_environment().path_env)
                                      .value_or(""),
                        .scancel = c.slurm.scancel,
                        .command_timeout = c.slurm.command_timeout};
  return k;
}

asio::awaitable<void> forward_signals(asio::signal_set& signals, Daemon& daemon) {
  for (;;) {
    auto [ec, number] = co_await signals.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    daemon.on_signal(number == SIGTERM ? Signal::term : number == SIGINT ? Signal::interrupt : Signal::usr1);
  }
}

int run_daemon(const RunArgs& args) {
  AgentConfig config = load_or_throw(args);
  const runners::ProfileCatalog profiles = profiles_or_throw(config);
  auto log = make_logger("nymph", config.log.level, config.log.file.string());
  // Before any secret is in memory: jobs run as this user and must not read it from /proc/PID/mem.
  if (auto private_memory = platform::make_undumpable(); !private_memory)
    log->warn("memory readable by this user's other processes: {}", private_memory.error().message);
  auto token = read_token_file(config.server.token_file);
  if (!token) throw StartupError(token.error().message);
  asio::io_context ioc;
  auto probe = probe_or_throw(config, ioc, log);
  const fs::path cwd = fs::current_path();
  auto settings = make_settings(config, probe, cwd, args.generation);

  // A manager (not inside an allocation) holds its identity's lease before anything reads the Slurm journal
  // or registers: a second manager of the identity stops here.
  std::optional<HeldLease> lease;
  fs::path slurm_launch_dir = cwd;
  if (!probe.allocation) {
    auto identity = resolve_identity(config, ioc, probe.hostname, log);
    lease.emplace(acquire_lease(config, identity, args, settings.launch_id, probe.hostname, log));
    settings.identity = identity.identity;
    slurm_launch_dir = identity.state_dir / "slurm";
  } else if (settings.generation > 1) {  // generations of a kept launch overlap: each keeps its own Slurm journal
    slurm_launch_dir = cwd / ("generation-" + std::to_string(settings.generation));
  }
  struct ReleaseAtExit {
    std::optional<HeldLease>& lease;
    ~ReleaseAtExit() {
      if (lease) lease->release();
    }
  } release_at_exit{lease};

  auto control_plane = make_http_control_plane(
      ioc.get_executor(),
      {.url = config.server.url,
       .token = *token,
       .ca_file = config.server.ca_file ? std::optional<std::string>(config.server.ca_file->string()) : std::nullopt,
       .max_concurrent_uploads = settings.max_concurrent_uploads});
  if (!control_plane) throw StartupError(control_plane.error().message);

  std::map<std::string, runners::Runner*> runner_map;
  std::unique_ptr<runners::ProcessRunner> process_runner;
  if (config.process.enabled) {
    process_runner = std::make_unique<runners::ProcessRunner>(
        runners::ProcessRunnerConfig{.work_dir = fs::absolute(config.worker.work_dir),
                                     .allow_commands = config.process.allow_commands,
                                     .profiles_only = !config.process.allow_commands,
                                     .profiles = profiles,
                                     .kill_grace = config.process.kill_grace,
                                     .keep_work_dirs = config.process.keep_work_dirs},
        log);
    runner_map["process"] = process_runner.get();
  }

  std::unique_ptr<runners::slurm::SlurmRunner> slurm_runner;
  if (probe.sbatch_path) {  // the daemon takes back the Slurm jobs its journal lists (Runner::resumable())
    slurm_runner = make_slurm_runner(ioc.get_executor(), config, profiles, slurm_launch_dir, log);
    settings.capacity["slurm"] = config.slurm.max_jobs;
    runner_map["slurm"] = slurm_runner.get();
  }

  log->info("nymph {} starting: launch {}, label {}, backend {}, server {}{}", kVersion, settings.launch_id,
            settings.label, settings.backend, config.server.url,
            settings.identity.empty() ? "" : ", manager " + settings.identity);
  auto chain_settings = chain_keeper_settings(config, probe, settings, args, cwd, log);
  Daemon daemon(ioc.get_executor(), std::move(settings), **control_plane, runner_map, log);

  std::signal(SIGPIPE, SIG_IGN);
  asio::signal_set signals(ioc, SIGTERM, SIGINT, SIGUSR1);
  asio::co_spawn(ioc, forward_signals(signals, daemon), log_failure(log, "signal handling"));

  std::optional<asio::cancellation_signal> stop_lease;
  if (lease) {
    stop_lease.emplace();
    asio::co_spawn(ioc, keep_lease(*lease, config.manager.heartbeat_interval, daemon, log),
                   asio::bind_cancellation_slot(stop_lease->slot(), log_failure(log, "manager lease heartbeat")));
  }

  slurm::ChildCommandRunner chain_commands;
  std::unique_ptr<ChainKeeper> chain;
  if (chain_settings) {
    chain = std::make_unique<ChainKeeper>(ioc.get_executor(), std::move(*chain_settings), chain_commands, daemon, log);
    asio::co_spawn(ioc, chain->run(), log_failure(log, "kept launch"));
  }
  // A manager started by `nymph install` (its directory is <state-dir>/launches/<ULID>) submits the successors of
  // the kept launches beside it whose compute nodes have no sbatch.
  std::unique_ptr<ManagedChains> managed;
  if (lease && probe.sbatch_path && cwd.parent_path().filename() == "launches") {
    managed = std::make_unique<ManagedChains>(ioc.get_executor(),
                                              ManagedChainsSettings{.launches_dir = cwd.parent_path(),
                                                                    .sbatch = *probe.sbatch_path,
                                                                    .scancel = config.slurm.scancel,
                                                                    .command_timeout = config.slurm.command_timeout},
                                              chain_commands, log);
    asio::co_spawn(ioc, managed->run(), log_failure(log, "kept launches of this user"));
  }

  ExitReason reason = ExitReason::error;
  asio::co_spawn(ioc, daemon.run(), [&](std::exception_ptr e, ExitReason r) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log->critical("daemon failed: {}", ex.what());
      }
    } else {
      reason = r;
    }
    signals.cancel();
    if (stop_lease) stop_lease->emit(asio::cancellation_type::terminal);
    if (chain) chain->finish();
    if (managed) managed->finish();
  });
  ioc.run();
  log->info("exited: {} ({})", to_string(reason), daemon.exit_message());
  return exit_status(reason);
}

}  // namespace

int run_main(const RunArgs& args) {
  try {
    return run_daemon(args);
  } catch (const StartupError& e) {
    std::cerr << "nymph run: " << e.what() << "\n";
    return 2;
  } catch (const LeaseRefused& e) {
    std::cerr << "nymph run: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "nymph run: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace nymph::agent
