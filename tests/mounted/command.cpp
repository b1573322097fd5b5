#include "mounted/command.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace stripefs::test {

Command run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buffer[4096];
  size_t n;
  while (pipe != nullptr && (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pipe != nullptr ? pclose(pipe) : -1;
  return {status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool wait_for_unlock(const std::string& member) {
  for (int i = 0; i < 600; ++i) {
    const int fd = ::open(member.c_str(), O_RDONLY);
    if (fd < 0) return true;
    const bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    if (free) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace stripefs::test
