#include "runners/runner.hpp"

namespace nymph::runners {

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::pending: return "pending";
    case JobState::running: return "running";
    case JobState::succeeded: return "succeeded";
    case JobState::failed: return "failed";
    case JobState::cancelled: return "cancelled";
    case JobState::lost: return "lost";
  }
  return "unknown";
}

bool is_final(JobState s) { return s != JobState::pending && s != JobState::running; }


}  // namespace nymph::runners
