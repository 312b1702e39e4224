// nymph-test-child: a helper child process for runner tests. Actions run in command-line order:
//   --print-args            print each argument on its own line (stdout)
//   --print-env             print the environment, one NAME=value per line
//   --list-fds              print the open file descriptor numbers, one per line
//   --write N               write N bytes (a repeating 0..255 pattern unless --text) to stdout
//   --write-err N           the same to stderr
//   --text                  subsequent writes use printable text lines instead of raw bytes
//   --binary                write every byte value 0..255 once to stdout (not UTF-8)
//   --sleep MS              sleep MS milliseconds
//   --ignore-term           ignore SIGTERM from now on
//   --pid-file F            write this process's pid to F
//   --spawn N F             fork N grandchildren that sleep forever; append their pids to F (one per line)
//   --touch F               create file F
//   --exit K                exit with status K now
//   --raise SIG             raise signal number SIG (with its default action) now
//   --print-cwd             print the working directory
//   --print-sigign          print the SigIgn mask of /proc/self/status (hex)
// Unknown arguments are printed to stderr and give exit status 64.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {
bool text_mode = false;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::_Exit(70);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void write_bytes(int fd, long long n) {
  std::vector<char> buf(64 * 1024);
  long long offset = 0;
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<long long>(n, static_cast<long long>(buf.size())));
    for (size_t i = 0; i < chunk; ++i) {
      long long pos = offset + static_cast<long long>(i);
      buf[i] = text_mode ? ((pos % 64 == 63) ? '\n' : static_cast<char>('a' + pos % 26)) : static_cast<char>(pos % 256);
    }
    write_all(fd, buf.data(), chunk);
    offset += static_cast<long long>(chunk);
    n -= static_cast<long long>(chunk);
  }
}

void sleep_ms(long long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (a == "--print-args") {
      for (int k = 0; k < argc; ++k) std::printf("%s\n", argv[k]);
      std::fflush(stdout);
    } else if (a == "--print-env") {
      for (char** e = environ; *e; ++e) std::printf("%s\n", *e);
      std::fflush(stdout);
    } else if (a == "--list-fds") {
      DIR* d = ::opendir("/proc/self/fd");
      int self = d ? ::dirfd(d) : -1;
      while (dirent* ent = d ? ::readdir(d) : nullptr) {
        if (ent->d_name[0] == '.') continue;
        if (std::atoi(ent->d_name) == self) continue;
        std::printf("%s\n", ent->d_name);
      }
      if (d) ::closedir(d);
      std::fflush(stdout);
    } else if (a == "--write") {
      write_bytes(1, std::atoll(next().c_str()));
    } else if (a == "--write-err") {
      write_bytes(2, std::atoll(next().c_str()));
    } else if (a == "--text") {
      text_mode = true;
    } else if (a == "--binary") {
      char all[256];
      for (int b = 0; b < 256; ++b) all[b] = static_cast<char>(b);
      write_all(1, all, sizeof all);
    } else if (a == "--sleep") {
      sleep_ms(std::atoll(next().c_str()));
    } else if (a == "--ignore-term") {
      ::signal(SIGTERM, SIG_IGN);
    } else if (a == "--pid-file") {
      std::ofstream(next()) << ::getpid() << "\n";
    } else if (a == "--touch") {
      std::ofstream(next()) << "";
    } else if (a == "--spawn") {
      int n = std::atoi(next().c_str());
      std::string file = next();
      for (int k = 0; k < n; ++k) {
        pid_t pid = ::fork();
        if (pid == 0) {
          for (;;) ::pause();
        }
        std::ofstream(file, std::ios::app) << pid << "\n";
      }
    } else if (a == "--raise") {
      int sig = std::atoi(next().c_str());
      std::fflush(stdout);
      ::signal(sig, SIG_DFL);
      ::raise(sig);
      return 65;  // not reached for a fatal signal
    } else if (a == "--print-cwd") {
      char buf[4096];
      std::printf("%s\n", ::getcwd(buf, sizeof buf) ? buf : "?");
      std::fflush(stdout);
    } else if (a == "--print-sigign") {
      std::ifstream status("/proc/self/status");
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("SigIgn:", 0) != 0) continue;
        std::string mask = line.substr(7);
        mask.erase(0, mask.find_first_not_of(" \t"));
        std::printf("%s\n", mask.c_str());
      }
      std::fflush(stdout);
    } else if (a == "--exit") {
      std::fflush(stdout);
      std::exit(std::atoi(next().c_str()));
    } else {
      std::fprintf(stderr, "nymph-test-child: unknown argument %s\n", a.c_str());
      return 64;
    }
  }
  return 0;
}
