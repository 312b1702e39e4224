#pragma once
// Keeping the agent's memory (its token and worker credential) from processes of the same Unix user, such as
// the jobs it runs.
#include "common/error.hpp"

namespace nymph::platform {

// Marks this process not dumpable (prctl PR_SET_DUMPABLE 0): no core file, and processes of the same user
// that lack CAP_SYS_PTRACE can neither ptrace it nor read its /proc/PID/mem or /proc/PID/environ. Children
// become dumpable again when they exec a program (execve resets it), so jobs are not affected. Returns an
// Error naming the errno when the kernel refuses.
Result<void> make_undumpable();

// True when this process is dumpable (prctl PR_GET_DUMPABLE).
bool is_dumpable();

}  // namespace nymph::platform
