#include "runners/slurm/script.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "runners/profile.hpp"
#include "slurm/options.hpp"
#include "slurm/time.hpp"

namespace nymph::runners::slurm {
namespace {

namespace cli = nymph::slurm;

bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

Result<void> check_env_name(const std::string& name) {
  bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
            std::all_of(name.begin(), name.end(), [](char c) { return is_alnum(c) || c == '_'; });
  if (!ok) return fail("env: invalid variable name " + cli::printable(name) + " (letters, digits and _, not starting with a digit)");
  return {};
}

Result<void> check_command(const JobSpec& spec) {
  if (spec.kind != "command")
    return fail("kind " + cli::printable(spec.kind) + " is not supported by the slurm runner (only \"command\")");
  if (spec.command.has_value() == !spec.argv.empty())
    return fail("a command job needs exactly one of argv and command");
  if (spec.command && (spec.command->empty() || has_nul(*spec.command))) return fail("command: empty or contains a NUL byte");
  for (const auto& a : spec.argv)
    if (has_nul(a)) return fail("argv: argument " + cli::printable(a) + " contains a NUL byte");
  if (!spec.argv.empty() && spec.argv[0].empty()) return fail("argv: the program name is empty");
  for (const auto& [name, value] : spec.env) {
    if (auto r = check_env_name(name); !r) return r;
    if (has_nul(value)) return fail("env: value of " + name + " contains a NUL byte");
  }
  return {};
}

void add_sbatch_lines(std::string& s, const JobSpec& spec, const std::filesystem::path& dir,
                      const std::vector<SbatchOption>& options) {
  auto line = [&](std::string_view key, const std::string& value) { s += cli::sbatch_directive(key, value); };
  line("job-name", slurm_job_name(spec.job_id));
  line("chdir", dir.string());
  line("output", (dir / kStdoutFile).string());
  line("error", (dir / kStderrFile).string());
  s += shared_directives(spec, options);
}

void add_body(std::string& s, const JobSpec& spec, const std::filesystem::path& dir) {
  s += "# Rendered by nymph: job " + spec.job_id + " attempt " + std::to_string(spec.attempt) +
       ". Everything from the job below is a quoted word.\n";
  s += "nymph_status_file=" + shell_quote((dir / kExitStatusFile).string()) + "\n";
  s += "rm -f \"$nymph_status_file\"\n";
  s += "nymph_exit_record=" + shell_quote((dir.parent_path() / kExitRecordDir / dir.filename()).string()) + "\n";
  s += "trap 'nymph_rc=$?; printf \"%s\\n\" \"$nymph_rc\" >\"$nymph_status_file.tmp\" && "
       "mv -f \"$nymph_status_file.tmp\" \"$nymph_status_file\"; true 2>/dev/null >\"$nymph_exit_record\"' EXIT\n";
  s += "trap 'exit 143' TERM\n";
  for (const auto& [name, value] : spec.env) s += "export " + name + "=" + shell_quote(value) + "\n";
  if (spec.command) {
    s += "/bin/sh " + shell_quote((dir / kCommandFile).string()) + "\n";
  } else {
    for (std::size_t i = 0; i < spec.argv.size(); ++i) (s += i ? " " : "") += shell_quote(spec.argv[i]);
    s += '\n';
  }
}

}  // namespace

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

Result<void> check_job_id(std::string_view id) {
  bool ok = !id.empty() && id.size() <= 128 && id.front() != '.' && id.front() != '-' &&
            std::all_of(id.begin(), id.end(), [](char c) { return is_alnum(c) || c == '_' || c == '.' || c == '-'; });
  if (!ok) return fail("job id " + cli::printable(id) + " cannot name a Slurm job (1-128 of letters, digits, _ . -)");
  return {};
}

std::string slurm_job_name(std::string_view job_id) { return "nymph-" + std::string(job_id); }

std::string job_dir_name(std::string_view job_id, int attempt) {
  return std::string(job_id) + "-" + std::to_string(attempt);
}

std::string shared_directives(const JobSpec& spec, const std::vector<SbatchOption>& options) {
  std::string s;
  bool has_time = false;
  for (const auto& o : options) {
    has_time = has_time || o.key == "time";
    s += cli::sbatch_directive(o.key, o.value);
  }
  if (spec.timeout && !has_time) s += cli::sbatch_directive("time", cli::minutes_for(*spec.timeout));
  return s;
}

std::string array_job_name(std::string_view first_job_id, int attempt) {
  return "nymph-array-" + job_dir_name(first_job_id, attempt);
}

Result<std::string> render_array_script(std::string_view name, const std::filesystem::path& launch_dir,
                                        std::string_view shared, const std::vector<std::string>& task_dirs) {
  if (task_dirs.empty()) return fail("a job array needs at least one task");
  if (auto r = cli::check_sbatch_path(launch_dir); !r) return r.error();
  for (const auto& d : task_dirs)
    if (auto r = cli::check_sbatch_path(d); !r) return r.error();
  std::string s = "#!/bin/sh\n";
  s += cli::sbatch_directive("job-name", name);
  s += cli::sbatch_directive("array", "0-" + std::to_string(task_dirs.size() - 1));
  s += cli::sbatch_directive("chdir", launch_dir.string());
  s += cli::sbatch_directive("output", "/dev/null");
  s += cli::sbatch_directive("error", "/dev/null");
  s += shared;
  s += "# Rendered by nymph: one task per attempt, each its own job.sbatch with its job's output files.\n";
  s += "case \"$SLURM_ARRAY_TASK_ID\" in\n";
  for (std::size_t i = 0; i < task_dirs.size(); ++i)
    s += "  " + std::to_string(i) + ") nymph_dir=" + shell_quote(task_dirs[i]) + " ;;\n";
  s += "  *) echo \"nymph: no task $SLURM_ARRAY_TASK_ID in this array\" >&2; exit 1 ;;\n";
  s += "esac\n";
  s += "cd \"$nymph_dir\" || exit 1\n";
  s += std::string("exec /bin/sh \"$nymph_dir/") + std::string(kScriptFile) + "\" >\"$nymph_dir/" +
       std::string(kStdoutFile) + "\" 2>\"$nymph_dir/" + std::string(kStderrFile) + "\"\n";
  return s;
}

Result<RenderedJob> render_job(const JobSpec& spec, const std::filesystem::path& dir,
                               const std::vector<SbatchOption>& options) {
  if (auto r = check_job_id(spec.job_id); !r) return r.error();
  if (auto r = cli::check_sbatch_path(dir); !r) return r.error();
  if (auto r = check_command(spec); !r) return r.error();
  RenderedJob out;
  out.script = "#!/bin/sh\n";
  add_sbatch_lines(out.script, spec, dir, options);
  add_body(out.script, spec, dir);
  if (spec.command) out.command = *spec.command + (spec.command->ends_with('\n') ? "" : "\n");
  return out;
}

Result<std::vector<std::string>> training_sbatch_args(const JobSpec& spec, const std::filesystem::path& dir,
                                                      const std::vector<SbatchOption>& options,
                                                      const std::filesystem::path& script) {
  if (auto r = check_job_id(spec.job_id); !r) return r.error();
  if (auto r = cli::check_sbatch_path(dir); !r) return r.error();
  if (!script.is_absolute() || has_nul(script.string())) return fail("profile script " + cli::printable(script.string()) + ": not an absolute path");
  std::vector<std::string> args{"--parsable", "--job-name=" + slurm_job_name(spec.job_id), "--chdir=" + dir.string(),
                                "--output=" + (dir / kStdoutFile).string(), "--error=" + (dir / kStderrFile).string()};
  bool has_time = false;
  for (const auto& o : options) {
    has_time = has_time || o.key == "time";
    args.push_back(cli::sbatch_argument(o.key, o.value));
  }
  if (spec.timeout && !has_time) args.push_back("--time=" + cli::minutes_for(*spec.timeout));
  args.push_back(script.string());
  args.push_back((dir / kInputFile).string());
  args.push_back((dir / kResultFile).string());
  return args;
}

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// The site-default key a long option name (without "--", before any '=') selects: the full name or a
// prefix of it (getopt_long accepts unambiguous abbreviations; an ambiguous one fails sbatch anyway).
std::optional<std::string> long_key(std::string_view name) {
  if (name.empty()) return std::nullopt;
  for (std::string_view key : {"account", "qos", "partition"})
    if (key.starts_with(name)) return std::string(key);
  return std::nullopt;
}

// The key a short-option word (-A, -Aacct, -Hp ...) selects: short flags without an argument may come first.
std::optional<std::string> short_key(std::string_view word, bool pbs) {
  for (std::size_t i = 1; i < word.size(); ++i) {
    char c = word[i];
    if (c == 'A') return std::string("account");
    if (c == 'q') return std::string(pbs ? "partition" : "qos");
    if (c == 'p' && !pbs) return std::string("partition");
    if (pbs || std::string_view("HOQsvVWh").find(c) == std::string_view::npos) return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::set<std::string> script_site_keys(std::string_view text) {
  std::set<std::string> keys;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    std::size_t first = 0;
    while (first < line.size() && is_blank(line[first])) ++first;
    if (first == line.size()) continue;      // blank
    if (line[first] != '#') break;           // the first command: sbatch reads no further
    bool sbatch = line.starts_with("#SBATCH") && (line.size() == 7 || is_blank(line[7]));
    bool pbs = line.starts_with("#PBS") && (line.size() == 4 || is_blank(line[4]));
    if (!sbatch && !pbs) continue;           // another comment
    for (std::string_view w : words(line.substr(sbatch ? 7 : 4))) {
      if (w.front() == '#') break;           // a comment after the options
      std::optional<std::string> key;
      if (w.starts_with("--") && !pbs) {
        std::string_view name = w.substr(2);
        key = long_key(name.substr(0, name.find('=')));
      } else if (w.size() > 1 && w.front() == '-' && w[1] != '-') {
        key = short_key(w, pbs);
      }
      if (key) keys.insert(*key);
    }
  }
  return keys;
}

}  // namespace nymph::runners::slurm
