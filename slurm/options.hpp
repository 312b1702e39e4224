#pragma once
// The grammar of sbatch options: the allow-list a job's runConfig.slurm may set (each key checked by its own
// grammar; the installer checks its --slurm-* values with the same one), paths that may go into an sbatch
// line, and how an option is written on a command line or as an #SBATCH line.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "common/error.hpp"
#include "slurm/text.hpp"

namespace nymph::slurm {

// One validated sbatch option, rendered as `#SBATCH --<key>=<value>` (or `#SBATCH --<key>` when `value` is
// empty, e.g. `exclusive`). Values only ever contain characters of their key's grammar: no spaces, quotes,
// shell metacharacters or control characters.
struct SbatchOption {
  std::string key;
  std::string value;
  friend bool operator==(const SbatchOption&, const SbatchOption&) = default;
};

// Site defaults that apply when the job does not set the key itself (from [runners.slurm]).
struct OptionDefaults {
  std::string account;
  std::string qos;
  std::string partition;
};

// The allowed keys, in the order they are rendered.
const std::vector<std::string_view>& allowed_option_keys();

// Checks one option. `value` is the text form (numbers as decimal, true as ""). Returns the value to render,
// or an Error naming the key and the (escaped) value and what was expected. Never throws.
Result<std::string> check_option(std::string_view key, std::string_view value);

// Validates a job's runConfig.slurm object and merges it over `defaults`. Strings, non-negative integers and
// booleans (only `exclusive`) are accepted; `exclusive: false` is omitted. An unknown key, a wrong type or
// a bad value is an Error naming key and value; nothing is returned partially. Output order is the
// allow-list order, so rendering is deterministic. Never throws.
Result<std::vector<SbatchOption>> validate_options(const boost::json::object& slurm,
                                                   const OptionDefaults& defaults);

// Whether `path` can go into an #SBATCH line or an sbatch argument as it is: absolute, and only letters, digits
// and / _ . - + @ , = : ~ (no spaces, quotes, control characters, or '%', which sbatch expands in file names).
bool is_sbatch_path(std::string_view path);

// is_sbatch_path as a check: the Error shows the (escaped) path and the rule. Never throws.
Result<void> check_sbatch_path(const std::filesystem::path& path);

// An option as an sbatch argument: "--key", or "--key=value" when `value` is not empty.
std::string sbatch_argument(std::string_view key, std::string_view value);

// The same option as a line of a batch script: "#SBATCH --key[=value]\n".
std::string sbatch_directive(std::string_view key, std::string_view value);

}  // namespace nymph::slurm
