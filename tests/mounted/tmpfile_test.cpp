// O_TMPFILE (fs/daemon/tmpfile_op.*): an unnamed file written, read and then named with
// linkat(2), as Samba, systemd and editors use it; one opened with O_EXCL that may never be
// named; and one never named, which leaves nothing behind: neither on close nor when the
// daemon is killed while it is open (the orphan list frees it at the next mount).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

Bytes pattern_bytes(size_t size, uint8_t seed) {
  Bytes b(size);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(i * 131 + seed + i / 4096);
  return b;
}

class Tmpfile : public MountedTest {
 protected:
  // Free inodes, once the kernel's release of a closed file has reached the daemon.
  uint64_t free_inodes_when(uint64_t expected) {
    struct statvfs st {};
    for (int i = 0; i < 200; ++i) {
      if (statvfs(path().c_str(), &st) != 0) return 0;
      if (st.f_ffree == expected) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return st.f_ffree;
  }
  uint64_t free_inodes() {
    struct statvfs st {};
    return statvfs(path().c_str(), &st) == 0 ? st.f_ffree : 0;
  }
};

TEST_F(Tmpfile, AnUnnamedFileIsWrittenReadAndThenNamed) {
  ASSERT_SYS(mkdir(path("dir").c_str(), 02775));
  const mode_t old_umask = umask(022);
  Fd fd(open(path("dir").c_str(), O_TMPFILE | O_RDWR, 0640));
  umask(old_umask);
  if (!fd.valid() && target_lacks(errno)) GTEST_SKIP() << "no O_TMPFILE here";
  ASSERT_TRUE(fd.valid()) << "open(O_TMPFILE): " << errno_name(errno);
  const Bytes data = pattern_bytes(3 * kMiB + 123, 7);
  ASSERT_EQ(pwrite(fd.get(), data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_mode, S_IFREG | 0640);
  EXPECT_EQ(st.st_gid, stat_of(path("dir")).st_gid) << "the set-group-ID directory's group";
  EXPECT_EQ(list_dir(path("dir")).size(), 2u) << "no name before linkat: . and .. alone";
  Bytes back(data.size());
  ASSERT_EQ(pread(fd.get(), back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  EXPECT_TRUE(same_bytes(back, data));
  ASSERT_SYS(linkat(fd.get(), "", AT_FDCWD, path("dir/named").c_str(), AT_EMPTY_PATH));
  EXPECT_EQ(fstat_of(fd.get()).st_nlink, 1u);
  EXPECT_EQ(stat_of(path("dir/named")).st_ino, st.st_ino);
  ASSERT_SYS(fsync(fd.get()));
  ASSERT_EQ(fd.close(), 0);
  if (fs_.can_remount()) {
    const Status done = fs_.remount();
    ASSERT_TRUE(done) << done.error();
  }
  EXPECT_TRUE(same_bytes(read_file(path("dir/named")), data));
  EXPECT_EQ(stat_of(path("dir/named")).st_nlink, 1u);
}

TEST_F(Tmpfile, OneOpenedExclusiveIsNeverNamed) {
  Fd fd(open(path().c_str(), O_TMPFILE | O_EXCL | O_WRONLY, 0600));
  if (!fd.valid() && target_lacks(errno)) GTEST_SKIP() << "no O_TMPFILE here";
  ASSERT_TRUE(fd.valid()) << errno_name(errno);
  EXPECT_ERRNO(ENOENT, linkat(fd.get(), "", AT_FDCWD, path("named").c_str(), AT_EMPTY_PATH));
  // The kernel's own refusals: no write access asked for, or a file for the directory.
  EXPECT_ERRNO(EINVAL, open(path().c_str(), O_TMPFILE | O_RDONLY, 0600));
  ASSERT_TRUE(write_file(path("file"), Bytes{1}));
  EXPECT_ERRNO(ENOTDIR, open(path("file").c_str(), O_TMPFILE | O_WRONLY, 0600));
}

TEST_F(Tmpfile, OneNeverNamedLeavesNothingOnCloseOrAfterAKill) {
  const uint64_t before = free_inodes();
  {
    Fd fd(open(path().c_str(), O_TMPFILE | O_RDWR, 0600));
    if (!fd.valid() && target_lacks(errno)) GTEST_SKIP() << "no O_TMPFILE here";
    ASSERT_TRUE(fd.valid()) << errno_name(errno);
    const Bytes data = pattern_bytes(kMiB, 3);
    ASSERT_EQ(write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(free_inodes(), before - 1);
  }
  EXPECT_EQ(free_inodes_when(before), before) << "closing the only descriptor frees it";
  if (!fs_.can_remount()) return;
  Fd kept(open(path().c_str(), O_TMPFILE | O_RDWR, 0600));
  ASSERT_TRUE(kept.valid()) << errno_name(errno);
  const Bytes data = pattern_bytes(kMiB, 4);
  ASSERT_EQ(write(kept.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_SYS(fsync(kept.get()));  // committed: the inode and its place on the orphan list
  const Status killed = fs_.kill9();
  ASSERT_TRUE(killed) << killed.error();
  kept.reset();
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();
  EXPECT_EQ(free_inodes(), before) << "the mount after the kill freed it";
  EXPECT_EQ(list_dir(path()).size(), 2u);
}

}  // namespace
}  // namespace stripefs::test
