#include "installer/plan.hpp"

#include <map>
#include <sstream>
#include <tuple>

#include <toml++/toml.h>

#include "common/duration.hpp"
#include "agent/manager_lease.hpp"
#include "http/url.hpp"
#include "installer/slurm_values.hpp"
#include "slurm/options.hpp"

namespace nymph::installer {
namespace {

namespace fs = std::filesystem;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool has_control(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// A value shown in an error message: control characters escaped so the message stays on one line.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return "'" + out + "'";
}

Result<void> check_server(std::string_view url) {
  if (url.empty()) return fail("--server is required (the control plane URL, e.g. https://cp.example.org)");
  if (url.size() > 2048) return fail("--server " + shown(url.substr(0, 64)) + "...: longer than 2048 characters");
  if (auto ep = http::parse_server_url(url); !ep) return fail("--server: " + ep.error().message);
  return {};
}

Result<std::string> check_label(const InstallOptions& o, const HostFacts& host) {
  std::string label = o.label.empty() ? host.hostname : o.label;
  std::string flag = o.label.empty() ? "the host name (default label)" : "--label";
  bool ok = !label.empty() && label.size() <= 64 && is_alnum(label.front());
  for (char c : label) ok = ok && (is_alnum(c) || c == '-' || c == '_' || c == '.');
  if (!ok)
    return fail(flag + " " + shown(label) +
                ": a label is 1-64 letters, digits, '-', '_', '.', starting with a letter or digit" +
                (o.label.empty() ? "; pass --label" : ""));
  return label;
}

Result<std::map<std::string, std::string>> parse_tags(const std::vector<std::string>& tags) {
  std::map<std::string, std::string> out;
  for (const auto& t : tags) {
    auto eq = t.find('=');
    std::string key = t.substr(0, eq);
    bool key_ok = eq != std::string::npos && !key.empty() && key.size() <= 64;
    for (char c : key) key_ok = key_ok && (is_alnum(c) || c == '-' || c == '_' || c == '.');
    if (!key_ok) return fail("--tag " + shown(t) + ": expected key=value with a key of letters, digits, '-', '_', '.'");
    std::string value = t.substr(eq + 1);
    bool value_ok = value.size() <= 256;
    for (char c : value) value_ok = value_ok && c >= 0x20 && c <= 0x7e;
    if (!value_ok) return fail("--tag " + shown(t) + ": the value must be at most 256 printable ASCII characters");
    if (!out.emplace(key, value).second) return fail("--tag " + shown(t) + ": tag '" + key + "' given twice");
  }
  return out;
}

Result<void> check_paths(const InstallOptions& o, const InstallPlan& plan, const HostFacts& host) {
  for (const fs::path* p : {&plan.launch_dir, &plan.log_path, &host.nymph_exe}) {
    if (!p->is_absolute() || has_control(p->native()))
      return fail("path " + shown(p->native()) + " must be absolute and free of control characters");
  }
  if (o.slurm) {
    for (const fs::path* p : {&plan.launch_dir, &plan.log_path}) {
      if (!slurm::is_sbatch_path(p->native()))
        return fail("path " + shown(p->native()) +
                    " cannot go into an #SBATCH line (use letters, digits and / . _ + , @ = : ~ -); "
                    "choose another --state-dir or HOME");
    }
  }
  return {};
}


// --training-profile NAME=/abs/script: the same name and path grammar as `nymph run` (the scripts themselves are
// checked by run_install, which may look at the filesystem).
Result<std::vector<std::pair<std::string, std::string>>> parse_profiles(const std::vector<std::string>& entries) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : entries) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == e.size())
      return fail("--training-profile " + shown(e) + ": expected NAME=/absolute/script");
    std::string name = e.substr(0, eq), script = e.substr(eq + 1);
    bool name_ok = name.size() <= 64 && is_alnum(name[0]);
    for (char c : name) name_ok = name_ok && (is_alnum(c) || c == '_' || c == '.' || c == '-');
    if (!name_ok)
      return fail("--training-profile " + shown(e) + ": profile names are 1-64 letters, digits, '_', '.', '-'");
    if (has_control(script) || !fs::path(script).is_absolute())
      return fail("--training-profile " + shown(e) + ": the script path must be absolute");
    for (const auto& [n, s] : out)
      if (n == name) return fail("--training-profile " + shown(name) + " given twice");
    out.emplace_back(std::move(name), std::move(script));
  }
  return out;
}

Result<void> check_slurm(const InstallOptions& o) {
  if (!o.slurm) {
    bool any = !o.slurm_partition.empty() || !o.slurm_time.empty() || !o.slurm_account.empty() ||
               !o.slurm_qos.empty();
    if (any) return fail("--slurm-partition, --slurm-time, --slurm-account and --slurm-qos need --slurm");
    return {};
  }
  for (auto [flag, key, value] : {std::tuple{"--slurm-partition", "partition", &o.slurm_partition},
                                  std::tuple{"--slurm-account", "account", &o.slurm_account},
                                  std::tuple{"--slurm-qos", "qos", &o.slurm_qos}}) {
    if (!value->empty())
      if (auto r = check_slurm_value(flag, key, *value); !r) return r;
  }
  if (o.slurm_signal_lead < 1 || o.slurm_signal_lead > 65535)
    return fail("--slurm-signal-lead " + std::to_string(o.slurm_signal_lead) + ": expected 1 to 65535 seconds");
  if (o.slurm_time.empty()) return {};
  auto t = parse_slurm_time("--slurm-time", o.slurm_time);
  if (!t) return t.error();
  if (t->count() <= o.slurm_signal_lead)
    return fail("--slurm-signal-lead " + std::to_string(o.slurm_signal_lead) + "s must be shorter than --slurm-time " +
                o.slurm_time + " (" + std::to_string(t->count()) + "s)");
  return {};
}

Result<std::optional<std::string>> check_idle_exit(const InstallOptions& o) {
  if (o.idle_exit.empty()) return std::optional<std::string>{};
  auto d = parse_duration(o.idle_exit);
  if (!d) return fail("--idle-exit " + shown(o.idle_exit) + ": " + d.error().message);
  if (d->count() <= 0) return fail("--idle-exit " + shown(o.idle_exit) + ": must be longer than zero");
  return std::optional<std::string>{format_duration(*d)};
}

std::string render_config(const InstallPlan& plan, const std::map<std::string, std::string>& tags,
                          const std::optional<std::string>& idle_exit) {
  // Sections are printed one by one so they appear in a readable order; toml++ quotes every value.
  toml::table server{{"url", plan.server}, {"token_file", std::string(kTokenFile)}};
  toml::table worker{{"label", plan.worker_label}, {"launch_id", plan.launch_id}};
  if (idle_exit) worker.insert("idle_exit", *idle_exit);
  toml::table tag_table;
  for (const auto& [k, v] : tags) tag_table.insert(k, v);
  toml::table log{{"level", "info"}};
  toml::table manager{{"cluster", plan.cluster}, {"state_dir", plan.manager_state_dir.native()}};
  std::ostringstream out;
  out << "# nymph launch " << plan.launch_id << ", written by `nymph install`. The token is in ./" << kTokenFile
      << ".\n\n[server]\n"
      << server << "\n\n[worker]\n"
      << worker << "\n\n";
  if (!tags.empty()) out << "[worker.tags]\n" << tag_table << "\n\n";
  if (!plan.profiles.empty()) {
    toml::table profiles;
    for (const auto& [name, script] : plan.profiles) profiles.insert(name, script);
    out << "[profiles]\n" << profiles << "\n\n";
  }
  if (plan.mode == LaunchMode::local)
    out << "# The manager identity " << plan.identity << ": one manager at a time; its Slurm jobs outlive this launch.\n"
        << "[manager]\n" << manager << "\n\n";
  out << "[log]\n" << log << "\n";
  return out.str();
}

std::string render_sbatch_script(const InstallOptions& o, const InstallPlan& plan) {
  std::string s = "#!/bin/sh\n";
  auto directive = [&](std::string_view flag, const std::string& value) {
    if (!value.empty()) s += slurm::sbatch_directive(flag, value);
  };
  directive("job-name", plan.job_name);
  directive("partition", o.slurm_partition);
  directive("time", o.slurm_time);
  directive("account", o.slurm_account);
  directive("qos", o.slurm_qos);
  directive("output", plan.log_path.native());
  directive("open-mode", "append");
  directive("chdir", plan.launch_dir.native());
  directive("signal", "B:USR1@" + std::to_string(o.slurm_signal_lead));
  s += "# nymph launch " + plan.launch_id + " (worker " + plan.worker_label + ")\n";
  s += "exec " + shell_join(plan.daemon_argv) + "\n";
  return s;
}

}  // namespace

fs::path default_state_dir(const fs::path& home) { return home / ".local" / "share" / "nymph"; }

fs::path log_path_for(const fs::path& home, const std::string& launch_id) {
  return home / ".local" / "share" / ("nymph-" + launch_id + ".log");
}

Result<InstallPlan> make_install_plan(const InstallOptions& o, const HostFacts& host, const Ulid& id) {
  if (auto r = check_server(o.server); !r) return r.error();
  auto label = check_label(o, host);
  if (!label) return label.error();
  auto tags = parse_tags(o.tags);
  if (!tags) return tags.error();
  auto idle_exit = check_idle_exit(o);
  if (!idle_exit) return idle_exit.error();
  if (auto r = check_slurm(o); !r) return r.error();
  auto profiles = parse_profiles(o.training_profiles);
  if (!profiles) return profiles.error();
  if (!o.state_dir.empty() && !fs::path(o.state_dir).is_absolute())
    return fail("--state-dir " + shown(o.state_dir) + " must be an absolute path");
  if (o.slurm && (!o.cluster.empty() || o.replace))
    return fail("--cluster and --replace are for a login-node manager; a --slurm daemon runs inside its allocation "
                "and is not one");
  if (!o.cluster.empty() && !agent::is_valid_cluster_name(o.cluster))
    return fail("--cluster " + shown(o.cluster) +
                ": a cluster name is 1-64 letters, digits, '_', '.', '-', starting with a letter or digit");

  InstallPlan plan;
  plan.launch_id = id.str();
  plan.worker_label = *label + "-" + plan.launch_id;
  plan.mode = o.slurm ? LaunchMode::slurm : LaunchMode::local;
  plan.server = o.server;
  plan.profiles = std::move(*profiles);
  plan.state_dir = (o.state_dir.empty() ? default_state_dir(host.home) : fs::path(o.state_dir)).lexically_normal();
  plan.launch_dir = plan.state_dir / "launches" / plan.launch_id;
  plan.config_path = plan.launch_dir / kConfigFile;
  plan.log_path = log_path_for(host.home, plan.launch_id);
  if (auto r = check_paths(o, plan, host); !r) return r.error();
  if (!o.slurm) {
    plan.cluster = !o.cluster.empty() ? o.cluster : agent::is_valid_cluster_name(host.cluster) ? host.cluster
                   : agent::is_valid_cluster_name(host.hostname)                       ? host.hostname
                                                                                       : "localhost";
    plan.identity = (host.user.empty() ? "?" : host.user) + "@" + plan.cluster;
    fs::path base = !o.state_dir.empty()       ? plan.state_dir
                    : !host.data_home.empty() ? host.data_home / "nymph"
                                              : plan.state_dir;
    plan.manager_state_dir = (base / "managers" / plan.cluster).lexically_normal();
    if (has_control(plan.manager_state_dir.native()))
      return fail("path " + shown(plan.manager_state_dir.native()) + " must be free of control characters");
  }
  plan.config_toml = render_config(plan, *tags, *idle_exit);
  plan.daemon_argv = {host.nymph_exe.native(), "run", "--config", plan.config_path.native()};
  if (o.replace) plan.daemon_argv.push_back("--replace");
  if (o.slurm) {
    plan.job_name = "lakeshore-nymph-" + plan.launch_id;
    plan.sbatch_script = render_sbatch_script(o, plan);
  }
  return plan;
}

Result<std::string> check_token(std::string_view raw, std::string_view source) {
  auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
  while (!raw.empty() && is_space(raw.front())) raw.remove_prefix(1);
  if (raw.empty()) return fail("the token from " + std::string(source) + " is empty");
  if (raw.size() > 4096) return fail("the token from " + std::string(source) + " is longer than 4096 characters");
  for (char c : raw)
    if (c < 0x21 || c > 0x7e)
      return fail("the token from " + std::string(source) + " holds characters a token cannot contain");
  return std::string(raw);
}

std::string shell_quote(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word) safe = safe && (is_alnum(c) || std::string_view("_./:=@%+,-").find(c) != std::string_view::npos);
  if (safe) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

}  // namespace nymph::installer
