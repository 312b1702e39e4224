#pragma once
// Where the admin commands of nymph-control send their requests, and with which token: from flags, the
// environment or a TOML config file. Tokens are read from a file, never taken from the command line.
#include <optional>
#include <string>

#include "common/error.hpp"

namespace nymph::control::admin {

// What the command line says about the target. Resolution order for each value: flag, environment
// (NYMPH_CONTROL_URL, NYMPH_CONTROL_TOKEN_FILE, NYMPH_CONTROL_CA_FILE), then the TOML config file
// (--config, else $XDG_CONFIG_HOME/nymph/control.toml or ~/.config/nymph/control.toml) with keys
// url, token_file, ca_file. The URL defaults to http://127.0.0.1:8470.
struct AdminOptions {
  std::optional<std::string> server;
  std::optional<std::string> token_file;
  std::optional<std::string> ca_file;
  std::optional<std::string> config;
  bool json = false;  // machine output
};

// The resolved target: URL, token text and an extra CA bundle for https.
struct AdminTarget {
  std::string url;
  std::string token;
  std::optional<std::string> ca_file;
};

// Resolves the target as described on AdminOptions and reads the token file (whitespace trimmed).
// Returns an Error naming the missing setting, a URL the control-plane URL rule refuses (plain http:// to a
// host that is not loopback: the admin token would cross the network in clear text; http::parse_server_url),
// the unreadable or empty token file, or the config file's syntax error and line. The config and token files
// are read as regular files of at most 1 MiB and 64 KiB (a FIFO or device is refused at once). A config file
// that was not named and does not exist is skipped.
Result<AdminTarget> resolve_target(const AdminOptions& o);

}  // namespace nymph::control::admin
