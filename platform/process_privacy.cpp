#include "platform/process_privacy.hpp"

#include <sys/prctl.h>

#include <cerrno>

#include "common/text.hpp"

namespace nymph::platform {

Result<void> make_undumpable() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return fail("prctl(PR_SET_DUMPABLE, 0): " + errno_message(errno));
  return {};
}

bool is_dumpable() { return ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1; }

}  // namespace nymph::platform
