#include "slurm/options.hpp"

#include <algorithm>
#include <functional>

#include <boost/json/serialize.hpp>

#include "slurm/time.hpp"

namespace nymph::slurm {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_name_char(char c) { return is_alnum(c) || c == '_' || c == '.' || c == '-'; }

// A Slurm name (partition, account, qos, gres, feature): letters, digits, _ . -, not starting with '-'.
bool is_name(std::string_view s) {
  return !s.empty() && s.size() <= 128 && s.front() != '-' && std::all_of(s.begin(), s.end(), is_name_char);
}

bool is_name_list(std::string_view s) {
  auto parts = split(s, ',');
  return std::all_of(parts.begin(), parts.end(), is_name);
}

unsigned long long to_number(std::string_view digits) {
  unsigned long long n = 0;
  for (char c : digits) n = n * 10 + static_cast<unsigned>(c - '0');
  return n;
}

bool is_positive(std::string_view s) { return is_digits(s, 9) && to_number(s) > 0; }

bool is_node_count(std::string_view s) {
  auto parts = split(s, '-');
  if (parts.size() > 2 || !std::all_of(parts.begin(), parts.end(), [](auto p) { return is_positive(p); }))
    return false;
  return parts.size() == 1 || to_number(parts[0]) <= to_number(parts[1]);
}

// Memory size: digits with an optional K, M, G or T suffix.
bool is_memory(std::string_view s) {
  if (!s.empty() && std::string_view("KMGTkmgt").find(s.back()) != std::string_view::npos) s.remove_suffix(1);
  return is_digits(s, 12);
}

// gres list: name[:type][:count], comma-separated.
bool is_gres(std::string_view s) {
  for (auto item : split(s, ',')) {
    auto parts = split(item, ':');
    if (parts.size() > 3 || !is_name(parts[0])) return false;
    for (std::size_t i = 1; i < parts.size(); ++i) {
      bool last = i + 1 == parts.size();
      bool count = is_digits(parts[i], 9);  // an all-digit segment is a count, never a type
      if (count ? !(last && is_positive(parts[i])) : !is_name(parts[i])) return false;
    }
  }
  return true;
}

// gpus: [type:]count, comma-separated.
bool is_gpus(std::string_view s) {
  for (auto item : split(s, ',')) {
    auto parts = split(item, ':');
    if (parts.size() > 2 || !is_positive(parts.back())) return false;
    if (parts.size() == 2 && !is_name(parts[0])) return false;
  }
  return true;
}

// licenses: name[@server][:count], comma-separated.
bool is_licenses(std::string_view s) {
  for (auto item : split(s, ',')) {
    auto parts = split(item, ':');
    if (parts.size() > 2 || (parts.size() == 2 && !is_positive(parts[1]))) return false;
    auto names = split(parts[0], '@');
    if (names.size() > 2 || !std::all_of(names.begin(), names.end(), is_name)) return false;
  }
  return true;
}

// constraint: feature names joined by & | , with optional [ ] ( ) grouping and *count.
bool is_constraint(std::string_view s) {
  auto ok = [](char c) { return is_name_char(c) || std::string_view("&|,*[]():").find(c) != std::string_view::npos; };
  return !s.empty() && s.size() <= 256 && s.front() != '-' && std::all_of(s.begin(), s.end(), ok);
}

bool is_exclusive(std::string_view s) { return s.empty() || s == "user" || s == "mcs" || s == "topo"; }

struct Grammar {
  std::string_view key;
  std::function<bool(std::string_view)> accepts;
  std::string_view expected;
};

const std::vector<Grammar>& grammars() {
  static const std::vector<Grammar> table{
      {"partition", is_name_list, "partition names (letters, digits, _ . -), comma-separated"},
      {"time", is_time_limit, "a positive Slurm time: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S"},
      {"nodes", is_node_count, "a positive node count N or range N-M"},
      {"ntasks", is_positive, "a positive integer"},
      {"ntasks-per-node", is_positive, "a positive integer"},
      {"cpus-per-task", is_positive, "a positive integer"},
      {"mem", is_memory, "a memory size: digits with an optional K, M, G or T suffix"},
      {"mem-per-cpu", is_memory, "a memory size: digits with an optional K, M, G or T suffix"},
      {"mem-per-gpu", is_memory, "a memory size: digits with an optional K, M, G or T suffix"},
      {"gres", is_gres, "name[:type][:count], comma-separated"},
      {"gpus", is_gpus, "[type:]count, comma-separated"},
      {"gpus-per-node", is_gpus, "[type:]count, comma-separated"},
      {"gpus-per-task", is_gpus, "[type:]count, comma-separated"},
      {"constraint", is_constraint, "feature names with & | , * [ ] ( ) :"},
      {"account", is_name, "an account name (letters, digits, _ . -)"},
      {"qos", is_name, "a QOS name (letters, digits, _ . -)"},
      {"reservation", is_name, "a reservation name (letters, digits, _ . -)"},
      {"exclusive", is_exclusive, "true, false, \"user\", \"mcs\" or \"topo\""},
      {"licenses", is_licenses, "name[@server][:count], comma-separated"},
  };
  return table;
}

const Grammar* find_grammar(std::string_view key) {
  for (const auto& g : grammars())
    if (g.key == key) return &g;
  return nullptr;
}

bool has_control_char(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

std::string bad_value(std::string_view key, std::string_view value, std::string_view why) {
  return "runConfig.slurm." + std::string(key) + ": invalid value " + printable(value) + " (" +
         std::string(why) + ")";
}

// The text form of a JSON value, or an Error for types an option cannot have.
Result<std::string> option_text(std::string_view key, const boost::json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  if (v.is_int64() && v.get_int64() >= 0) return std::to_string(v.get_int64());
  if (v.is_bool() && key == "exclusive") return v.get_bool() ? std::string() : std::string("false");
  return fail("runConfig.slurm." + std::string(key) + ": invalid value " +
              printable(boost::json::serialize(v)) + " (wrong type: expected a string" +
              (key == "exclusive" ? " or a boolean)" : " or a non-negative integer)"));
}

}  // namespace

bool is_sbatch_path(std::string_view path) {
  return !path.empty() && path.front() == '/' && std::all_of(path.begin(), path.end(), [](char c) {
    return is_alnum(c) || std::string_view("/_.-+@,=:~").find(c) != std::string_view::npos;
  });
}

Result<void> check_sbatch_path(const std::filesystem::path& path) {
  if (is_sbatch_path(path.native())) return {};
  return fail("path " + printable(path.native()) +
              " cannot go into an sbatch script (absolute; letters, digits and / _ . - + @ , = : ~ only)");
}

std::string sbatch_argument(std::string_view key, std::string_view value) {
  std::string arg = "--" + std::string(key);
  if (!value.empty()) (arg += '=') += value;
  return arg;
}

std::string sbatch_directive(std::string_view key, std::string_view value) {
  return "#SBATCH " + sbatch_argument(key, value) + "\n";
}

const std::vector<std::string_view>& allowed_option_keys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k;
    for (const auto& g : grammars()) k.push_back(g.key);
    return k;
  }();
  return keys;
}

Result<std::string> check_option(std::string_view key, std::string_view value) {
  const Grammar* g = find_grammar(key);
  if (!g) return fail("runConfig.slurm: unknown key " + printable(key) + " (allowed: partition, time, nodes, ntasks, "
                      "ntasks-per-node, cpus-per-task, mem, mem-per-cpu, mem-per-gpu, gres, gpus, gpus-per-node, "
                      "gpus-per-task, constraint, account, qos, reservation, exclusive, licenses)");
  if (has_control_char(value)) return fail(bad_value(key, value, "contains a control character"));
  if (value.empty() && key != "exclusive") return fail(bad_value(key, value, "empty"));
  if (!g->accepts(value)) return fail(bad_value(key, value, std::string("expected ") + std::string(g->expected)));
  return std::string(value);
}

Result<std::vector<SbatchOption>> validate_options(const boost::json::object& slurm, const OptionDefaults& defaults) {
  std::vector<SbatchOption> chosen;
  for (const auto& [k, v] : slurm) {
    std::string_view key(k.data(), k.size());
    if (!find_grammar(key)) return check_option(key, "").error();
    auto text = option_text(key, v);
    if (!text) return text.error();
    if (key == "exclusive" && *text == "false") continue;
    auto checked = check_option(key, *text);
    if (!checked) return checked.error();
    chosen.push_back({std::string(key), std::move(*checked)});
  }
  auto add_default = [&](std::string_view key, const std::string& value) -> Result<void> {
    if (value.empty() || slurm.contains(key)) return {};
    auto checked = check_option(key, value);
    if (!checked) return fail("[runners.slurm] default " + checked.error().message);
    chosen.push_back({std::string(key), std::move(*checked)});
    return {};
  };
  for (auto [key, value] : {std::pair<std::string_view, const std::string&>{"account", defaults.account},
                            {"qos", defaults.qos}, {"partition", defaults.partition}}) {
    if (auto r = add_default(key, value); !r) return r.error();
  }
  const auto& order = allowed_option_keys();
  auto rank = [&](const SbatchOption& o) { return std::find(order.begin(), order.end(), o.key) - order.begin(); };
  std::stable_sort(chosen.begin(), chosen.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return chosen;
}

}  // namespace nymph::slurm
