#pragma once
// `nymph install`: validate, write the launch directory atomically, start the detached daemon (and confirm it
// came up) or submit it with sbatch, and describe the result for a person or as one JSON object.
#include <sys/types.h>

#include <chrono>
#include <istream>
#include <optional>
#include <string>

#include <boost/json/object.hpp>

#include "common/error.hpp"
#include "common/ulid.hpp"
#include "installer/plan.hpp"

namespace nymph::installer {

// Everything run_install needs from outside the options.
struct InstallContext {
  HostFacts host;
  std::istream* token_input = nullptr;                 // read for --token-stdin
  std::chrono::milliseconds start_timeout{15'000};     // how long the daemon may take to write status.json
  std::string sbatch = "sbatch";                       // looked up on PATH
  std::chrono::milliseconds sbatch_timeout{120'000};
  // --replace: how long the running manager may take to hand over: its stop budget (at most 35 s, see
  // [worker] stop_timeout), a heartbeat interval and a margin.
  std::chrono::milliseconds replace_timeout{55'000};
};

struct InstallOutcome {
  InstallPlan plan;
  bool dry_run = false;
  std::string token_source;      // "file <path>" or "standard input"; never the token
  std::optional<pid_t> pid;      // local launch: the daemon's pid
  std::string slurm_job_id;      // slurm launch: the job id
  std::string launch_dir_filesystem;  // --launch-dir (not a dry run): its filesystem type (nfs, lustre, ext4...) or ""
};

// Performs `nymph install`. Every option and the token are validated before anything is written (also for a
// dry run): --config-fragment is read (a regular file of at most 1 MiB) and merged (make_install_plan), every
// training profile of the result is checked as `nymph run` checks it, and --launch-dir must be a writable
// directory or creatable under one (once the install goes ahead it is created, 0700, and written to once;
// its filesystem type is reported, with a warning when compute nodes cannot see it: tmpfs, ramfs, overlay); files are
// written into a temporary directory that is renamed into place, so a failure leaves nothing behind. With
// dry_run nothing is written or started. A local launch is confirmed only when the daemon is alive and has
// written status.json with its pid within start_timeout; otherwise it is stopped (TERM, then KILL to its process
// group), launch.json records the failure, and the Error carries the log's last lines. A failed sbatch removes
// the launch again. Never throws; never stops another launch.
Result<InstallOutcome> run_install(const InstallOptions& o, const InstallContext& ctx, UlidGenerator& ids);

// Reads the token from --token-file or standard input (exactly one must be given) and checks it.
// The Error never contains the token.
Result<std::string> read_token(const InstallOptions& options, std::istream* input);

// The outcome as one JSON object (launchId, workerLabel, mode, launchDir, logPath, pid or slurmJobId, tail,
// squeue, warning, trainingProfiles, siteConfig; a dry run adds dryRun, files and the command or sbatch script).
// siteConfig always has every key: account, qos, partition, launchDir, maxPollDuration, drainGrace,
// configFragment (strings or null), profilesOnly (bool), maxJobs (number or null), fragmentKeys (the dotted
// keys the fragment added, e.g. "runners.slurm.poll_interval").
boost::json::object outcome_json(const InstallOutcome& oc);

// The outcome as the lines a person needs (launch ID, label, log, pid or job id, how to follow it).
std::string outcome_text(const InstallOutcome& oc);

// The warning printed for every --slurm install (a kept one: kKeptWarning).
extern const char* const kSlurmWarning;
extern const char* const kKeptWarning;

}  // namespace nymph::installer
