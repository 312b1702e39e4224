#pragma once
// The submission journal: one JSON line per submitted attempt, appended and fsync'ed before the attempt is
// reported running, and a "done" line once its final event has been delivered. After a manager restart the
// attempts submitted and not done are the in-flight Slurm jobs to re-attach to.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "runners/slurm/tracker.hpp"

namespace nymph::runners::slurm {

// One submitted attempt.
struct JournalEntry {
  std::string job_id;
  int attempt = 1;
  std::string lease_id;
  std::string slurm_job_id;
  // The attempt's job directory. A string, not a std::filesystem::path: libstdc++ keeps a path's components in a
  // list besides its text (~400 bytes for a job directory), and a manager tracks up to 10 000 attempts.
  std::string dir;
  WallClock::time_point submitted_at;        // just before sbatch: a lower bound of Slurm's submit time
  // Identity besides the id (Slurm recycles ids): the Slurm job name and the cluster ("" when unknown).
  // Lines written before these existed read as slurm_job_name(job_id) and "".
  std::string job_name;
  std::string cluster;
  friend bool operator==(const JournalEntry&, const JournalEntry&) = default;
};

// The journal's file name inside launch_dir.
inline constexpr std::string_view kJournalFile = "nymph-slurm-journal.jsonl";

// An append-only journal file. Not copyable; closes its descriptor on destruction.
class Journal {
 public:
  // Opens `path` for appending, creating it (mode 0600) when missing. Error names the path and errno text.
  static Result<Journal> open(const std::filesystem::path& path);

  Journal(Journal&& other) noexcept;
  Journal& operator=(Journal&& other) noexcept;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  // Appends a submission line and fsyncs. Returns an Error when the write or fsync fails.
  Result<void> append(const JournalEntry& e);
  // Appends a submission line for each of `entries` (the tasks of one job array) with one write and one fsync.
  Result<void> append(const std::vector<JournalEntry>& entries);
  // Appends a line marking (job_id, attempt) done and fsyncs.
  Result<void> mark_done(std::string_view job_id, int attempt);

  const std::filesystem::path& path() const { return path_; }

 private:
  Journal(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  Result<void> write_line(const std::string& line);
  std::filesystem::path path_;
  int fd_ = -1;
};

// Reads the journal at `path`: submitted attempts not marked done, in submission order (a later submission
// of the same job and attempt replaces the earlier one). A missing file is an empty journal. A torn last
// line (a crash mid-append) is ignored; any other unreadable line is an Error naming the file and line.
Result<std::vector<JournalEntry>> read_journal(const std::filesystem::path& path);

// Atomically replaces the journal at `path` with `entries` (write a temporary file, fsync, rename, fsync
// the directory), dropping done lines. Call it when no Journal is open on `path`.
Result<void> compact_journal(const std::filesystem::path& path, const std::vector<JournalEntry>& entries);

}  // namespace nymph::runners::slurm
