// lock_device: one stripefs process per device. A holder that serves no FUSE session (a
// daemon closing after its unmount, an fsck) is waited for, within the bound; past it, or
// at once for wait 0, the refusal names the holder.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
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
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Another open file description holding the flock, as another process would.
  int hold() {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
    return fd;
  }
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
  const int held = hold();
  const auto start = std::chrono::steady_clock::now();
  auto fd = lock_device(path_, milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().code, EBUSY);
  EXPECT_EQ(fd.error().message,
            path_ + ": in use by another stripefs process (pid " + std::to_string(getpid()) + ")");
  EXPECT_GE(took, milliseconds(300)) << "gave up before the bound";
  close(held);
}

// What `umount` followed at once by a mount does: the old daemon lets go while the new one
// waits.
TEST_F(DeviceLock, AHolderThatLetsGoWithinTheBoundIsWaitedFor) {
  const int held = hold();
  std::thread letting_go([held] {
    std::this_thread::sleep_for(milliseconds(200));
    close(held);
  });
  auto fd = lock_device(path_, std::chrono::seconds(20));
  letting_go.join();
  ASSERT_TRUE(fd.has_value()) << fd.error().message;
  close(*fd);
}

TEST_F(DeviceLock, OpenDevicesWaitsLikewise) {
  const int held = hold();
  std::thread letting_go([held] {
    std::this_thread::sleep_for(milliseconds(200));
    close(held);
  });
  auto devices = open_devices({path_}, "", std::chrono::seconds(20));
  letting_go.join();
  ASSERT_TRUE(devices.has_value()) << devices.error().message;
  EXPECT_EQ((*devices)->members.size(), 1u);
}

}  // namespace
}  // namespace stripefs::test
