#pragma once
// Which waiting submissions go to Slurm together, as a sans-io state machine. Submissions of the same shape
// (equal #SBATCH lines: shared_directives) queue while an sbatch of that shape is in flight, and the next sbatch
// takes up to `max_tasks` of them as one job array: a lone job goes at once as itself, a burst costs a few sbatch
// calls instead of one per job. Nothing here runs a process or waits; tests step it directly.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace nymph::runners::slurm {

// A waiting submission, as the runner numbers them.
using SubmissionTicket = std::uint64_t;

class ArrayBatcher {
 public:
  // `max_tasks`: most submissions in one sbatch (at least 1; 1 means one sbatch per job).
  explicit ArrayBatcher(std::size_t max_tasks);

  // Queues `ticket` under `shape`. Returns true when no submitter works on that shape: the caller starts one,
  // which calls take() while waiting(shape) > 0 and then submitter_done().
  bool add(const std::string& shape, SubmissionTicket ticket);

  // How many submissions of `shape` wait.
  std::size_t waiting(const std::string& shape) const;

  // The next sbatch of `shape`: its oldest waiting submissions, at most max_tasks(), in the order they came.
  // Empty when none wait.
  std::vector<SubmissionTicket> take(const std::string& shape);

  // The submitter of `shape` stops: the next add() of that shape starts another. Call it only when
  // waiting(shape) is 0 (with one waiting it would be left behind: then it does nothing).
  void submitter_done(const std::string& shape);

  // Lowers (or raises) the batch size, e.g. to the cluster's MaxArraySize; at least 1.
  void set_max_tasks(std::size_t max_tasks);
  std::size_t max_tasks() const { return max_tasks_; }

  // Submissions waiting, all shapes together.
  std::size_t waiting() const { return waiting_; }

 private:
  struct Shape {
    std::deque<SubmissionTicket> waiting;
    bool submitting = false;
  };
  std::size_t max_tasks_;
  std::size_t waiting_ = 0;
  std::map<std::string, Shape, std::less<>> shapes_;
};

}  // namespace nymph::runners::slurm
