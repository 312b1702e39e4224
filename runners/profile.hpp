#pragma once
// Approved training profiles (issue 7): reviewed scripts an administrator installs and names. A `training`
// job names a profile and passes parameters; the parameters are data only: checked, written to input.json in
// the attempt's directory and never put on a command line or into a script. The profile gets the input and
// result paths as its two arguments (and as NYMPH_INPUT / NYMPH_RESULT); result.json is read only after the
// job succeeded, and checked before it is reported. Both runners receive the same ProfileCatalog value.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "common/error.hpp"
#include "runners/runner.hpp"

namespace nymph::runners {

// Files inside an attempt's directory.
inline constexpr std::string_view kInputFile = "input.json";
inline constexpr std::string_view kResultFile = "result.json";

// Bounds of a result.json. Chosen so that the result always fits an event the control plane accepts
// (docs/protocol.md "Limits": 4 MiB body, depth 32, 10 000 elements per array/object).
inline constexpr std::size_t kMaxResultBytes = 1024 * 1024;
inline constexpr int kMaxResultDepth = 20;
inline constexpr std::size_t kMaxResultElements = 10'000;

// One approved profile ([profiles] of the config, or --training-profile NAME=/abs/script).
struct Profile {
  std::string name;
  std::filesystem::path script;                 // absolute path of the reviewed script
  std::vector<std::string> allowed_parameters;  // empty: any parameter name
  std::size_t max_input_bytes = 64 * 1024;      // bound of the serialized parameters (input.json)
};

// The profiles of one worker, by name. A plain value, copied into each runner's config.
class ProfileCatalog {
 public:
  ProfileCatalog() = default;
  explicit ProfileCatalog(std::vector<Profile> profiles) : profiles_(std::move(profiles)) {}

  // The profile called `name`, or nullptr.
  const Profile* find(std::string_view name) const;
  const std::vector<Profile>& profiles() const { return profiles_; }
  bool empty() const { return profiles_.empty(); }

 private:
  std::vector<Profile> profiles_;
};

// Start-up check of a whole catalog: every name is 1-64 of letters, digits, '_', '.', '-' (starting with a
// letter or digit) and unique, and every script passes check_profile_script. Returns the first problem as
// "profile NAME: ..." (the agent refuses to start with it). Touches the filesystem (stat only).
Result<void> check_profiles(const ProfileCatalog& catalog);

// Checks one profile's script: an absolute path naming an existing regular file (symlinks are followed)
// that is not writable by group or others. The Error names the profile, the path and the reason. Also
// called before each training job, so a script changed after start-up is refused then.
Result<void> check_profile_script(const Profile& profile);

// Finds the profile a training job asks for and checks the job is a well-formed training job: kind
// "training", a profile name, no argv/command, no environment variables (a reviewed script must not be
// steered by PATH, LD_PRELOAD, BASH_ENV ...), a known profile whose script still passes
// check_profile_script. Returns the profile (pointing into `catalog`) or an Error naming the problem.
Result<const Profile*> resolve_training(const ProfileCatalog& catalog, const JobSpec& spec);

// Checks a job's parameters as data and returns the text of input.json: a JSON object, every member name
// allowed when the profile restricts them, serialized at most profile.max_input_bytes long. Never throws.
Result<std::string> render_input(const Profile& profile, const boost::json::value& parameters);

// Writes `text` to `dir`/input.json (mode 0600, replacing any file there). Error names the path.
Result<void> write_input(const std::filesystem::path& dir, const std::string& text);

// Checks the text of a result.json: at most `max_bytes`, valid UTF-8 JSON, nested at most kMaxResultDepth
// deep, at most kMaxResultElements per array or object, every number finite. Returns the value or an Error saying
// what is wrong.
Result<boost::json::value> check_result(std::string_view text, std::size_t max_bytes = kMaxResultBytes);

// Reads and checks `dir`/result.json (not following a symlink; a regular file only). A missing file is an
// Error "the profile wrote no result.json". Never throws.
Result<boost::json::value> read_result(const std::filesystem::path& dir, std::size_t max_bytes = kMaxResultBytes);

// Applies the result rule to a final update: when `u` is succeeded, reads dir/result.json and either
// attaches it as u.result or turns `u` into failed with a message saying why ("succeeded but its
// result.json is invalid: ..."). Any other state is returned as it is, without a result.
JobUpdate attach_result(JobUpdate u, const std::filesystem::path& dir);

}  // namespace nymph::runners
