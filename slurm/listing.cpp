#include "slurm/listing.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include <boost/json/parse.hpp>

#include "slurm/commands.hpp"
#include "slurm/options.hpp"
#include "slurm/parse.hpp"

namespace nymph::slurm {
namespace {

namespace json = boost::json;

std::string local_time(std::int64_t epoch) {
  std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string string_field(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v) return {};
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_array() && !v->get_array().empty() && v->get_array()[0].is_string())
    return std::string(v->get_array()[0].get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  return {};
}

std::optional<std::int64_t> number_field(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (v && v->is_object()) v = v->get_object().if_contains("number");  // {"set":..,"number":N} (23.x+)
  if (v && v->is_int64()) return v->get_int64();
  if (v && v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return std::nullopt;
}

SlurmJobRow make_row(std::string id, std::string slurm_state, std::string partition, std::string submitted,
                     std::string name, std::string account) {
  SlurmJobRow r{std::move(id), std::string(listing_state(slurm_state)), std::move(slurm_state),
                std::move(partition), std::move(submitted), std::move(name), {}};
  if (!account.empty() && account != "(null)") r.tags["account"] = std::move(account);
  return r;
}

std::string effective_user() {
  if (const passwd* pw = ::getpwuid(::geteuid())) return pw->pw_name;
  return std::to_string(::geteuid());
}

std::string describe(const Result<CommandResult>& r) {
  if (!r) return r.error().message;
  std::string err(trim(r->err));
  return "exit status " + std::to_string(r->exit_code) + (err.empty() ? "" : ": " + err);
}

}  // namespace

std::string_view listing_state(std::string_view s) {
  if (s == "RUNNING") return "running";
  if (s == "PENDING") return "starting";
  if (s == "COMPLETING" || s == "STOPPING") return "stopping";
  return "unknown";
}

Result<std::vector<SlurmJobRow>> parse_squeue_json_jobs(std::string_view text, std::string_view user) {
  boost::system::error_code ec;
  auto doc = json::parse(text, ec);
  const json::value* jobs = !ec && doc.is_object() ? doc.get_object().if_contains("jobs") : nullptr;
  if (!jobs || !jobs->is_array()) return fail("squeue --json did not print an object with a \"jobs\" array");
  std::vector<SlurmJobRow> rows;
  for (const auto& j : jobs->get_array()) {
    if (!j.is_object()) continue;
    const auto& o = j.get_object();
    if (string_field(o, "user_name") != user || !is_job_id(string_field(o, "job_id"))) continue;
    auto submit = number_field(o, "submit_time");
    rows.push_back(make_row(string_field(o, "job_id"), string_field(o, "job_state"), string_field(o, "partition"),
                            submit ? local_time(*submit) : std::string(), string_field(o, "name"),
                            string_field(o, "account")));
  }
  return rows;
}

Result<std::vector<SlurmJobRow>> parse_squeue_list(std::string_view text) {
  std::vector<SlurmJobRow> rows;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    std::vector<std::string_view> f;
    std::string_view rest = line;
    for (int i = 0; i < 4 && rest.find(',') != std::string_view::npos; ++i) {
      f.push_back(rest.substr(0, rest.find(',')));
      rest.remove_prefix(rest.find(',') + 1);
    }
    auto last = rest.rfind(',');
    if (f.size() != 4 || last == std::string_view::npos || !is_job_id(f[0]))
      return fail("cannot read squeue line " + printable(line) + " (expected id,state,partition,submit,name,account)");
    rows.push_back(make_row(std::string(f[0]), std::string(f[1]), std::string(f[2]), std::string(f[3]),
                            std::string(rest.substr(0, last)), std::string(rest.substr(last + 1))));
  }
  return rows;
}

boost::asio::awaitable<Result<std::vector<SlurmJobRow>>> list_slurm_jobs(CommandRunner& commands, ListOptions options) {
  const std::string user = options.user.empty() ? effective_user() : options.user;
  auto r = co_await commands.run(list_json_argv(options.squeue), scrubbed_environment(), options.timeout);
  if (r && r->exit_code == 0) {
    if (auto rows = parse_squeue_json_jobs(r->out, user)) co_return rows;
  }
  auto t = co_await commands.run(list_text_argv(options.squeue), scrubbed_environment(), options.timeout);
  if (!t || t->exit_code != 0)
    co_return fail("squeue failed: " + describe(t) + (r ? "" : " (with --json: " + r.error().message + ")"));
  co_return parse_squeue_list(t->out);
}

boost::json::value listing_to_json(const std::vector<SlurmJobRow>& rows) {
  json::array jobs;
  for (const auto& r : rows) {
    json::object tags;
    for (const auto& [k, v] : r.tags) tags[k] = v;
    jobs.push_back(json::object{{"id", r.id}, {"state", r.state}, {"slurmState", r.slurm_state}, {"type", r.type},
                                {"submitted", r.submitted}, {"name", r.name}, {"tags", std::move(tags)}});
  }
  return json::object{{"jobs", std::move(jobs)}};
}

std::string listing_to_table(const std::vector<SlurmJobRow>& rows) {
  std::vector<std::vector<std::string>> cells{{"ID", "STATE", "TYPE", "SUBMITTED", "NAME", "TAGS"}};
  for (const auto& r : rows) {
    std::string tags;
    for (const auto& [k, v] : r.tags) tags += (tags.empty() ? "" : ",") + k + "=" + v;
    cells.push_back({r.id, r.state, r.type, r.submitted, r.name, tags});
  }
  std::vector<std::size_t> width(6, 0);
  for (const auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) line += row[i] + std::string(i + 1 < row.size() ? width[i] - row[i].size() + 2 : 0, ' ');
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace nymph::slurm
