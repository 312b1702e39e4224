#pragma once
// Every Slurm command line nymph runs, built in one place. Each builder takes the program (a name looked up on
// PATH, or a configured path) and says which parser of slurm/parse.hpp (or slurm/allocation.hpp,
// slurm/listing.hpp) reads its output. Arguments are argv entries, never shell text.
#include <string>
#include <string_view>
#include <vector>

namespace nymph::slurm {

using Argv = std::vector<std::string>;

// `program --version` (any Slurm command): answers when the command runs at all.
Argv version_argv(std::string program);

// `sbatch --parsable SCRIPT`: submits a batch script file; parse_sbatch_output reads the job id.
Argv sbatch_file_argv(std::string sbatch, std::string script);

// `sbatch --parsable` with the batch script on standard input; parse_sbatch_output reads the job id.
Argv sbatch_stdin_argv(std::string sbatch);

// `squeue --noheader -t all -r -O kSqueueJobFormat -j ID,ID...`: the jobs of `ids` slurmctld still knows, final
// states included (until MinJobAge purges them), each task of a job array on its own line as "<array>_<i>" (an id
// may be one); parse_squeue_jobs. Run it with SLURM_TIME_FORMAT=%s.
Argv squeue_jobs_argv(std::string squeue, const std::vector<std::string>& ids);

// `squeue --noheader -o kSqueueFormat -u USER`: every job of `user` (a name or a numeric uid); parse_squeue.
Argv squeue_user_argv(std::string squeue, std::string user);

// `sacct -X -n -P -o kSacctJobFormat -S SINCE -j ID,ID...`: the accounting records of `ids` of jobs that
// existed at or after `since` (a Slurm time, see format_slurm_time): a recycled id's older records drop out;
// parse_sacct_jobs. Run it with SLURM_TIME_FORMAT=%s.
Argv sacct_jobs_argv(std::string sacct, const std::vector<std::string>& ids, std::string since);

// `scontrol show config`; parse_cluster_name reads ClusterName.
Argv show_config_argv(std::string scontrol);

// `sacct -X -n -P -o kSacctFormat -u USER`: today's records of `user`; it answers only when accounting storage
// is available (parse_sacct reads it).
Argv sacct_user_argv(std::string sacct, std::string user);

// `scancel ID ID...`.
Argv scancel_argv(std::string scancel, const std::vector<std::string>& ids);

// `sacctmgr -n -P show user USER format=DefaultAccount`; parse_default_account.
Argv default_account_argv(std::string sacctmgr, std::string user);

// `squeue -h -j ID -o kAllocationFormat`: the partition and time left of one job; parse_allocation.
Argv allocation_argv(std::string squeue, std::string job_id);

// `squeue --me --json`: the caller's jobs as JSON; parse_squeue_json_jobs.
Argv list_json_argv(std::string squeue);

// `squeue --me --noheader -o kListFormat`: the same as text, where --json is unavailable; parse_squeue_list.
Argv list_text_argv(std::string squeue);

// "squeue --name=\"NAME\" -o '%.18i %.48j %.10T'": a command line for a person to paste (not run by nymph).
std::string squeue_by_name_hint(std::string_view job_name);

}  // namespace nymph::slurm
