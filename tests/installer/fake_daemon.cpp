// nymph-fake-daemon: stands in for `nymph run --config FILE` in installer tests. The mode comes from the
// environment variable NYMPH_FAKE_DAEMON (inherited from the test through `nymph install`):
//   serve (default)  write status.json (state serving), then wait for SIGTERM/SIGINT, then write status.json
//                    with exitReason sigterm/sigint and exit 0
//   exit             print a message and exit 3 at once
//   silent           never write status.json; wait for a signal
//   ignore-term      like serve, but ignore SIGTERM (only SIGKILL stops it)
// Invoked through a symlink named sbatch, squeue or scancel it is a fake Slurm keeping one job's state in the
// directory NYMPH_FAKE_SLURM_DIR: sbatch saves its standard input as `script`, sets the state PENDING and prints
// job id 4242 (or, with NYMPH_FAKE_SBATCH=fail, prints an error and exits 1); squeue prints "4242|<state>|None"
// while the job exists; scancel 4242 removes it.
// Before anything else the daemon writes probe.txt in its working directory: its argv, cwd, the target of fd 0 and the
// list of open fds, so tests can check how it was started.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

std::string link_target(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n < 0 ? std::string("?") : std::string(buf, static_cast<std::size_t>(n));
}

void write_probe(int argc, char** argv) {
  std::ostringstream out;  // written at the end, so the file is not among the listed fds
  for (int i = 0; i < argc; ++i) out << "arg " << argv[i] << "\n";
  out << "cwd " << link_target("/proc/self/cwd") << "\n";
  out << "stdin " << link_target("/proc/self/fd/0") << "\n";
  out << "stdout " << link_target("/proc/self/fd/1") << "\n";
  out << "stderr " << link_target("/proc/self/fd/2") << "\n";
  out << "sid " << ::getsid(0) << " pid " << ::getpid() << "\n";
  DIR* d = ::opendir("/proc/self/fd");
  int self = d ? ::dirfd(d) : -1;
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == self) continue;
    out << "fd " << e->d_name << "\n";
  }
  if (d) ::closedir(d);
  std::ofstream("probe.txt") << out.str();
}

void write_status(const char* state, const char* reason) {
  std::string json = "{\"pid\":" + std::to_string(::getpid()) + ",\"state\":\"" + state + "\",\"workerId\":\"\"," +
                     "\"exitReason\":" + (reason ? "\"" + std::string(reason) + "\"" : "null") + "}\n";
  {
    std::ofstream out("status.json.tmp");
    out << json;
  }
  std::rename("status.json.tmp", "status.json");
}

std::string slurm_file(const char* name) {
  const char* dir = std::getenv("NYMPH_FAKE_SLURM_DIR");
  return std::string(dir ? dir : ".") + "/" + name;
}

int fake_slurm(const std::string& tool, int argc, char** argv) {
  if (tool == "sbatch") {
    const char* mode = std::getenv("NYMPH_FAKE_SBATCH");
    if (mode && std::string(mode) == "fail") {
      std::fprintf(stderr, "sbatch: error: invalid partition specified: nope\n");
      return 1;
    }
    std::ofstream script(slurm_file("script"));
    script << std::cin.rdbuf();
    std::ofstream(slurm_file("state")) << "PENDING";
    std::printf("4242\n");
    return 0;
  }
  std::ifstream in(slurm_file("state"));
  std::string state;
  in >> state;
  if (tool == "squeue") {
    if (!state.empty()) std::printf("4242|%s|None\n", state.c_str());
    return 0;
  }
  if (tool == "scancel" && argc == 2 && std::string(argv[1]) == "4242") {
    std::remove(slurm_file("state").c_str());
    return 0;
  }
  std::fprintf(stderr, "fake %s: bad arguments\n", tool.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tool = argv[0];
  tool = tool.substr(tool.rfind('/') + 1);
  if (tool == "sbatch" || tool == "squeue" || tool == "scancel") return fake_slurm(tool, argc, argv);
  write_probe(argc, argv);
  const char* env = std::getenv("NYMPH_FAKE_DAEMON");
  std::string mode = env ? env : "serve";
  std::printf("fake daemon %d starting in mode %s\n", ::getpid(), mode.c_str());
  std::fflush(stdout);
  if (mode == "exit") {
    std::fprintf(stderr, "fake daemon: refusing to start (bad token)\n");
    return 3;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  if (mode != "ignore-term") sigaddset(&set, SIGTERM);
  else ::signal(SIGTERM, SIG_IGN);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  if (mode != "silent") write_status("serving", nullptr);
  int sig = 0;
  ::sigwait(&set, &sig);
  write_status("exited", sig == SIGTERM ? "sigterm" : "sigint");
  std::printf("fake daemon stopping on signal %d\n", sig);
  return 0;
}
