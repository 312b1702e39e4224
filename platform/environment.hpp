#pragma once
// A child's environment, and the one rule by which a program name becomes a file: the probe, the doctor, job
// launches and Slurm commands all find the same executable for the same name and PATH.
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace nymph::platform {

// A whole environment, NAME -> value.
using Environment = std::map<std::string, std::string>;

// The calling process's own environment (`environ`) as a map. Entries without '=' are skipped.
Environment current_environment();

// The directories searched for a program started with `env`: env's PATH when it sets one, else this process's
// own PATH, else "/usr/bin:/bin".
std::string search_path(const Environment& env);

// Finds the program `name` the way execvp would, but beforehand, so a miss is a message rather than a failed
// start. A name containing '/' is a path (a relative one resolves against the working directory) and is
// checked as it is. Otherwise `path_list` (colon-separated) is searched in order, an empty entry meaning the
// current directory (POSIX), and the first `dir/name` found wins. Either way only a regular file (symlinks
// followed) that this process may execute counts. Returns that path, or nullopt. Never throws but bad_alloc.
std::optional<std::string> find_on_path(std::string_view name, std::string_view path_list);

}  // namespace nymph::platform
