#pragma once
// How every `--json` verb of `nymph` (install, launches, launches prune, kill, slurm jobs, probe, doctor) reports:
// exactly one JSON object on stdout, on success and on failure. A failure is
//   {"error": {"code": "<stable identifier>", "message": "<for a person>", ...details}}
// and its exit status is one of ExitCode (docs/lakeshore.md has the table). The message also goes to stderr
// ("nymph <verb>: <message>") so a person at a terminal sees it either way.
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

namespace nymph::cli {

// Exit statuses of the verbs. Stable: scripts (lakeshore) branch on them.
enum ExitCode : int {
  kExitOk = 0,         // done; the JSON is the verb's result
  kExitFailed = 1,     // the verb ran and failed (error.code says why), or doctor found a failing check
  kExitUsage = 2,      // the command line was refused (error.code "usage")
  kExitNotFound = 3,   // kill: no launch with that launch id, worker label or worker id (error.code "notFound")
  kExitTimedOut = 4,   // kill: the launch was signalled but still runs after --timeout (error.code "stillRunning")
};

// The error object: {"error": {"code": code, "message": message, <details...>}}.
boost::json::object error_json(std::string_view code, std::string_view message, boost::json::object details = {});

// Reports a failure of `verb` ("install", "slurm jobs", ...): the message on stderr, and with `json` the error
// object as one line on stdout. Returns `exit_code`, for `return report_failure(...)`.
int report_failure(std::string_view verb, std::string_view code, std::string_view message, bool json,
                   int exit_code = kExitFailed, boost::json::object details = {});

// True when "--json" is one of the arguments (before a "--"): a command line CLI11 refused still gets its error
// as JSON then.
bool wants_json(int argc, const char* const* argv);

}  // namespace nymph::cli
