#include "agent/config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "common/duration.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "common/toml_nesting.hpp"
#include "http/url.hpp"
#include "slurm/options.hpp"

namespace nymph::agent {

namespace {

// Internal: aborts parsing with a message that already names file, line and key.
struct ConfigError {
  std::string message;
};

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

// Reads the keys of one TOML table, remembering which it consumed so unknown keys can be reported.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string section, const std::string& source)
      : table_(table), section_(std::move(section)), source_(source) {}

  [[noreturn]] void fail_at(const toml::node& n, const std::string& key, const std::string& what) const {
    throw ConfigError{source_ + ":" + std::to_string(n.source().begin.line) + ": " + qualified(key) + ": " + what};
  }

  // Refuses a NUL byte in a string or key (it would cut the path, argument or tag it ends up in).
  void no_nul(const toml::node& n, const std::string& key, std::string_view text) const {
    if (text.find('\0') != std::string_view::npos) fail_at(n, key, "must not contain NUL");
  }

  const toml::node* find(const std::string& key) {
    seen_.insert(key);
    return table_.get(key);
  }

  void string(const std::string& key, std::string& out) {
    if (auto* n = find(key)) {
      auto* s = n->as_string();
      if (!s) fail_at(*n, key, "expected a string, got " + type_name(*n));
      no_nul(*n, key, s->get());
      out = s->get();
    }
  }

  void path(const std::string& key, std::filesystem::path& out) {
    std::string s;
    bool present = table_.contains(key);
    string(key, s);
    if (present) {
      if (s.empty()) fail_at(*table_.get(key), key, "must not be empty");
      out = s;
    }
  }

  void optional_path(const std::string& key, std::optional<std::filesystem::path>& out) {
    if (table_.contains(key)) {
      std::filesystem::path p;
      path(key, p);
      out = p;
    } else {
      seen_.insert(key);
    }
  }

  void boolean(const std::string& key, bool& out) {
    if (auto* n = find(key)) {
      auto* b = n->as_boolean();
      if (!b) fail_at(*n, key, "expected true or false, got " + type_name(*n));
      out = b->get();
    }
  }

  void integer(const std::string& key, int& out, long long min, long long max) {
    if (auto* n = find(key)) {
      auto* i = n->as_integer();
      if (!i) fail_at(*n, key, "expected an integer, got " + type_name(*n));
      if (i->get() < min || i->get() > max)
        fail_at(*n, key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                             std::to_string(i->get()));
      out = static_cast<int>(i->get());
    }
  }

  // A duration: a string such as "30s" / "250ms" / "5m", or an integer number of seconds.
  void duration(const std::string& key, milliseconds& out) {
    if (auto* n = find(key)) out = to_duration(*n, key);
  }

  // The same, within [min, max].
  void duration(const std::string& key, milliseconds& out, milliseconds min, milliseconds max) {
    if (auto* n = find(key)) {
      out = to_duration(*n, key);
      if (out < min || out > max)
        fail_at(*n, key, "must be between " + std::to_string(min.count()) + "ms and " + std::to_string(max.count()) + "ms");
    }
  }

  void optional_duration(const std::string& key, std::optional<milliseconds>& out) {
    if (auto* n = find(key)) {
      // `false` or "off" turns it off explicitly.
      if (auto* b = n->as_boolean(); b && !b->get()) {
        out.reset();
        return;
      }
      if (auto* s = n->as_string(); s && s->get() == "off") {
        out.reset();
        return;
      }
      out = to_duration(*n, key);
    }
  }

  // A non-empty array of durations, each within [min, max].
  void duration_list(const std::string& key, std::vector<milliseconds>& out, milliseconds min, milliseconds max) {
    if (auto* n = find(key)) {
      auto* a = n->as_array();
      if (!a || a->empty()) fail_at(*n, key, "expected a non-empty array of durations such as [\"1m\", \"5m\"]");
      out.clear();
      for (auto&& v : *a) {
        milliseconds d = to_duration(v, key);
        if (d < min || d > max)
          fail_at(v, key, "each must be between " + format_duration(min) + " and " + format_duration(max));
        out.push_back(d);
      }
    }
  }

  void string_map(const std::string& key, std::map<std::string, std::string>& out) {
    if (auto* n = find(key)) {
      auto* t = n->as_table();
      if (!t) fail_at(*n, key, "expected a table of strings (e.g. { site = \"lab\" }), got " + type_name(*n));
      for (auto&& [k, v] : *t) {
        auto* s = v.as_string();
        if (!s) fail_at(v, key + "." + std::string(k.str()), "expected a string, got " + type_name(v));
        no_nul(v, key + "." + std::string(k.str()), std::string(k.str()) + s->get());
        out[std::string(k.str())] = s->get();
      }
    }
  }

  void string_list(const std::string& key, std::vector<std::string>& out) {
    if (auto* n = find(key)) {
      auto* a = n->as_array();
      if (!a) fail_at(*n, key, "expected an array of strings, got " + type_name(*n));
      for (auto&& v : *a) {
        auto* s = v.as_string();
        if (!s) fail_at(v, key, "expected an array of strings, found " + type_name(v));
        no_nul(v, key, s->get());
        out.push_back(s->get());
      }
    }
  }

  // A sub-table; returns nullptr when absent.
  const toml::table* table(const std::string& key) {
    if (auto* n = find(key)) {
      auto* t = n->as_table();
      if (!t) fail_at(*n, key, "expected a section/table, got " + type_name(*n));
      return t;
    }
    return nullptr;
  }

  // Reports the first key this reader was not asked about.
  void reject_unknown_keys() const {
    for (auto&& [k, v] : table_) {
      std::string key(k.str());
      if (!seen_.contains(key)) {
        throw ConfigError{source_ + ":" + std::to_string(v.source().begin.line) + ": unknown key " +
                          qualified(key) + (section_.empty() ? "" : " (not a key of [" + section_ + "])")};
      }
    }
  }

  std::string qualified(const std::string& key) const { return section_.empty() ? key : section_ + "." + key; }

 private:
  milliseconds to_duration(const toml::node& n, const std::string& key) const {
    if (auto* i = n.as_integer()) {
      if (i->get() < 0) fail_at(n, key, "must not be negative");
      if (i->get() > std::chrono::duration_cast<std::chrono::seconds>(kMaxDuration).count())
        fail_at(n, key, "must be at most " + format_duration(kMaxDuration));
      return milliseconds(i->get() * 1000);
    }
    if (auto* s = n.as_string()) {
      auto d = parse_duration(s->get());
      if (!d) fail_at(n, key, d.error().message);
      return *d;
    }
    fail_at(n, key, "expected a duration such as \"30s\", got " + type_name(n));
  }

  const toml::table& table_;
  std::string section_;
  const std::string& source_;
  std::set<std::string> seen_;
};

void read_server(TableReader& r, ServerConfig& s) {
  r.string("url", s.url);
  r.path("token_file", s.token_file);
  r.optional_path("ca_file", s.ca_file);
  r.duration("poll_timeout", s.poll_timeout);
  r.boolean("allow_insecure_http", s.allow_insecure_http);
  r.reject_unknown_keys();
}

void read_worker(TableReader& r, WorkerConfig& w) {
  r.string("label", w.label);
  r.string("launch_id", w.launch_id);
  r.string_map("tags", w.tags);
  r.path("work_dir", w.work_dir);
  r.integer("max_process_jobs", w.max_process_jobs, 0, 4096);
  r.optional_duration("idle_exit", w.idle_exit);
  r.duration("drain_grace", w.drain_grace);
  r.duration("stop_timeout", w.stop_timeout, milliseconds(1'000), kMaxStopTimeout);
  r.duration("walltime_lead", w.walltime_lead, milliseconds(0), milliseconds(86'400'000));
  r.reject_unknown_keys();
}

void read_chain(TableReader& r, ChainSection& c) {
  c.keep = true;
  r.path("script", c.script);
  r.integer("min_generations", c.min_generations, 1, 1'000'000);
  r.integer("max_generations", c.max_generations, 0, 1'000'000);
  if (auto* n = r.find("max_generations"); n && c.max_generations > 0 && c.max_generations < c.min_generations)
    r.fail_at(*n, "max_generations", "must not be below min_generations (0: no limit)");
  r.duration("idle_end", c.idle_end, milliseconds(1'000), milliseconds(30LL * 86'400'000));
  r.duration("successor_floor", c.successor_floor, milliseconds(1'000), milliseconds(86'400'000));
  r.duration("successor_ceiling", c.successor_ceiling, milliseconds(1'000), milliseconds(7LL * 86'400'000));
  if (auto* n = r.find("successor_ceiling"); n && c.successor_ceiling < c.successor_floor)
    r.fail_at(*n, "successor_ceiling", "must not be shorter than successor_floor");
  r.duration_list("submit_backoff", c.submit_backoff, milliseconds(1'000), milliseconds(86'400'000));
  r.integer("pause_after", c.pause_after, 1, 1'000);
  r.reject_unknown_keys();
}

void read_process(TableReader& r, ProcessSection& p) {
  r.boolean("enabled", p.enabled);
  r.boolean("allow_commands", p.allow_commands);
  r.duration("kill_grace", p.kill_grace);
  r.boolean("keep_work_dirs", p.keep_work_dirs);
  r.reject_unknown_keys();
}

void read_slurm(TableReader& r, SlurmSection& s) {
  if (auto* n = r.find("enabled")) {
    if (auto* b = n->as_boolean()) {
      s.enabled = b->get() ? "true" : "false";
    } else if (auto* str = n->as_string(); str && (str->get() == "auto" || str->get() == "true" || str->get() == "false")) {
      s.enabled = str->get();
    } else {
      r.fail_at(*n, "enabled", "expected auto, true or false");
    }
  }
  r.duration("poll_interval", s.poll_interval);
  r.duration("poll_interval_max", s.poll_interval_max);
  if (auto* n = r.find("poll_interval_max"); n && s.poll_interval_max < s.poll_interval)
    r.fail_at(*n, "poll_interval_max", "must not be shorter than poll_interval");
  if (!r.find("poll_interval_max")) s.poll_interval_max = std::max(s.poll_interval_max, s.poll_interval);
  r.integer("rpc_budget_per_minute", s.rpc_budget_per_minute, 1, 100'000);
  r.duration("exit_scan_interval", s.exit_scan_interval);
  // The site defaults go on sbatch's command line or into #SBATCH lines: the runConfig.slurm grammar.
  for (auto [key, out] : {std::pair<const char*, std::string*>{"account", &s.account}, {"qos", &s.qos},
                          {"partition", &s.partition}}) {
    r.string(key, *out);
    if (auto* n = r.find(key); n && !out->empty()) {
      if (auto ok = slurm::check_option(key, *out); !ok) {
        std::string why = ok.error().message;
        if (auto colon = why.find(": "); colon != std::string::npos) why.erase(0, colon + 2);
        r.fail_at(*n, key, why);
      }
    }
  }
  r.path("launch_dir", s.launch_dir);
  r.integer("max_jobs", s.max_jobs, 1, 100'000);
  r.integer("max_array_tasks", s.max_array_tasks, 1, 1'000'000);
  r.integer("max_concurrent_commands", s.max_concurrent_commands, 1, 256);
  r.duration("max_poll_duration", s.max_poll_duration);
  r.duration("max_queue_duration", s.max_queue_duration);
  r.duration("command_timeout", s.command_timeout);
  r.string("sbatch", s.sbatch);
  r.string("squeue", s.squeue);
  r.string("sacct", s.sacct);
  r.string("scancel", s.scancel);
  r.boolean("keep_job_dirs", s.keep_job_dirs);
  r.reject_unknown_keys();
}

// A cluster name goes into the identity "<user>@<cluster>" and into a directory name.
bool is_cluster_name(const std::string& s) {
  static const std::regex re("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}");
  return std::regex_match(s, re);
}

void read_manager(TableReader& r, ManagerSection& m) {
  r.string("cluster", m.cluster);
  if (auto* n = r.find("cluster"); n && !is_cluster_name(m.cluster))
    r.fail_at(*n, "cluster", "expected 1-64 letters, digits, '_', '.', '-' starting with a letter or digit, got '" +
                                 m.cluster + "'");
  r.path("state_dir", m.state_dir);
  r.duration("heartbeat_interval", m.heartbeat_interval);
  if (auto* n = r.find("heartbeat_interval");
      n && (m.heartbeat_interval < milliseconds(100) || m.heartbeat_interval > milliseconds(3'600'000)))
    r.fail_at(*n, "heartbeat_interval", "must be between 100ms and 1h");
  r.reject_unknown_keys();
}

void read_profiles(const toml::table& t, const std::string& source, std::vector<ProfileConfig>& out) {
  static const std::regex name_re("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}");
  TableReader r(t, "profiles", source);
  for (auto&& [k, v] : t) {
    std::string name(k.str());
    if (!std::regex_match(name, name_re)) r.fail_at(v, name, "profile names use letters, digits, '_', '.', '-'");
    ProfileConfig p{.name = name};
    if (auto* s = v.as_string()) {
      r.find(name);
      r.no_nul(v, name, s->get());
      p.script = s->get();
    } else if (auto* sub = v.as_table()) {
      r.find(name);
      TableReader pr(*sub, "profiles." + name, source);
      pr.path("script", p.script);
      pr.string_list("parameters", p.allowed_parameters);
      int cap = static_cast<int>(p.max_input_bytes);
      pr.integer("max_input_bytes", cap, 2, 64 * 1024 * 1024);
      p.max_input_bytes = static_cast<std::size_t>(cap);
      pr.reject_unknown_keys();
      if (p.script.empty()) pr.fail_at(v, "script", "is required");
    } else {
      r.fail_at(v, name, "expected a script path or a table { script = ..., parameters = [...] }");
    }
    if (!p.script.is_absolute()) r.fail_at(v, name, "script path must be absolute, got '" + p.script.string() + "'");
    out.push_back(std::move(p));
  }
}

void read_log(TableReader& r, LogConfig& l) {
  r.string("level", l.level);
  if (auto* n = r.find("level")) {
    static const std::set<std::string> levels{"trace", "debug", "info", "warn", "error", "critical", "off"};
    if (!levels.contains(l.level)) r.fail_at(*n, "level", "expected one of trace, debug, info, warn, error, critical, off; got '" + l.level + "'");
  }
  if (r.find("file")) r.path("file", l.file);
  r.reject_unknown_keys();
}

void check_required(const AgentConfig& c, const std::string& source) {
  if (c.server.url.empty()) throw ConfigError{source + ": [server] url is required"};
}

}  // namespace

Result<AgentConfig> parse_config(std::string_view text, const std::string& source) {
  AgentConfig config;
  if (auto ok = check_toml_nesting(text, source); !ok) return ok.error();
  try {
    toml::table root = toml::parse(text, source);
    TableReader top(root, "", source);
    if (auto* t = top.table("server")) {
      TableReader r(*t, "server", source);
      read_server(r, config.server);
    }
    if (auto* t = top.table("worker")) {
      TableReader r(*t, "worker", source);
      read_worker(r, config.worker);
    }
    if (auto* runners = top.table("runners")) {
      TableReader rr(*runners, "runners", source);
      if (auto* t = rr.table("process")) {
        TableReader r(*t, "runners.process", source);
        read_process(r, config.process);
      }
      if (auto* t = rr.table("slurm")) {
        TableReader r(*t, "runners.slurm", source);
        read_slurm(r, config.slurm);
      }
      rr.reject_unknown_keys();
    }
    if (auto* t = top.table("manager")) {
      TableReader r(*t, "manager", source);
      read_manager(r, config.manager);
    }
    if (auto* t = top.table("chain")) {
      TableReader r(*t, "chain", source);
      read_chain(r, config.chain);
    }
    if (auto* t = top.table("profiles")) read_profiles(*t, source, config.profiles);
    if (auto* t = top.table("log")) {
      TableReader r(*t, "log", source);
      read_log(r, config.log);
    }
    top.reject_unknown_keys();
    check_required(config, source);
  } catch (const toml::parse_error& e) {
    return fail(source + ":" + std::to_string(e.source().begin.line) + ": invalid TOML: " +
                std::string(e.description()));
  } catch (const ConfigError& e) {
    return fail(e.message);
  }
  if (auto ok = check_server_url(config.server); !ok) return fail(source + ": " + ok.error().message);
  return config;
}

Result<AgentConfig> load_config(const std::filesystem::path& path) {
  auto text = read_small_file(path, "config file", kMaxConfigFileBytes);
  if (!text) return text.error();
  return parse_config(*text, path.string());
}

Result<void> check_server_url(const ServerConfig& server) {
  auto plain = server.allow_insecure_http ? http::PlainHttp::anywhere : http::PlainHttp::loopback_only;
  if (auto ep = http::parse_server_url(server.url, plain); !ep) return fail("[server] url: " + ep.error().message);
  return {};
}

Result<std::string> read_token_file(const std::filesystem::path& path) {
  auto data = read_private_file(path, "token file", kMaxTokenFileBytes);
  if (!data) return data.error();
  std::string token(trim(*data));
  if (token.empty()) return fail("token file " + path.string() + " is empty");
  for (char c : token)
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
      return fail("token file " + path.string() + " holds characters a token cannot contain");
  return token;
}

}  // namespace nymph::agent
