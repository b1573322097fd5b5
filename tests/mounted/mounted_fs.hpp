// One filesystem under test, mounted for one test. Independent of gtest: failures come back as
// messages for the caller to report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "mounted/loop_device.hpp"

namespace stripefs::test {

// A failure is a message saying what was attempted and, for the daemon, the tail of its log.
using Status = std::expected<void, std::string>;

// Two ways to run:
//  - stripefs: a fresh state directory under /var/tmp holds kMembers sparse member files, a
//    log and the mount point. mount() formats the members once (mkfs.stripefs) and starts the
//    daemon in the foreground as a child process; unmount(), remount() and kill9() control it.
//  - target: when STRIPEFS_TEST_TARGET names a directory, a fresh scratch directory inside it
//    stands in for the mount, so the suite can be checked against tmpfs or ext4. There is no
//    daemon: unmount() and kill9() do nothing, and can_remount() is false.
//
// The programs are the compile definitions STRIPEFS_MKFS_PATH and STRIPEFS_MOUNT_PATH, each
// overridable by the environment variable of the same name.
//
// The destructor never leaves a mount behind (a lazy unmount is the last resort) and removes
// the state or scratch directory.
class MountedFs {
 public:
  static constexpr unsigned kMembers = 4;
  static constexpr uint64_t kDefaultMemberSize = uint64_t{256} << 20;
  static constexpr auto kMountTimeout = std::chrono::seconds(20);
  // Longer than a mount: unmounting flushes the daemon's cache.
  static constexpr auto kExitTimeout = std::chrono::seconds(60);
  static constexpr auto kMkfsTimeout = std::chrono::seconds(120);

  MountedFs();
  ~MountedFs();
  MountedFs(const MountedFs&) = delete;
  MountedFs& operator=(const MountedFs&) = delete;

  // Both only take effect before the first mount().
  void set_member_size(uint64_t bytes) { member_size_ = bytes; }
  // The RAID level ("5", "1", ...) and member count mkfs gets (default 5 and kMembers).
  void set_level(std::string level, unsigned members) {
    level_ = std::move(level);
    member_count_ = members;
  }
  // More mkfs.stripefs arguments, e.g. {"--backend", "pmem"}. Only before the first mount().
  void set_mkfs_arguments(std::vector<std::string> arguments) {
    mkfs_arguments_ = std::move(arguments);
  }
  // The daemon's -o value, e.g. "default_permissions,allow_other". Empty: no -o at all.
  void set_mount_options(std::string options) { mount_options_ = std::move(options); }
  // A new sparse file of the members' size in the state directory (a spare, a replacement),
  // removed with it. Empty path, and a non-fatal message in `error`, on failure.
  std::filesystem::path new_device(const std::string& name, std::string& error);
  // The members are loop devices over the member files (a block device's path: O_DIRECT
  // through io_uring), so that shrink_member() can make one fail for real. Only before the
  // first mount().
  void use_loop_devices() { use_loops_ = true; }
  // Member `index`'s loop device cut to `bytes` under the running filesystem: every request
  // beyond fails in the kernel, as on a dying disk.
  [[nodiscard]] Status shrink_member(size_t index, uint64_t bytes);
  // The devices the next mount names, in place of members() (after a member was replaced).
  void set_members(std::vector<std::filesystem::path> members) { members_ = std::move(members); }

  // The first call creates the state directory, the members and the filesystem; later calls
  // mount the same members again. Returns once the mount is visible in /proc/self/mountinfo.
  [[nodiscard]] Status mount();
  // Unmounts and requires the daemon to exit with status 0 (it flushes on the way out).
  [[nodiscard]] Status unmount();
  [[nodiscard]] Status remount();
  // Stops the daemon with `signal` (SIGTERM, SIGINT or SIGHUP, on which it stops cleanly)
  // and requires it to exit with status 0, its mount gone. mount() again to go on.
  [[nodiscard]] Status stop(int signal);
  // A crash: SIGKILL to the daemon, then a lazy unmount of the dead mount. mount() again to
  // see what survived.
  [[nodiscard]] Status kill9();

  bool is_target() const { return !target_.empty(); }
  bool can_remount() const { return !is_target(); }
  bool mounted() const { return mounted_; }

  // The root of the filesystem under test: the mount point, or the scratch directory.
  const std::filesystem::path& root() const { return root_; }
  // root() joined with rel; rel is relative ("a/b"), empty for the root itself.
  std::string path(std::string_view rel = {}) const;
  // Empty in target mode. Valid while this object lives, mounted or not, for external checks.
  const std::vector<std::filesystem::path>& members() const { return members_; }
  // mkfs and daemon output, both appended; empty path in target mode.
  const std::filesystem::path& log_path() const { return log_path_; }
  std::string log_tail(size_t max_bytes = 16 * 1024) const;

 private:
  Status prepare_target();
  Status prepare_state();
  Status format();
  Status start_daemon();
  Status wait_until_mounted();
  // Reaps the daemon within timeout; a daemon that will not exit is SIGKILLed.
  Status reap_daemon(std::chrono::milliseconds timeout, int& status);
  std::string with_log(std::string message) const;
  void cleanup() noexcept;

  std::filesystem::path target_;  // STRIPEFS_TEST_TARGET, empty in stripefs mode
  std::filesystem::path state_dir_;
  std::filesystem::path root_;
  std::filesystem::path log_path_;
  std::vector<std::filesystem::path> members_;
  bool use_loops_ = false;
  std::vector<LoopDevice> loops_;  // the members, with use_loop_devices()
  uint64_t member_size_ = kDefaultMemberSize;
  std::string mount_options_;
  std::vector<std::string> mkfs_arguments_;
  std::string level_ = "5";
  unsigned member_count_ = kMembers;
  std::string mkfs_path_;
  std::string mount_path_;
  pid_t daemon_ = -1;
  bool formatted_ = false;
  bool mounted_ = false;
};

}  // namespace stripefs::test
