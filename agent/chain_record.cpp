#include "agent/chain_record.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>

#include "common/files.hpp"

namespace nymph::agent {

namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

json::value opt_ms(const std::optional<std::int64_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

std::optional<std::int64_t> ms_from(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return std::nullopt;
  return v->to_number<std::int64_t>();
}

std::string string_from(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

// Holds an exclusive flock on <dir>/chain.lock for its lifetime.
class ChainLock {
 public:
  static Result<ChainLock> take(const fs::path& dir) {
    auto path = dir / "chain.lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return fail("cannot open " + path.string() + ": " + std::strerror(errno));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return fail("cannot lock " + path.string() + ": " + std::strerror(e));
    }
    return ChainLock(fd);
  }
  ChainLock(ChainLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ChainLock(const ChainLock&) = delete;
  ChainLock& operator=(const ChainLock&) = delete;
  ChainLock& operator=(ChainLock&&) = delete;
  ~ChainLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }

 private:
  explicit ChainLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace

ChainGeneration& ChainRecord::at(int n) {
  auto it = std::lower_bound(generations.begin(), generations.end(), n,
                             [](const ChainGeneration& g, int value) { return g.generation < value; });
  if (it == generations.end() || it->generation != n) it = generations.insert(it, ChainGeneration{.generation = n});
  return *it;
}

const ChainGeneration* ChainRecord::find(int n) const {
  for (const auto& g : generations)
    if (g.generation == n) return &g;
  return nullptr;
}

std::vector<std::chrono::seconds> ChainRecord::queue_waits() const {
  std::vector<std::chrono::seconds> out;
  for (const auto& g : generations)
    if (g.submitted_at_ms && g.started_at_ms)
      out.emplace_back(std::max<std::int64_t>(0, (*g.started_at_ms - *g.submitted_at_ms) / 1000));
  return out;
}

json::value to_json(const ChainRecord& r) {
  json::array gens;
  for (const auto& g : r.generations)
    gens.push_back(
        json::object{{"generation", g.generation},
                     {"slurmJobId", g.slurm_job_id},
                     {"submittedAtMs", opt_ms(g.submitted_at_ms)},
                     {"startedAtMs", opt_ms(g.started_at_ms)},
                     {"servingEndAtMs", opt_ms(g.serving_end_ms)},
                     {"submittedBy", g.submitted_by},
                     {"endedAtMs", opt_ms(g.ended_at_ms)},
                     {"exitReason", g.exit_reason.empty() ? json::value(nullptr) : json::value(g.exit_reason)}});
  return json::object{
      {"generations", std::move(gens)}, {"state", r.state},         {"reason", r.reason},
      {"failures", r.failures},         {"submitter", r.submitter}, {"stopRequested", r.stop_requested}};
}

Result<ChainRecord> chain_record_from_json(const json::value& v) {
  if (!v.is_object()) return fail("a chain record is a JSON object");
  const auto& o = v.as_object();
  ChainRecord r;
  try {
    for (const auto& g : o.at("generations").as_array()) {
      const auto& go = g.as_object();
      ChainGeneration cg{.generation = static_cast<int>(go.at("generation").to_number<std::int64_t>()),
                         .slurm_job_id = string_from(go, "slurmJobId"),
                         .submitted_at_ms = ms_from(go, "submittedAtMs"),
                         .started_at_ms = ms_from(go, "startedAtMs"),
                         .serving_end_ms = ms_from(go, "servingEndAtMs"),
                         .ended_at_ms = ms_from(go, "endedAtMs"),
                         .exit_reason = string_from(go, "exitReason"),
                         .submitted_by = string_from(go, "submittedBy")};
      if (cg.generation < 1) return fail("chain record: generation " + std::to_string(cg.generation));
      r.at(cg.generation) = std::move(cg);
    }
    r.state = string_from(o, "state");
    if (r.state != "renewing" && r.state != "paused" && r.state != "ended")
      return fail("chain record: state '" + r.state + "'");
    r.reason = string_from(o, "reason");
    if (o.contains("submitter")) r.submitter = string_from(o, "submitter");
    if (r.submitter != "allocation" && r.submitter != "manager")
      return fail("chain record: submitter '" + r.submitter + "'");
    if (const auto* f = o.if_contains("failures")) r.failures = static_cast<int>(f->to_number<std::int64_t>());
    if (const auto* s = o.if_contains("stopRequested")) r.stop_requested = s->as_bool();
  } catch (const std::exception& e) {
    return fail(std::string("chain record: ") + e.what());
  }
  return r;
}

Result<std::optional<ChainRecord>> read_chain_record(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / kChainFile, ec)) return std::optional<ChainRecord>{};
  auto text = read_small_file(dir / kChainFile, "chain record", kMaxConfigFileBytes);
  if (!text) return text.error();
  boost::system::error_code jec;
  auto v = json::parse(*text, jec);
  if (jec) return fail((dir / kChainFile).string() + " is not JSON: " + jec.message());
  auto r = chain_record_from_json(v);
  if (!r) return fail((dir / kChainFile).string() + ": " + r.error().message);
  return std::optional<ChainRecord>(std::move(*r));
}

Result<ChainRecord> update_chain_record(const fs::path& dir, const std::function<void(ChainRecord&)>& change) {
  auto lock = ChainLock::take(dir);
  if (!lock) return lock.error();
  auto current = read_chain_record(dir);
  if (!current) return current.error();
  ChainRecord r = current->value_or(ChainRecord{});
  change(r);
  if (auto ok = write_file_atomically(dir / kChainFile, json::serialize(to_json(r)) + "\n", 0600); !ok)
    return ok.error();
  return r;
}

std::string status_file_name(std::int64_t generation) {
  return generation <= 1 ? "status.json" : "status-" + std::to_string(generation) + ".json";
}

std::int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace nymph::agent
