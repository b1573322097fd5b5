// What stat reports, and how chmod, chown, utimensat and writes change it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class Attributes : public MountedTest {};

mode_t current_umask() {
  const mode_t mask = umask(0);
  umask(mask);
  return mask;
}

TEST_F(Attributes, NewFilesAndDirectoriesStatAsCreated) {
  const mode_t mask = current_umask();
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_EXCL, 0666);
  ASSERT_TRUE(fd.valid());
  struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_mode, S_IFREG | (0666 & ~mask));
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_gid, getegid());
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_GT(st.st_blksize, 0);
  EXPECT_EQ(st.st_dev, stat_of(path()).st_dev);

  constexpr size_t kSize = 100'000;
  ASSERT_TRUE(write_at(fd.get(), random_bytes(kSize, 1), 0));
  ASSERT_EQ(fsync(fd.get()), 0);
  st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, static_cast<off_t>(kSize));
  EXPECT_GE(st.st_blocks * 512, static_cast<blkcnt_t>(kSize));
  EXPECT_LE(st.st_blocks * 512, static_cast<blkcnt_t>(kSize + kMiB)) << "no runaway allocation";

  ASSERT_SYS(mkdir(path("dir").c_str(), 0777));
  st = stat_of(path("dir"));
  EXPECT_EQ(st.st_mode, S_IFDIR | (0777 & ~mask));
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_gid, getegid());
  EXPECT_EQ(st.st_nlink, 2u);
}

TEST_F(Attributes, InodeNumbersAreDistinctAndStable) {
  std::set<ino_t> inodes = {stat_of(path()).st_ino};
  std::vector<std::pair<std::string, ino_t>> made;
  for (int i = 0; i < 100; ++i) {
    const std::string name = (i % 4 == 0 ? "dir" : "file") + std::to_string(i);
    if (i % 4 == 0) {
      ASSERT_SYS(mkdir(path(name).c_str(), 0755));
    } else {
      ASSERT_TRUE(write_file(path(name), {}));
    }
    const ino_t ino = stat_of(path(name)).st_ino;
    EXPECT_TRUE(inodes.insert(ino).second) << name << " reuses inode " << ino;
    made.emplace_back(name, ino);
  }
  for (const auto& [name, ino] : made) {
    EXPECT_EQ(stat_of(path(name)).st_ino, ino) << name;
    Fd fd = open_file(path(name), O_RDONLY);
    ASSERT_TRUE(fd.valid());
    EXPECT_EQ(fstat_of(fd.get()).st_ino, ino) << name;
  }
  ASSERT_SYS(mkdir(path("elsewhere").c_str(), 0755));
  ASSERT_SYS(rename(path("file1").c_str(), path("elsewhere/renamed").c_str()));
  EXPECT_EQ(stat_of(path("elsewhere/renamed")).st_ino, made[1].second) << "rename keeps it";
}

TEST_F(Attributes, ChmodSetsEveryModeBitAndTheChangeTime) {
  ASSERT_TRUE(write_file(path("file"), to_bytes("x")));
  ASSERT_SYS(mkdir(path("dir").c_str(), 0755));
  for (mode_t mode :
       {mode_t{0}, mode_t{0400}, mode_t{0751}, mode_t{04755}, mode_t{02711}, mode_t{07777}}) {
    const struct stat before = stat_of(path("file"));
    let_clock_tick();
    ASSERT_SYS(chmod(path("file").c_str(), mode));
    const struct stat after = stat_of(path("file"));
    EXPECT_EQ(after.st_mode, S_IFREG | mode) << std::oct << mode;
    EXPECT_GT(nanoseconds(after.st_ctim), nanoseconds(before.st_ctim)) << std::oct << mode;
    EXPECT_EQ(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim)) << std::oct << mode;
  }
  Fd fd = open_file(path("dir"), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(fd.valid());
  ASSERT_SYS(fchmod(fd.get(), 01777));
  EXPECT_EQ(stat_of(path("dir")).st_mode, S_IFDIR | 01777);
}

TEST_F(Attributes, ChownSetsOwnersAndClearsSetId) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to other owners needs root";
  ASSERT_TRUE(write_file(path("file"), to_bytes("x")));
  const struct stat before = stat_of(path("file"));
  let_clock_tick();
  ASSERT_SYS(chown(path("file").c_str(), 1234, 5678));
  struct stat st = stat_of(path("file"));
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_GT(nanoseconds(st.st_ctim), nanoseconds(before.st_ctim));
  ASSERT_SYS(chown(path("file").c_str(), static_cast<uid_t>(-1), 42));
  st = stat_of(path("file"));
  EXPECT_EQ(st.st_uid, 1234u) << "-1 leaves the owner alone";
  EXPECT_EQ(st.st_gid, 42u);

  // Linux clears set-user-ID, and set-group-ID with group execute, when a file changes
  // owner, also for root.
  ASSERT_SYS(chmod(path("file").c_str(), 06755));
  ASSERT_SYS(chown(path("file").c_str(), 4321, 4321));
  EXPECT_EQ(stat_of(path("file")).st_mode, S_IFREG | 0755);

  // lchown changes the link, not its target.
  ASSERT_SYS(symlink("file", path("link").c_str()));
  ASSERT_SYS(lchown(path("link").c_str(), 77, 88));
  EXPECT_EQ(lstat_of(path("link")).st_uid, 77u);
  EXPECT_EQ(stat_of(path("file")).st_uid, 4321u);
}

TEST_F(Attributes, UtimensatSetsOmitsAndStampsNow) {
  ASSERT_TRUE(write_file(path("file"), to_bytes("x")));
  const std::string file = path("file");
  const timespec set[2] = {{1'000'000'000, 123'456'789}, {4'102'444'800, 987'654'321}};
  let_clock_tick();
  const struct stat before = stat_of(file);
  let_clock_tick();
  ASSERT_SYS(utimensat(AT_FDCWD, file.c_str(), set, 0));
  struct stat st = stat_of(file);
  EXPECT_EQ(nanoseconds(st.st_atim), nanoseconds(set[0]));
  EXPECT_EQ(nanoseconds(st.st_mtim), nanoseconds(set[1])) << "a time past 2038 fits";
  EXPECT_GT(nanoseconds(st.st_ctim), nanoseconds(before.st_ctim));

  const timespec omit_atime[2] = {{0, UTIME_OMIT}, {1'500'000'000, 5}};
  ASSERT_SYS(utimensat(AT_FDCWD, file.c_str(), omit_atime, 0));
  st = stat_of(file);
  EXPECT_EQ(nanoseconds(st.st_atim), nanoseconds(set[0]));
  EXPECT_EQ(nanoseconds(st.st_mtim), nanoseconds(omit_atime[1]));

  // Both omitted: nothing changes, not even the change time.
  const struct stat unchanged = stat_of(file);
  let_clock_tick();
  const timespec omit_both[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
  ASSERT_SYS(utimensat(AT_FDCWD, file.c_str(), omit_both, 0));
  st = stat_of(file);
  EXPECT_EQ(nanoseconds(st.st_ctim), nanoseconds(unchanged.st_ctim));
  EXPECT_EQ(nanoseconds(st.st_mtim), nanoseconds(unchanged.st_mtim));

  const int64_t now_before = nanoseconds(now_realtime());
  const timespec now_mtime[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ASSERT_SYS(utimensat(AT_FDCWD, file.c_str(), now_mtime, 0));
  const int64_t now_after = nanoseconds(now_realtime());
  st = stat_of(file);
  EXPECT_EQ(nanoseconds(st.st_atim), nanoseconds(set[0]));
  // The kernel's coarse clock may lag the precise one by a tick.
  EXPECT_GE(nanoseconds(st.st_mtim), now_before - 20'000'000);
  EXPECT_LE(nanoseconds(st.st_mtim), now_after + 20'000'000);

  ASSERT_SYS(utimensat(AT_FDCWD, file.c_str(), nullptr, 0));
  st = stat_of(file);
  EXPECT_GE(nanoseconds(st.st_atim), now_before - 20'000'000);

  // AT_SYMLINK_NOFOLLOW stamps the link itself.
  ASSERT_SYS(symlink("file", path("link").c_str()));
  ASSERT_SYS(utimensat(AT_FDCWD, path("link").c_str(), set, AT_SYMLINK_NOFOLLOW));
  EXPECT_EQ(nanoseconds(lstat_of(path("link")).st_mtim), nanoseconds(set[1]));
  EXPECT_NE(nanoseconds(stat_of(file).st_mtim), nanoseconds(set[1]));
}

TEST_F(Attributes, WritesAndTruncatesUpdateModificationTimes) {
  Fd fd = open_file(path("file"), O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_at(fd.get(), to_bytes("first"), 0));
  struct stat before = fstat_of(fd.get());
  let_clock_tick();
  ASSERT_TRUE(write_at(fd.get(), to_bytes("second"), 3));
  struct stat after = fstat_of(fd.get());
  EXPECT_GT(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim)) << "write";
  EXPECT_GT(nanoseconds(after.st_ctim), nanoseconds(before.st_ctim)) << "write";

  before = after;
  let_clock_tick();
  EXPECT_EQ(read_at(fd.get(), 0, 100).size(), 9u);
  after = fstat_of(fd.get());
  EXPECT_EQ(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim)) << "read";

  let_clock_tick();
  ASSERT_SYS(ftruncate(fd.get(), 2));
  after = fstat_of(fd.get());
  EXPECT_GT(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim)) << "truncate";
  EXPECT_GT(nanoseconds(after.st_ctim), nanoseconds(before.st_ctim)) << "truncate";

  // A new link changes the file's change time, not its modification time.
  before = after;
  let_clock_tick();
  ASSERT_SYS(link(path("file").c_str(), path("link").c_str()));
  after = fstat_of(fd.get());
  EXPECT_GT(nanoseconds(after.st_ctim), nanoseconds(before.st_ctim)) << "link";
  EXPECT_EQ(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim)) << "link";
}

TEST_F(Attributes, EntryChangesUpdateTheDirectoryTimes) {
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  ASSERT_SYS(mkdir(path("other").c_str(), 0755));
  struct stat before = stat_of(path("d"));
  const auto check_changed = [&](const char* what) {
    const struct stat after = stat_of(path("d"));
    EXPECT_GT(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim)) << what;
    EXPECT_GT(nanoseconds(after.st_ctim), nanoseconds(before.st_ctim)) << what;
    before = after;
    let_clock_tick();
  };
  let_clock_tick();
  ASSERT_TRUE(write_file(path("d/file"), {}));
  check_changed("create");
  ASSERT_SYS(mkdir(path("d/sub").c_str(), 0755));
  check_changed("mkdir");
  ASSERT_SYS(rename(path("d/file").c_str(), path("d/renamed").c_str()));
  check_changed("rename within");
  ASSERT_SYS(rename(path("d/renamed").c_str(), path("other/moved").c_str()));
  check_changed("rename out");
  ASSERT_SYS(rmdir(path("d/sub").c_str()));
  check_changed("rmdir");
  ASSERT_SYS(symlink("x", path("d/link").c_str()));
  check_changed("symlink");
  ASSERT_SYS(unlink(path("d/link").c_str()));
  check_changed("unlink");
}

TEST_F(Attributes, SetGroupIdDirectoryPassesOnItsGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to another group needs root";
  ASSERT_SYS(mkdir(path("shared").c_str(), 0755));
  ASSERT_SYS(chown(path("shared").c_str(), static_cast<uid_t>(-1), 4321));
  ASSERT_SYS(chmod(path("shared").c_str(), 02775));
  ASSERT_TRUE(write_file(path("shared/file"), {}));
  EXPECT_EQ(stat_of(path("shared/file")).st_gid, 4321u);
  ASSERT_SYS(mkdir(path("shared/sub").c_str(), 0755));
  const struct stat sub = stat_of(path("shared/sub"));
  EXPECT_EQ(sub.st_gid, 4321u);
  EXPECT_TRUE(sub.st_mode & S_ISGID) << "subdirectories inherit the bit";
  ASSERT_SYS(mkdir(path("plain").c_str(), 0755));
  EXPECT_EQ(stat_of(path("plain")).st_gid, getegid());
}

}  // namespace
}  // namespace stripefs::test
