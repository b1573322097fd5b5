#include "mounted/mounted_fs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

// CMake passes the built programs; a standalone build has none and relies on the environment.
#ifndef STRIPEFS_MKFS_PATH
#define STRIPEFS_MKFS_PATH ""
#endif
#ifndef STRIPEFS_MOUNT_PATH
#define STRIPEFS_MOUNT_PATH ""
#endif

namespace stripefs::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kPollInterval = milliseconds(20);
// A process that has just closed its last file on the mount may hold it a moment longer.
constexpr auto kBusyRetry = std::chrono::seconds(10);
constexpr const char* kStateTemplate = "/var/tmp/stripefs-mounted-XXXXXX";
constexpr const char* kScratchName = "stripefs-test-XXXXXX";

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return std::string(name ? name : "errno " + std::to_string(err)) + " (" + std::strerror(err) +
         ")";
}

std::string program(const char* env_name, const char* built) {
  const char* env = std::getenv(env_name);
  return env && *env ? env : built;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("was killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)));
  }
  return "ended with wait status " + std::to_string(status);
}

std::string join(const std::vector<std::string>& words, std::string_view separator) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += separator;
    out += word;
  }
  return out;
}

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string unescape_mountinfo(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string octal(field.substr(i + 1, 3));
      out += static_cast<char>(std::stoi(octal, nullptr, 8));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// The type of the topmost filesystem mounted on dir, or "" if nothing is mounted there.
std::string mounted_fstype(const fs::path& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::string type;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (unescape_mountinfo(point) != dir.string()) continue;
    std::string field;
    while (fields >> field && field != "-") {
    }
    fields >> type;
  }
  return type;
}

void append_to_log(const fs::path& log, const std::string& text) {
  std::ofstream out(log, std::ios::app);
  out << text << '\n';
}

// Starts args[0] with stdin from /dev/null and stdout and stderr appended to log, as the
// leader of a new process group, so that kill_group() reaches any helpers it starts too.
// The child gets SIGTERM if this process dies, so a crashed test run does not leave a daemon
// (and its mount) behind: libfuse unmounts on SIGTERM.
std::expected<pid_t, std::string> spawn(const std::vector<std::string>& args, const fs::path& log) {
  if (access(args[0].c_str(), X_OK) != 0) {
    return std::unexpected("cannot execute '" + args[0] + "': " + errno_text(errno));
  }
  append_to_log(log, "== " + join(args, " "));
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const std::string log_name = log.string();
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) return std::unexpected("fork: " + errno_text(errno));
  if (pid > 0) setpgid(pid, pid);  // also here, so no kill_group() can come before it
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(126);
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(log_name.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(126);
    close_range(3, ~0U, 0);
    execv(argv[0], argv.data());
    static constexpr char kMessage[] = "exec failed\n";
    [[maybe_unused]] auto ignored = write(2, kMessage, sizeof(kMessage) - 1);
    _exit(127);
  }
  return pid;
}

void kill_group(pid_t leader) {
  kill(-leader, SIGKILL);
}

// Waits for pid to end, up to timeout. Returns false on timeout (the child is left running).
bool wait_for(pid_t pid, Clock::duration timeout, int& status) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return true;
    if (done < 0 && errno != EINTR) {
      status = 0;
      return true;  // not our child any more: nothing left to wait for
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

// Runs a short helper program to completion; its output goes to log.
Status run(const std::vector<std::string>& args, const fs::path& log, Clock::duration timeout) {
  auto pid = spawn(args, log);
  if (!pid) return std::unexpected(pid.error());
  int status = 0;
  if (!wait_for(*pid, timeout, status)) {
    kill_group(*pid);
    waitpid(*pid, &status, 0);
    return std::unexpected("'" + join(args, " ") + "' did not finish in time; killed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::unexpected("'" + join(args, " ") + "' " + describe_exit(status));
  }
  return {};
}

// Root unmounts directly; anyone else has to ask fusermount3, as for any FUSE mount.
Status unmount_dir(const fs::path& dir, bool lazy, const fs::path& log) {
  const auto deadline = Clock::now() + kBusyRetry;
  for (;;) {
    Status done;
    int err = 0;
    if (geteuid() == 0) {
      if (umount2(dir.c_str(), lazy ? MNT_DETACH : 0) != 0) {
        err = errno;
        done = std::unexpected("umount " + dir.string() + ": " + errno_text(err));
      }
    } else {
      std::vector<std::string> args = {"/usr/bin/fusermount3", lazy ? "-uz" : "-u", dir.string()};
      done = run(args, log, std::chrono::seconds(30));
      err = done ? 0 : EBUSY;  // its exit status does not say why; assume the retryable case
    }
    if (done || err != EBUSY || Clock::now() >= deadline) return done;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

}  // namespace

MountedFs::MountedFs()
    : mkfs_path_(program("STRIPEFS_MKFS_PATH", STRIPEFS_MKFS_PATH)),
      mount_path_(program("STRIPEFS_MOUNT_PATH", STRIPEFS_MOUNT_PATH)) {
  if (const char* target = std::getenv("STRIPEFS_TEST_TARGET"); target && *target) {
    target_ = target;
  }
}

MountedFs::~MountedFs() {
  cleanup();
}

std::string MountedFs::path(std::string_view rel) const {
  while (rel.starts_with('/')) rel.remove_prefix(1);
  return rel.empty() ? root_.string() : (root_ / rel).string();
}

std::string MountedFs::log_tail(size_t max_bytes) const {
  if (log_path_.empty()) return {};
  std::ifstream in(log_path_, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > max_bytes) text = "[...]" + text.substr(text.size() - max_bytes);
  return text;
}

std::string MountedFs::with_log(std::string message) const {
  return message + "\n--- " + log_path_.string() + " (end) ---\n" + log_tail();
}

Status MountedFs::mount() {
  if (mounted_) return std::unexpected("mount: already mounted");
  if (is_target()) {
    if (root_.empty()) {
      if (auto made = prepare_target(); !made) return made;
    }
    mounted_ = true;
    return {};
  }
  if (state_dir_.empty()) {
    if (auto made = prepare_state(); !made) return made;
  }
  if (!formatted_) {
    if (auto made = format(); !made) return made;
  }
  if (auto started = start_daemon(); !started) return started;
  return wait_until_mounted();
}

Status MountedFs::prepare_target() {
  std::error_code error;
  if (!fs::is_directory(target_, error)) {
    return std::unexpected("STRIPEFS_TEST_TARGET=" + target_.string() + " is not a directory");
  }
  std::string name = (target_ / kScratchName).string();
  if (!mkdtemp(name.data())) return std::unexpected("mkdtemp " + name + ": " + errno_text(errno));
  // Tests that drop privileges must be able to enter it.
  if (chmod(name.c_str(), 0755) != 0)
    return std::unexpected("chmod " + name + ": " + errno_text(errno));
  root_ = fs::canonical(name);
  return {};
}

Status MountedFs::prepare_state() {
  if (mkfs_path_.empty() || mount_path_.empty()) {
    return std::unexpected(
        "no filesystem to test: set STRIPEFS_TEST_TARGET to a directory, or "
        "STRIPEFS_MKFS_PATH and STRIPEFS_MOUNT_PATH to the stripefs programs");
  }
  std::string name = kStateTemplate;
  if (!mkdtemp(name.data())) return std::unexpected("mkdtemp " + name + ": " + errno_text(errno));
  state_dir_ = fs::canonical(name);
  // Search permission only: unprivileged test processes reach the mount point, nothing else.
  if (chmod(state_dir_.c_str(), 0711) != 0) {
    return std::unexpected("chmod " + state_dir_.string() + ": " + errno_text(errno));
  }
  root_ = state_dir_ / "mnt";
  log_path_ = state_dir_ / "stripefs.log";
  if (mkdir(root_.c_str(), 0755) != 0) {
    return std::unexpected("mkdir " + root_.string() + ": " + errno_text(errno));
  }
  for (unsigned i = 0; i < member_count_; ++i) {
    std::string error;
    const fs::path member = new_device("member" + std::to_string(i) + ".img", error);
    if (member.empty()) return std::unexpected(error);
    if (use_loops_) {
      auto loop = LoopDevice::attach(member);
      if (!loop) return std::unexpected(loop.error());
      members_.push_back(loop->path());
      loops_.push_back(std::move(*loop));
    } else {
      members_.push_back(member);
    }
  }
  return {};
}

Status MountedFs::shrink_member(size_t index, uint64_t bytes) {
  if (index >= loops_.size())
    return std::unexpected("shrink_member: no loop device " + std::to_string(index));
  return loops_[index].shrink(bytes);
}

fs::path MountedFs::new_device(const std::string& name, std::string& error) {
  const fs::path device = state_dir_ / name;
  const int fd = open(device.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = "create " + device.string() + ": " + errno_text(errno);
    return {};
  }
  const bool sized = ftruncate(fd, static_cast<off_t>(member_size_)) == 0;
  const int err = errno;
  close(fd);
  if (!sized) {
    error = "ftruncate " + device.string() + ": " + errno_text(err);
    return {};
  }
  return device;
}

Status MountedFs::format() {
  std::vector<std::string> args = {mkfs_path_, "-q", "-l",
                                   level_,     "-n", std::to_string(member_count_)};
  args.insert(args.end(), mkfs_arguments_.begin(), mkfs_arguments_.end());
  for (const auto& member : members_) args.push_back(member.string());
  if (auto done = run(args, log_path_, kMkfsTimeout); !done)
    return std::unexpected(with_log(done.error()));
  formatted_ = true;
  return {};
}

Status MountedFs::start_daemon() {
  std::vector<std::string> names;
  for (const auto& member : members_) names.push_back(member.string());
  std::vector<std::string> args = {mount_path_, "-f"};
  if (!mount_options_.empty()) {
    args.push_back("-o");
    args.push_back(mount_options_);
  }
  args.push_back(join(names, ":"));
  args.push_back(root_.string());
  auto pid = spawn(args, log_path_);
  if (!pid) return std::unexpected(pid.error());
  daemon_ = *pid;
  return {};
}

Status MountedFs::wait_until_mounted() {
  const auto deadline = Clock::now() + kMountTimeout;
  for (;;) {
    if (mounted_fstype(root_).starts_with("fuse")) {
      mounted_ = true;
      return {};
    }
    int status = 0;
    if (waitpid(daemon_, &status, WNOHANG) == daemon_) {
      daemon_ = -1;
      return std::unexpected(with_log("daemon " + describe_exit(status) + " before " +
                                      root_.string() + " was mounted"));
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  kill_group(daemon_);
  int status = 0;
  reap_daemon(kExitTimeout, status);
  return std::unexpected(with_log("no FUSE mount on " + root_.string() + " after " +
                                  std::to_string(kMountTimeout.count()) + " s; daemon killed"));
}

Status MountedFs::reap_daemon(std::chrono::milliseconds timeout, int& status) {
  if (wait_for(daemon_, timeout, status)) {
    daemon_ = -1;
    return {};
  }
  kill_group(daemon_);
  const bool reaped = wait_for(daemon_, std::chrono::seconds(10), status);
  const std::string what = "daemon " + std::to_string(daemon_) + " did not exit within " +
                           std::to_string(timeout.count()) + " ms; sent SIGKILL" +
                           (reaped ? "" : ", and it is still there");
  if (reaped) daemon_ = -1;
  return std::unexpected(with_log(what));
}

Status MountedFs::unmount() {
  if (!mounted_) return std::unexpected("unmount: not mounted");
  if (is_target()) {
    mounted_ = false;
    return {};
  }
  if (auto done = unmount_dir(root_, false, log_path_); !done)
    return std::unexpected(with_log(done.error()));
  mounted_ = false;
  int status = 0;
  if (auto reaped = reap_daemon(kExitTimeout, status); !reaped) return reaped;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::unexpected(with_log("daemon " + describe_exit(status) + " after unmount"));
  }
  return {};
}

Status MountedFs::remount() {
  if (auto done = unmount(); !done) return done;
  return mount();
}

Status MountedFs::stop(int signal) {
  if (!mounted_) return std::unexpected("stop: not mounted");
  if (is_target()) {
    mounted_ = false;
    return {};
  }
  if (daemon_ <= 0 || ::kill(daemon_, signal) != 0) {
    return std::unexpected("stop: cannot signal the daemon: " + errno_text(errno));
  }
  mounted_ = false;
  int status = 0;
  if (auto reaped = reap_daemon(kExitTimeout, status); !reaped) return reaped;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::unexpected(
        with_log("daemon " + describe_exit(status) + " after signal " + std::to_string(signal)));
  }
  if (!mounted_fstype(root_).empty()) {
    // Detached, so that the test's end does not trip over it; still a failure.
    (void)unmount_dir(root_, true, log_path_);
    return std::unexpected(with_log("the daemon exited on signal " + std::to_string(signal) +
                                    " and left its mount behind"));
  }
  return {};
}

Status MountedFs::kill9() {
  if (is_target()) {
    // Like unmount(): nothing happens, but mount() may follow.
    mounted_ = false;
    return {};
  }
  if (daemon_ <= 0) return std::unexpected("kill9: no daemon running");
  kill_group(daemon_);
  // The dead connection stays mounted ("Transport endpoint is not connected") until detached.
  auto detached = unmount_dir(root_, true, log_path_);
  mounted_ = false;
  int status = 0;
  if (auto reaped = reap_daemon(kExitTimeout, status); !reaped) return reaped;
  if (!detached) return std::unexpected(with_log(detached.error()));
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    return std::unexpected(with_log("daemon had already " + describe_exit(status)));
  }
  return {};
}

void MountedFs::cleanup() noexcept {
  std::error_code error;
  const bool keep = std::getenv("STRIPEFS_TEST_KEEP") != nullptr;
  if (is_target()) {
    if (keep && !root_.empty())
      std::cerr << "MountedFs: STRIPEFS_TEST_KEEP: keeping " << root_ << '\n';
    if (!keep && !root_.empty()) fs::remove_all(root_, error);
    if (error) std::cerr << "MountedFs: removing " << root_ << ": " << error.message() << '\n';
    return;
  }
  if (daemon_ > 0 && mounted_) {
    if (auto done = unmount(); !done) std::cerr << "MountedFs: " << done.error() << '\n';
  }
  if (daemon_ > 0) {
    kill_group(daemon_);
    if (!mounted_fstype(root_).empty()) unmount_dir(root_, true, log_path_);
    int status = 0;
    if (auto reaped = reap_daemon(kExitTimeout, status); !reaped)
      std::cerr << reaped.error() << '\n';
  }
  if (state_dir_.empty()) return;
  // Whatever our bookkeeping says: removing the state dir through a live mount would delete
  // the filesystem's files, and leaving a mount behind would break the next run.
  if (!mounted_fstype(root_).empty()) unmount_dir(root_, true, log_path_);
  if (!mounted_fstype(root_).empty()) {
    std::cerr << "MountedFs: " << root_ << " is still mounted; leaving " << state_dir_ << '\n';
    return;
  }
  if (keep) {
    std::cerr << "MountedFs: STRIPEFS_TEST_KEEP: keeping " << state_dir_ << '\n';
    return;
  }
  fs::remove_all(state_dir_, error);
  if (error) std::cerr << "MountedFs: removing " << state_dir_ << ": " << error.message() << '\n';
}

}  // namespace stripefs::test
