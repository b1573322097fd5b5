// lock_device: one stripefs process per device. A holder that serves no FUSE session (a
// daemon closing after its unmount, an fsck) is waited for, within the bound; past it, or
// at once for wait 0, the refusal names the holder.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "raid/member_devices.hpp"

namespace stripefs::test {
namespace {

using std::chrono::milliseconds;

class DeviceLock : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/stripefs-lock-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/member";
    std::ofstream(path_) << "x";
    std::filesystem::resize_file(path_, 1 << 20);
  }
  void TearDown() override {
    TearDownHolder();
    std::filesystem::remove_all(dir_);
  }
  // Another process holding the flock, until `hold_for` has passed (or the test ends).
  // Returns once it holds it.
  void hold(std::chrono::milliseconds hold_for) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    holder_ = fork();
    ASSERT_GE(holder_, 0);
    if (holder_ == 0) {
      const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      const bool locked = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
      (void)!::write(ready[1], locked ? "y" : "n", 1);
      std::this_thread::sleep_for(hold_for);
      _exit(0);
    }
    close(ready[1]);
    char got = 0;
    ASSERT_EQ(::read(ready[0], &got, 1), 1);
    close(ready[0]);
    ASSERT_EQ(got, 'y') << "the holder could not lock";
  }
  void TearDownHolder() {
    if (holder_ > 0) {
      kill(holder_, SIGKILL);
      waitpid(holder_, nullptr, 0);
      holder_ = 0;
    }
  }
  pid_t holder_ = 0;
  std::string dir_, path_;
};

TEST_F(DeviceLock, AFreeDeviceIsLockedAndReleasedWithItsDescriptor) {
  auto fd = lock_device(path_);
  ASSERT_TRUE(fd.has_value()) << fd.error().message;
  auto again = lock_device(path_);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, EBUSY);
  close(*fd);
  auto after = lock_device(path_);
  ASSERT_TRUE(after.has_value()) << after.error().message;
  close(*after);
}

TEST_F(DeviceLock, AHolderIsNamedInTheRefusal) {
  hold(std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  auto fd = lock_device(path_, milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().code, EBUSY);
  EXPECT_EQ(fd.error().message,
            path_ + ": in use by another stripefs process (pid " + std::to_string(holder_) + ")");
  EXPECT_GE(took, milliseconds(300)) << "gave up before the bound";
}

// What `umount` followed at once by a mount does: the old daemon lets go while the new one
// waits.
TEST_F(DeviceLock, AHolderThatLetsGoWithinTheBoundIsWaitedFor) {
  hold(milliseconds(300));
  auto fd = lock_device(path_, std::chrono::seconds(20));
  ASSERT_TRUE(fd.has_value()) << fd.error().message;
  close(*fd);
}

TEST_F(DeviceLock, OpenDevicesWaitsLikewise) {
  hold(milliseconds(300));
  auto devices = open_devices({path_}, "", MemberBackend::automatic, std::chrono::seconds(20));
  ASSERT_TRUE(devices.has_value()) << devices.error().message;
  EXPECT_EQ((*devices)->members.size(), 1u);
}

// This process itself holding it (one device under two names) is refused at once.
TEST_F(DeviceLock, ItsOwnLockIsNotWaitedFor) {
  auto first = lock_device(path_);
  ASSERT_TRUE(first.has_value());
  const auto start = std::chrono::steady_clock::now();
  auto again = lock_device(path_, std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, EBUSY);
  close(*first);
}

}  // namespace
}  // namespace stripefs::test
