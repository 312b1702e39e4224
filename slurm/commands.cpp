#include "slurm/commands.hpp"

#include "slurm/allocation.hpp"
#include "slurm/listing.hpp"
#include "slurm/parse.hpp"

namespace nymph::slurm {
namespace {

std::string join(const std::vector<std::string>& ids) {
  std::string s;
  for (const auto& id : ids) (s += s.empty() ? "" : ",") += id;
  return s;
}

}  // namespace

Argv version_argv(std::string program) { return {std::move(program), "--version"}; }

Argv sbatch_file_argv(std::string sbatch, std::string script) {
  return {std::move(sbatch), "--parsable", std::move(script)};
}

Argv sbatch_stdin_argv(std::string sbatch) { return {std::move(sbatch), "--parsable"}; }

Argv squeue_jobs_argv(std::string squeue, const std::vector<std::string>& ids) {
  return {std::move(squeue), "--noheader", "-t", "all", "-r", "-O", std::string(kSqueueJobFormat), "-j", join(ids)};
}

Argv squeue_user_argv(std::string squeue, std::string user) {
  return {std::move(squeue), "--noheader", "-o", std::string(kSqueueFormat), "-u", std::move(user)};
}

Argv sacct_jobs_argv(std::string sacct, const std::vector<std::string>& ids, std::string since) {
  return {std::move(sacct), "-X", "-n", "-P", "-o", std::string(kSacctJobFormat), "-S", std::move(since),
          "-j", join(ids)};
}

Argv show_config_argv(std::string scontrol) { return {std::move(scontrol), "show", "config"}; }

Argv sacct_user_argv(std::string sacct, std::string user) {
  return {std::move(sacct), "-X", "-n", "-P", "-o", std::string(kSacctFormat), "-u", std::move(user)};
}

Argv scancel_argv(std::string scancel, const std::vector<std::string>& ids) {
  Argv argv{std::move(scancel)};
  argv.insert(argv.end(), ids.begin(), ids.end());
  return argv;
}

Argv default_account_argv(std::string sacctmgr, std::string user) {
  return {std::move(sacctmgr), "-n", "-P", "show", "user", std::move(user), "format=DefaultAccount"};
}

Argv allocation_argv(std::string squeue, std::string job_id) {
  return {std::move(squeue), "-h", "-j", std::move(job_id), "-o", std::string(kAllocationFormat)};
}

Argv list_json_argv(std::string squeue) { return {std::move(squeue), "--me", "--json"}; }

Argv list_text_argv(std::string squeue) {
  return {std::move(squeue), "--me", "--noheader", "-o", std::string(kListFormat)};
}

std::string squeue_by_name_hint(std::string_view job_name) {
  return "squeue --name=\"" + std::string(job_name) + "\" -o '%.18i %.48j %.10T'";
}

}  // namespace nymph::slurm
