#include "installer/plan.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include <toml++/toml.h>

#include "common/duration.hpp"
#include "common/toml_nesting.hpp"
#include "agent/chain_record.hpp"
#include "agent/config.hpp"
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

// --keep and its options: a chain needs an allocation with an end.
Result<void> check_keep(const InstallOptions& o) {
  bool any = o.keep_min || o.keep_max || !o.keep_idle.empty();
  if (!o.keep) {
    if (any) return fail("--keep-min, --keep-max and --keep-idle need --keep");
    return {};
  }
  if (!o.slurm) return fail("--keep needs --slurm: a kept launch is a chain of Slurm allocations");
  if (o.slurm_time.empty())
    return fail("--keep needs --slurm-time: each generation submits its successor before its own walltime");
  if (o.keep_min && (*o.keep_min < 1 || *o.keep_min > 1'000'000))
    return fail("--keep-min " + std::to_string(*o.keep_min) + ": expected 1 to 1000000 generations");
  if (o.keep_max && (*o.keep_max < 0 || *o.keep_max > 1'000'000))
    return fail("--keep-max " + std::to_string(*o.keep_max) + ": expected 0 (no limit) to 1000000 generations");
  if (o.keep_max && *o.keep_max > 0 && *o.keep_max < o.keep_min.value_or(1))
    return fail("--keep-max " + std::to_string(*o.keep_max) + " is below --keep-min " +
                std::to_string(o.keep_min.value_or(1)));
  if (!o.keep_idle.empty()) {
    auto d = parse_duration(o.keep_idle);
    if (!d) return fail("--keep-idle " + shown(o.keep_idle) + ": " + d.error().message);
    if (*d < std::chrono::seconds(1)) return fail("--keep-idle " + shown(o.keep_idle) + ": at least 1s");
  }
  return {};
}

Result<std::optional<std::string>> check_idle_exit(const InstallOptions& o) {
  if (o.idle_exit.empty()) return std::optional<std::string>{};
  auto d = parse_duration(o.idle_exit);
  if (!d) return fail("--idle-exit " + shown(o.idle_exit) + ": " + d.error().message);
  if (d->count() <= 0) return fail("--idle-exit " + shown(o.idle_exit) + ": must be longer than zero");
  return std::optional<std::string>{format_duration(*d)};
}

// --account, --qos, --partition, --launch-dir, --profiles-only, --max-jobs, --max-poll-duration, --drain-grace:
// each checked with the grammar `nymph run` applies to the key it becomes (agent/config.cpp, slurm/options.hpp).
Result<SiteConfig> check_site(const InstallOptions& o) {
  SiteConfig site;
  for (auto [flag, key, value, out] : {std::tuple{"--account", "account", &o.account, &site.account},
                                       std::tuple{"--qos", "qos", &o.qos, &site.qos},
                                       std::tuple{"--partition", "partition", &o.partition, &site.partition}}) {
    if (value->empty()) continue;
    if (auto r = check_slurm_value(flag, key, *value); !r) return r.error();
    *out = *value;
  }
  if (!o.launch_dir.empty()) {
    if (has_control(o.launch_dir) || !fs::path(o.launch_dir).is_absolute())
      return fail("--launch-dir " + shown(o.launch_dir) + ": must be an absolute path");
    if (!slurm::is_sbatch_path(o.launch_dir))
      return fail("--launch-dir " + shown(o.launch_dir) +
                  ": job directories go into sbatch lines (use letters, digits and / . _ + , @ = : ~ -)");
    site.launch_dir = fs::path(o.launch_dir).lexically_normal().native();
  }
  site.profiles_only = o.profiles_only;
  if (o.max_jobs) {
    if (*o.max_jobs < 1 || *o.max_jobs > 100'000)
      return fail("--max-jobs " + std::to_string(*o.max_jobs) + ": expected 1 to 100000 Slurm jobs at once");
    site.max_jobs = o.max_jobs;
  }
  for (auto [flag, value, out] : {std::tuple{"--max-poll-duration", &o.max_poll_duration, &site.max_poll_duration},
                                  std::tuple{"--drain-grace", &o.drain_grace, &site.drain_grace}}) {
    if (value->empty()) continue;
    auto d = parse_duration(*value);
    if (!d) return fail(std::string(flag) + " " + shown(*value) + ": " + d.error().message);
    if (d->count() <= 0) return fail(std::string(flag) + " " + shown(*value) + ": must be longer than zero");
    *out = format_duration(*d);
  }
  site.config_fragment = o.config_fragment;
  return site;
}

// The generated configuration, before a fragment is merged in. toml++ quotes every value.
toml::table generated_config(const InstallOptions& o, const InstallPlan& plan,
                             const std::map<std::string, std::string>& tags,
                             const std::optional<std::string>& idle_exit) {
  const SiteConfig& site = plan.site;
  toml::table worker{{"label", plan.worker_label}, {"launch_id", plan.launch_id}};
  if (idle_exit) worker.insert("idle_exit", *idle_exit);
  if (!site.drain_grace.empty()) worker.insert("drain_grace", site.drain_grace);
  // The daemon drains when Slurm's SIGUSR1 comes, and by its own clock as early: the same lead.
  if (plan.mode == LaunchMode::slurm) worker.insert("walltime_lead", std::to_string(o.slurm_signal_lead) + "s");
  if (!tags.empty()) {
    toml::table tag_table;
    for (const auto& [k, v] : tags) tag_table.insert(k, v);
    worker.insert("tags", std::move(tag_table));
  }
  toml::table root{{"server", toml::table{{"url", plan.server}, {"token_file", std::string(kTokenFile)}}},
                   {"worker", std::move(worker)},
                   {"log", toml::table{{"level", "info"}}}};
  if (!plan.profiles.empty()) {
    toml::table profiles;
    for (const auto& [name, script] : plan.profiles) profiles.insert(name, script);
    root.insert("profiles", std::move(profiles));
  }
  toml::table runners;
  if (site.profiles_only) runners.insert("process", toml::table{{"allow_commands", false}});
  toml::table slurm;
  for (auto [key, value] : {std::pair<const char*, const std::string*>{"account", &site.account},
                            {"qos", &site.qos}, {"partition", &site.partition}, {"launch_dir", &site.launch_dir},
                            {"max_poll_duration", &site.max_poll_duration}})
    if (!value->empty()) slurm.insert(key, *value);
  if (site.max_jobs) slurm.insert("max_jobs", *site.max_jobs);
  if (!slurm.empty()) runners.insert("slurm", std::move(slurm));
  if (!runners.empty()) root.insert("runners", std::move(runners));
  if (plan.mode == LaunchMode::local)
    root.insert("manager", toml::table{{"cluster", plan.cluster}, {"state_dir", plan.manager_state_dir.native()}});
  if (plan.keep) {
    toml::table chain{{"script", std::string(agent::kChainScript)}};
    if (o.keep_min) chain.insert("min_generations", *o.keep_min);
    if (o.keep_max) chain.insert("max_generations", *o.keep_max);
    if (!o.keep_idle.empty()) chain.insert("idle_end", format_duration(*parse_duration(o.keep_idle)));
    root.insert("chain", std::move(chain));
  }
  return root;
}

// The option of nymph install that writes a generated key (for a fragment's conflict message).
std::string writer_of(const std::string& key) {
  static const std::vector<std::pair<std::string, std::string>> writers{
      {"server.url", "--server"}, {"server.token_file", "--token-file/--token-stdin (the launch's token file)"},
      {"worker.label", "--label"}, {"worker.launch_id", "nymph install (the launch ID)"},
      {"worker.idle_exit", "--idle-exit"}, {"worker.drain_grace", "--drain-grace"}, {"worker.tags.", "--tag"},
      {"worker.walltime_lead", "--slurm-signal-lead"}, {"chain.script", "--keep"},
      {"chain.min_generations", "--keep-min"}, {"chain.max_generations", "--keep-max"},
      {"chain.idle_end", "--keep-idle"},
      {"profiles.", "--training-profile"}, {"runners.process.allow_commands", "--profiles-only"},
      {"runners.slurm.account", "--account"}, {"runners.slurm.qos", "--qos"},
      {"runners.slurm.partition", "--partition"}, {"runners.slurm.launch_dir", "--launch-dir"},
      {"runners.slurm.max_jobs", "--max-jobs"}, {"runners.slurm.max_poll_duration", "--max-poll-duration"},
      {"manager.cluster", "--cluster (or the detected cluster)"}, {"manager.state_dir", "--state-dir"}};
  for (const auto& [prefix, flag] : writers)
    if (key == prefix || (prefix.ends_with('.') && key.starts_with(prefix))) return flag;
  return "nymph install";
}

std::string line_of(const toml::node& n) { return std::to_string(n.source().begin.line); }

// Appends the dotted names of the leaves under `n` (n itself when it is not a table).
void leaf_keys(const toml::node& n, const std::string& key, std::vector<std::string>& out) {
  const auto* t = n.as_table();
  if (!t || t->empty()) {
    out.push_back(key);
    return;
  }
  for (auto&& [k, v] : *t) leaf_keys(v, key + "." + std::string(k.str()), out);
}

// Merges `from` into `into` key by key: new keys are added (recorded in `added`), tables are merged, and a key
// present in both is a conflict, except [log] level (a default of nymph install, not an option's value).
Result<void> merge_fragment(toml::table& into, const toml::table& from, const std::string& prefix,
                            const std::string& source, std::vector<std::string>& added) {
  for (auto&& [k, v] : from) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    toml::node* existing = into.get(k.str());
    if (!existing) {
      into.insert(k, v);
      leaf_keys(v, key, added);
      continue;
    }
    if (existing->is_table() && v.is_table()) {
      if (auto r = merge_fragment(*existing->as_table(), *v.as_table(), key, source, added); !r) return r;
      continue;
    }
    if (key == "log.level") {
      into.insert_or_assign(k, v);
      added.push_back(key);
      continue;
    }
    return fail("--config-fragment " + source + ":" + line_of(v) + ": " + key + " conflicts with " + writer_of(key) +
                ", which sets it too; set it in one place only");
  }
  return {};
}

// config.toml: the comment, then the sections in a readable order (each printed by toml++ with its full name).
std::string render_config(const InstallPlan& plan, const toml::table& root) {
  std::ostringstream out;
  out << "# nymph launch " << plan.launch_id << ", written by `nymph install`. The token is in ./" << kTokenFile
      << ".\n";
  if (!plan.site.config_fragment.empty())
    out << "# Merged with the site fragment " << plan.site.config_fragment << ".\n";
  std::vector<std::string> order{"server", "worker", "profiles", "runners", "manager", "chain", "log"};
  for (auto&& [k, v] : root)
    if (std::find(order.begin(), order.end(), k.str()) == order.end()) order.emplace_back(k.str());
  for (const auto& name : order) {
    const toml::node* section = root.get(name);
    if (!section) continue;
    if (name == "manager" && plan.mode == LaunchMode::local)
      out << "\n# The manager identity " << plan.identity
          << ": one manager at a time; its Slurm jobs outlive this launch.";
    toml::table one;
    one.insert(name, *section);
    constexpr auto flags = toml::toml_formatter::default_flags & ~toml::format_flags::indent_sub_tables;
    out << "\n" << toml::toml_formatter(one, flags) << "\n";
  }
  return out.str();
}

// Builds config.toml (the generated keys, the fragment merged in) and checks it as `nymph run` will read it.
// The profiles of the result (flags and fragment) become plan.profiles, so every one is checked at install.
Result<void> build_config(const InstallOptions& o, InstallPlan& plan, const std::map<std::string, std::string>& tags,
                          const std::optional<std::string>& idle_exit, const std::optional<ConfigFragment>& fragment) {
  if (fragment) plan.site.config_fragment = fragment->path;
  toml::table root = generated_config(o, plan, tags, idle_exit);
  if (fragment) {
    toml::table parsed;
    if (auto ok = check_toml_nesting(fragment->text, fragment->path); !ok)
      return fail("--config-fragment " + ok.error().message);
    try {
      parsed = toml::parse(fragment->text, fragment->path);
    } catch (const toml::parse_error& e) {
      return fail("--config-fragment " + fragment->path + ":" + std::to_string(e.source().begin.line) +
                  ": invalid TOML: " + std::string(e.description()));
    }
    if (auto r = merge_fragment(root, parsed, "", fragment->path, plan.site.fragment_keys); !r) return r;
  }
  plan.config_toml = render_config(plan, root);
  auto config = agent::parse_config(plan.config_toml, "config.toml");
  if (!config)
    return fail("the config.toml nymph install would write is refused" +
                std::string(fragment ? " (check --config-fragment " + fragment->path + ")" : "") + ": " +
                config.error().message);
  plan.profiles.clear();
  for (const auto& p : config->profiles) plan.profiles.emplace_back(p.name, p.script.native());
  if (plan.site.profiles_only && plan.profiles.empty())
    return fail("--profiles-only: this worker would have no training profile to run; add --training-profile "
                "NAME=/abs/script (or [profiles] in --config-fragment)");
  return {};
}

std::string render_sbatch_script(const InstallOptions& o, const InstallPlan& plan) {
  std::string s = "#!/bin/sh\n";
  auto directive = [&](std::string_view flag, const std::string& value) {
    if (!value.empty()) s += slurm::sbatch_directive(flag, value);
  };
  directive("job-name", plan.job_name);
  directive("partition", o.slurm_partition);
  directive("time", o.slurm_time);
  // The site's --account/--qos also pay for the daemon's own allocation unless --slurm-account/--slurm-qos
  // say otherwise.
  directive("account", o.slurm_account.empty() ? o.account : o.slurm_account);
  directive("qos", o.slurm_qos.empty() ? o.qos : o.slurm_qos);
  directive("output", plan.log_path.native());
  directive("open-mode", "append");
  directive("chdir", plan.launch_dir.native());
  directive("signal", "B:USR1@" + std::to_string(o.slurm_signal_lead));
  s += "# nymph launch " + plan.launch_id + " (worker " + plan.worker_label + ")\n";
  if (plan.keep) {
    s += "# A kept launch: each generation submits the next with `sbatch --parsable " + plan.chain_script.native() +
         " <generation>`.\n";
    s += "exec " + shell_join(plan.daemon_argv) + " --generation \"${1:-1}\"\n";
  } else {
    s += "exec " + shell_join(plan.daemon_argv) + "\n";
  }
  return s;
}

}  // namespace

fs::path default_state_dir(const fs::path& home) { return home / ".local" / "share" / "nymph"; }

fs::path log_path_for(const fs::path& home, const std::string& launch_id) {
  return home / ".local" / "share" / ("nymph-" + launch_id + ".log");
}

Result<InstallPlan> make_install_plan(const InstallOptions& o, const HostFacts& host, const Ulid& id,
                                      const std::optional<ConfigFragment>& fragment) {
  if (auto r = check_server(o.server); !r) return r.error();
  auto label = check_label(o, host);
  if (!label) return label.error();
  auto tags = parse_tags(o.tags);
  if (!tags) return tags.error();
  auto idle_exit = check_idle_exit(o);
  if (!idle_exit) return idle_exit.error();
  if (auto r = check_slurm(o); !r) return r.error();
  if (auto r = check_keep(o); !r) return r.error();
  auto profiles = parse_profiles(o.training_profiles);
  if (!profiles) return profiles.error();
  auto site = check_site(o);
  if (!site) return site.error();
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
  plan.site = std::move(*site);
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
  plan.keep = o.keep;
  if (auto r = build_config(o, plan, *tags, *idle_exit, fragment); !r) return r.error();
  plan.daemon_argv = {host.nymph_exe.native(), "run", "--config", plan.config_path.native()};
  if (o.replace) plan.daemon_argv.emplace_back("--replace");
  if (o.slurm) {
    plan.job_name = "lakeshore-nymph-" + plan.launch_id;
    if (plan.keep) plan.chain_script = plan.launch_dir / agent::kChainScript;
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
