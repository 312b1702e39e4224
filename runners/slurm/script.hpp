#pragma once
// Rendering one attempt into a job directory: the sbatch script (and, for a `command`, its own script file).
// Job data only ever reaches the script as validated option values or single-quoted shell words.
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "runners/runner.hpp"
#include "slurm/options.hpp"

namespace nymph::runners::slurm {

using nymph::slurm::SbatchOption;

// Files inside a job directory.
inline constexpr std::string_view kScriptFile = "job.sbatch";
inline constexpr std::string_view kCommandFile = "command.sh";
inline constexpr std::string_view kStdoutFile = "stdout.log";
inline constexpr std::string_view kStderrFile = "stderr.log";
inline constexpr std::string_view kExitStatusFile = "exit-status";
// The directory of launch_dir (beside the job directories) where each job's EXIT trap drops an empty file named
// after its job directory once the exit-status file is written: the runner lists this one directory to learn of
// ends without asking slurmctld (see SlurmRunnerConfig::exit_scan_interval).
inline constexpr std::string_view kExitRecordDir = "exits";
// The directory of launch_dir where a job array's script (render_array_script) is written for its sbatch call and
// removed once sbatch returned (Slurm keeps a copy).
inline constexpr std::string_view kArrayScriptDir = "arrays";

// The rendered files of one attempt.
struct RenderedJob {
  std::string script;                  // job.sbatch
  std::optional<std::string> command;  // command.sh, when the job is a shell `command`
};

// `s` as one POSIX shell word: single-quoted, each ' written as '\''. Any byte but NUL survives.
std::string shell_quote(std::string_view s);

// Checks a job id used in the Slurm job name and the directory name: 1-128 of letters, digits, _ . -,
// not starting with '.' or '-'. Returns an Error naming the id otherwise.
Result<void> check_job_id(std::string_view job_id);

// The Slurm job name of every attempt of `job_id`: "nymph-<job_id>" (part of a tracked job's identity).
std::string slurm_job_name(std::string_view job_id);

// The directory name of an attempt: "<job_id>-<attempt>".
std::string job_dir_name(std::string_view job_id, int attempt);

// Renders `spec` (kind "command": argv or command) for the job directory `dir` with the validated `options`.
// The script: #SBATCH job name nymph-<job_id>, --chdir=dir, --output/--error into dir, the options; then
// removes a stale exit-status file, installs an EXIT trap that writes the script's exit status to
// dir/exit-status (atomically), turns TERM into exit 143 so the trap runs on scancel, exports the job's
// environment (names checked, values quoted) and runs the argv (quoted words) or `/bin/sh dir/command.sh`.
// When spec.timeout is set and `options` has no `time`, it becomes --time (minutes, rounded up).
// Returns an Error for a bad job id, bad kind, empty argv, NUL bytes, or bad environment names. Never throws.
Result<RenderedJob> render_job(const JobSpec& spec, const std::filesystem::path& dir,
                               const std::vector<SbatchOption>& options);

// The #SBATCH lines of a rendered command attempt that do not name the attempt: the validated `options`, then
// --time from spec.timeout when `options` has none. Attempts with equal lines can run as the tasks of one job
// array (render_array_script): they are its "shape". Never throws.
std::string shared_directives(const JobSpec& spec, const std::vector<SbatchOption>& options);

// The Slurm job name of a job array whose first task is attempt `attempt` of `first_job_id`:
// "nymph-array-<job_id>-<attempt>" (every task's name, part of each task's identity).
std::string array_job_name(std::string_view first_job_id, int attempt);

// A batch script that runs already rendered command attempts (render_job, written to their job directories
// `task_dirs`) as the tasks of one job array: #SBATCH --job-name=`name`, --array=0-(n-1), --chdir=`launch_dir`,
// Slurm's own output to /dev/null, then the attempts' `shared` lines (shared_directives, equal for all of them).
// Task i changes to task_dirs[i] and execs /bin/sh on its job.sbatch with stdout and stderr into the directory's
// stdout.log and stderr.log, as Slurm's --output and --error would: the attempt's own script writes its
// exit-status file and exit record as it does when submitted alone. Each task is Slurm job "<array id>_<i>".
// Returns an Error for no tasks or a path sbatch cannot take. Never throws.
Result<std::string> render_array_script(std::string_view name, const std::filesystem::path& launch_dir,
                                        std::string_view shared, const std::vector<std::string>& task_dirs);

// The sbatch arguments (after the program name) that submit an approved training profile's `script` itself
// for the job directory `dir`: --parsable, --job-name=nymph-<job_id>, --chdir=dir, --output/--error into
// dir, the validated `options` as --key[=value] (and --time from spec.timeout when `options` has none), then
// the script and its two arguments dir/input.json and dir/result.json. Options given here win over the
// profile's own #SBATCH lines, which decide everything else (so the caller leaves out a site default the
// script sets: script_site_keys). Job parameters never appear: they are in
// input.json. Returns an Error for a bad job id, directory or script path. Never throws.
Result<std::vector<std::string>> training_sbatch_args(const JobSpec& spec, const std::filesystem::path& dir,
                                                      const std::vector<SbatchOption>& options,
                                                      const std::filesystem::path& script);

// The site-default keys ("account", "qos", "partition") that the batch script `text` sets itself, read as
// sbatch reads directives: lines from the top of the script up to the first one that is neither blank nor a
// comment; a directive line starts with "#SBATCH" (or "#PBS", which sbatch also honours: -A account,
// -q partition) in column 0, followed by options up to the end of the line or a word starting with '#'.
// Recognised forms: --account=A, --account A, an abbreviated long name (--acc=A, as getopt accepts), -A A,
// -AA, and -q / -p likewise (after no-argument short flags such as -H). When in doubt a key counts as set,
// so a site default never overrides what the script may have chosen. Never throws.
std::set<std::string> script_site_keys(std::string_view text);

}  // namespace nymph::runners::slurm
