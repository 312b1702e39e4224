#include "platform/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;

namespace nymph::platform {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd above_stdio(int fd) {
  if (fd < 0 || fd > 2) return Fd(fd);
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return Fd(moved);
}

SpawnSetup::SpawnSetup() {
  ::posix_spawnattr_init(&attr_);
  ::posix_spawn_file_actions_init(&actions_);
}

SpawnSetup::~SpawnSetup() {
  ::posix_spawn_file_actions_destroy(&actions_);
  ::posix_spawnattr_destroy(&attr_);
}

int SpawnSetup::prepare(int in, int out, int err, const char* working_dir, Grouping grouping) {
  int rc = 0;
  auto step = [&rc](int r) {
    if (rc == 0) rc = r;
  };
  step(::posix_spawn_file_actions_adddup2(&actions_, in, 0));
  step(::posix_spawn_file_actions_adddup2(&actions_, out, 1));
  step(::posix_spawn_file_actions_adddup2(&actions_, err, 2));
  step(::posix_spawn_file_actions_addclosefrom_np(&actions_, 3));
  if (working_dir != nullptr) step(::posix_spawn_file_actions_addchdir_np(&actions_, working_dir));
  sigset_t all, none;
  ::sigfillset(&all);
  ::sigemptyset(&none);
  step(::posix_spawnattr_setsigdefault(&attr_, &all));
  step(::posix_spawnattr_setsigmask(&attr_, &none));
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (grouping == Grouping::session) {
    flags |= POSIX_SPAWN_SETSID;
  } else {
    flags |= POSIX_SPAWN_SETPGROUP;
    step(::posix_spawnattr_setpgroup(&attr_, 0));
  }
  step(::posix_spawnattr_setflags(&attr_, flags));
  return rc;
}

int spawn(pid_t& pid, const std::string& executable, const SpawnSetup& setup, const std::vector<std::string>& argv,
          const std::optional<Environment>& env) {
  std::vector<const char*> args;
  for (const auto& a : argv) args.push_back(a.c_str());
  args.push_back(nullptr);
  std::vector<std::string> entries;
  std::vector<const char*> envp;
  if (env) {
    entries.reserve(env->size());
    for (const auto& [name, value] : *env) entries.push_back(name + "=" + value);
    for (const auto& e : entries) envp.push_back(e.c_str());
    envp.push_back(nullptr);
  }
  return ::posix_spawn(&pid, executable.c_str(), setup.actions(), setup.attributes(),
                       const_cast<char* const*>(args.data()),
                       env ? const_cast<char* const*>(envp.data()) : environ);
}

}  // namespace nymph::platform
