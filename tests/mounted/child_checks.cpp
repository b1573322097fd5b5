#include "mounted/child_checks.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace stripefs::test {

void ChildChecks::expect_errno(long result, int err, int expected, const char* what) {
  if (result == -1 && err == expected) return;
  failures_ += std::string(what) + ": " +
               (result == -1 ? "failed with " + errno_name(err) : "succeeded") + ", expected " +
               errno_name(expected) + "\n";
}

void ChildChecks::expect_ok(long result, int err, const char* what) {
  if (result != -1) return;
  failures_ += std::string(what) + ": failed with " + errno_name(err) + "\n";
}

void ChildChecks::expect(bool condition, const std::string& what) {
  if (!condition) failures_ += what + "\n";
}

bool become_nobody() {
  return setgroups(0, nullptr) == 0 && setgid(kNogroup) == 0 && setuid(kNobody) == 0;
}

bool become_root_without_fsetid() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_FSETID / 32].effective &= ~(1u << (CAP_FSETID % 32));
  return syscall(SYS_capset, &header, data) == 0;
}

void run_in_child(const std::string& reachable, bool (*become)(),
                  const std::function<void(ChildChecks&)>& body) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork: " << errno_name(errno);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ChildChecks checks;
    if (!become()) {
      checks.expect(false, "dropping privileges: " + errno_name(errno));
    } else {
      struct stat st {};
      if (stat(reachable.c_str(), &st) != 0) {
        checks.expect(false, "the child cannot reach " + reachable + ": " + errno_name(errno) +
                                 " (is every parent directory searchable by others?)");
      } else {
        body(checks);
      }
    }
    const std::string& report = checks.failures();
    size_t sent = 0;
    while (sent < report.size()) {
      const ssize_t n = write(pipe_fds[1], report.data() + sent, report.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    _exit(0);
  }
  ::close(pipe_fds[1]);
  std::string report;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    report.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child wait status " << status;
  EXPECT_EQ(report, "") << "in the child:\n" << report;
}

}  // namespace stripefs::test
