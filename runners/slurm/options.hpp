#pragma once
// runConfig.slurm: the allow-list of sbatch options a job may set, each checked by its own grammar.
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "common/error.hpp"

namespace nymph::runners::slurm {

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

// `text` with control characters, backslashes, quotes and non-ASCII bytes escaped (\n, \xNN), quoted in
// double quotes: safe to put into a message or a log line.
std::string printable(std::string_view text);

}  // namespace nymph::runners::slurm
