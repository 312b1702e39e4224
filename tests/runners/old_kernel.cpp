// old-kernel: runs a command with every syscall newer than Linux 3.10 failing with ENOSYS (a RHEL 7-era
// kernel), e.g. pidfd_open and close_range. C++ port of ../shared/tools/old-kernel.c for the test build.
// Use: old-kernel setarch --uname-2.6 x86_64 CMD [ARGS...]
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <iterator>

namespace {

constexpr int newer_syscalls[] = {316 /*renameat2*/,
                                  317 /*seccomp*/,
                                  318 /*getrandom*/,
                                  319 /*memfd_create*/,
                                  322 /*execveat*/,
                                  324 /*membarrier*/,
                                  325 /*mlock2*/,
                                  326 /*copy_file_range*/,
                                  327,
                                  328 /*preadv2/pwritev2*/,
                                  332 /*statx*/,
                                  334 /*rseq*/,
                                  424 /*pidfd_send_signal*/,
                                  434 /*pidfd_open*/,
                                  435 /*clone3*/,
                                  436 /*close_range*/,
                                  437 /*openat2*/,
                                  438 /*pidfd_getfd*/,
                                  439 /*faccessat2*/,
                                  441 /*epoll_pwait2*/,
                                  449 /*futex_waitv*/};

sock_filter stmt(unsigned code, unsigned k) {
  return sock_filter{static_cast<unsigned short>(code), 0, 0, k};
}
sock_filter jump(unsigned code, unsigned k, unsigned char jt, unsigned char jf) {
  return sock_filter{static_cast<unsigned short>(code), jt, jf, k};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: old-kernel CMD [ARGS...]\n");
    return 64;
  }
  constexpr int n = static_cast<int>(std::size(newer_syscalls));
  sock_filter f[4 + 2 * n + 1];
  int i = 0;
  f[i++] = stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  f[i++] = jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  f[i++] = stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  f[i++] = stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  for (int nr : newer_syscalls) {
    f[i++] = jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1);
    f[i++] = stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
  }
  f[i++] = stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  sock_fprog prog{static_cast<unsigned short>(i), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
    perror("seccomp");
    return 1;
  }
  execvp(argv[1], argv + 1);
  perror("exec");
  return 127;
}
