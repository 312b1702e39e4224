#include "control/admin/target.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <toml++/toml.h>

#include "common/files.hpp"
#include "common/text.hpp"
#include "common/toml_nesting.hpp"
#include "http/url.hpp"

namespace nymph::control::admin {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::string default_config_path() {
  if (auto x = env("XDG_CONFIG_HOME")) return *x + "/nymph/control.toml";
  if (auto h = env("HOME")) return *h + "/.config/nymph/control.toml";
  return {};
}

// Fills what `url`, `token_file` and `ca_file` still miss from the TOML file `config`.
Result<void> read_config(const std::string& config, std::optional<std::string>& url,
                         std::optional<std::string>& token_file, std::optional<std::string>& ca_file) {
  auto text = read_small_file(config, "config file", kMaxConfigFileBytes);
  if (!text) return text.error();
  if (auto ok = check_toml_nesting(*text, "config file " + config); !ok) return ok.error();
  try {
    auto t = toml::parse(*text, config);
    if (!url) url = t["url"].value<std::string>();
    if (!token_file) token_file = t["token_file"].value<std::string>();
    if (!ca_file) ca_file = t["ca_file"].value<std::string>();
    return {};
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "config file " << config << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return fail(msg.str());
  }
}

Result<std::string> read_token(const std::string& file) {
  auto data = read_small_file(file, "token file", kMaxTokenFileBytes);
  if (!data) return data.error();
  std::string token(trim(*data));
  if (token.empty()) return fail("token file '" + file + "' is empty");
  return token;
}

}  // namespace

Result<AdminTarget> resolve_target(const AdminOptions& o) {
  std::optional<std::string> url = o.server, token_file = o.token_file, ca_file = o.ca_file;
  if (!url) url = env("NYMPH_CONTROL_URL");
  if (!token_file) token_file = env("NYMPH_CONTROL_TOKEN_FILE");
  if (!ca_file) ca_file = env("NYMPH_CONTROL_CA_FILE");
  std::string config = o.config.value_or(default_config_path());
  bool explicit_config = o.config.has_value();
  std::error_code ec;
  bool config_exists = std::filesystem::exists(config, ec);  // without opening it: it may be a FIFO
  if ((!url || !token_file || !ca_file) && !config.empty() && (explicit_config || config_exists)) {
    auto r = read_config(config, url, token_file, ca_file);
    if (!r) return r.error();
  }
  if (!token_file)
    return fail("no admin token: pass --token-file FILE, set NYMPH_CONTROL_TOKEN_FILE, or set token_file in " +
                (config.empty() ? std::string("~/.config/nymph/control.toml") : config));
  // The URL rule comes first: a token is not even read for a URL it would not be sent to.
  std::string target = url.value_or("http://127.0.0.1:8470");
  if (auto ep = http::parse_server_url(target); !ep) return ep.error();
  auto token = read_token(*token_file);
  if (!token) return token.error();
  return AdminTarget{std::move(target), std::move(*token), ca_file};
}

}  // namespace nymph::control::admin
