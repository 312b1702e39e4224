#include "runners/slurm/journal.hpp"

#include "common/text.hpp"
#include "common/time.hpp"
#include "runners/slurm/script.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace nymph::runners::slurm {
namespace {

namespace json = boost::json;

std::string errno_text() { return errno_message(errno); }

std::string submit_line(const JournalEntry& e) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(e.submitted_at.time_since_epoch()).count();
  json::object o{{"op", "submit"},           {"job_id", e.job_id},
                 {"attempt", e.attempt},     {"lease_id", e.lease_id},
                 {"slurm_job_id", e.slurm_job_id}, {"dir", e.dir},
                 {"submitted_at_ms", ms},  {"job_name", e.job_name},
                 {"cluster", e.cluster}};
  return json::serialize(o) + "\n";
}

std::string done_line(std::string_view job_id, int attempt) {
  json::object o{{"op", "done"}, {"job_id", job_id}, {"attempt", attempt}};
  return json::serialize(o) + "\n";
}

Result<void> write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot write journal " + path.string() + ": " + errno_text());
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) return fail("cannot fsync journal " + path.string() + ": " + errno_text());
  return {};
}

struct Line {
  std::string op;
  JournalEntry entry;
};

Result<Line> parse_line(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) return fail("not a JSON object");
  const auto& o = v.get_object();
  auto str = [&](std::string_view k) -> const json::string* {
    auto* p = o.if_contains(k);
    return p && p->is_string() ? &p->get_string() : nullptr;
  };
  auto num = [&](std::string_view k) -> std::optional<std::int64_t> {
    auto* p = o.if_contains(k);
    if (p && p->is_int64()) return p->get_int64();
    return std::nullopt;
  };
  Line line;
  auto* op = str("op");
  auto* job = str("job_id");
  auto attempt = num("attempt");
  if (!op || !job || job->empty() || !attempt) return fail("missing op, job_id or attempt");
  if (*attempt < 1 || *attempt > std::numeric_limits<int>::max()) return fail("attempt out of range");
  line.op = std::string(*op);
  line.entry.job_id = std::string(*job);
  line.entry.attempt = static_cast<int>(*attempt);
  if (line.op == "done") return line;
  auto* lease = str("lease_id");
  auto* slurm = str("slurm_job_id");
  auto* dir = str("dir");
  auto at = num("submitted_at_ms");
  if (line.op != "submit" || !lease || !slurm || slurm->empty() || !dir || !at)
    return fail("not a submit or done record");
  auto submitted_at = time_from_ms(*at);
  if (!submitted_at) return fail("submitted_at_ms out of range");
  line.entry.lease_id = std::string(*lease);
  line.entry.slurm_job_id = std::string(*slurm);
  line.entry.dir = std::string(*dir);
  line.entry.submitted_at = *submitted_at;
  auto* name = str("job_name");
  auto* cluster = str("cluster");
  line.entry.job_name = name ? std::string(*name) : slurm_job_name(line.entry.job_id);
  line.entry.cluster = cluster ? std::string(*cluster) : std::string();
  return line;
}

}  // namespace

Result<Journal> Journal::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot open journal " + path.string() + ": " + errno_text());
  return Journal(path, fd);
}

Journal::Journal(Journal&& other) noexcept : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

Journal& Journal::operator=(Journal&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> Journal::write_line(const std::string& line) { return write_all(fd_, line, path_); }

Result<void> Journal::append(const JournalEntry& e) { return write_line(submit_line(e)); }

Result<void> Journal::append(const std::vector<JournalEntry>& entries) {
  std::string lines;
  for (const auto& e : entries) lines += submit_line(e);
  return write_line(lines);
}

Result<void> Journal::mark_done(std::string_view job_id, int attempt) { return write_line(done_line(job_id, attempt)); }

Result<std::vector<JournalEntry>> read_journal(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return std::vector<JournalEntry>{};
    return fail("cannot read journal " + path.string());
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::vector<JournalEntry> entries;
  auto same = [](const JournalEntry& a, const JournalEntry& b) { return a.job_id == b.job_id && a.attempt == b.attempt; };
  std::size_t pos = 0;
  for (int number = 1; pos < text.size(); ++number) {
    auto nl = text.find('\n', pos);
    bool torn = nl == std::string::npos;
    std::string_view raw(text.data() + pos, (torn ? text.size() : nl) - pos);
    pos = torn ? text.size() : nl + 1;
    if (raw.empty()) continue;
    auto line = parse_line(raw);
    if (!line) {
      if (torn) break;  // a crash while appending the last line
      return fail("journal " + path.string() + " line " + std::to_string(number) + ": " + line.error().message);
    }
    std::erase_if(entries, [&](const JournalEntry& e) { return same(e, line->entry); });
    if (line->op == "submit") entries.push_back(std::move(line->entry));
  }
  return entries;
}

Result<void> compact_journal(const std::filesystem::path& path, const std::vector<JournalEntry>& entries) {
  auto tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot write " + tmp.string() + ": " + errno_text());
  std::string all;
  for (const auto& e : entries) all += submit_line(e);
  auto written = write_all(fd, all, tmp);
  ::close(fd);
  if (!written) return written;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot replace journal " + path.string() + ": " + errno_text());
  int dir = ::open(path.parent_path().empty() ? "." : path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

}  // namespace nymph::runners::slurm
