#include "runners/slurm/array_batcher.hpp"

#include <algorithm>

namespace nymph::runners::slurm {

ArrayBatcher::ArrayBatcher(std::size_t max_tasks) : max_tasks_(std::max<std::size_t>(max_tasks, 1)) {}

bool ArrayBatcher::add(const std::string& shape, SubmissionTicket ticket) {
  Shape& s = shapes_[shape];
  s.waiting.push_back(ticket);
  ++waiting_;
  if (s.submitting) return false;
  s.submitting = true;
  return true;
}

std::size_t ArrayBatcher::waiting(const std::string& shape) const {
  auto it = shapes_.find(shape);
  return it == shapes_.end() ? 0 : it->second.waiting.size();
}

std::vector<SubmissionTicket> ArrayBatcher::take(const std::string& shape) {
  auto it = shapes_.find(shape);
  if (it == shapes_.end()) return {};
  auto& waiting = it->second.waiting;
  const std::size_t n = std::min(max_tasks_, waiting.size());
  std::vector<SubmissionTicket> batch(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
  waiting.erase(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
  waiting_ -= n;
  return batch;
}

void ArrayBatcher::submitter_done(const std::string& shape) {
  auto it = shapes_.find(shape);
  if (it == shapes_.end() || !it->second.waiting.empty()) return;
  shapes_.erase(it);
}

void ArrayBatcher::set_max_tasks(std::size_t max_tasks) {
  max_tasks_ = std::max<std::size_t>(max_tasks, 1);
}

}  // namespace nymph::runners::slurm
