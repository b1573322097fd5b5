// What survives an unmount, and what survives a crash of the daemon (SIGKILL). These need a
// daemon to stop, so they skip against a plain directory.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <thread>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

// Everything a walk of the tree can observe about one name.
struct Entry {
  ino_t ino = 0;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  nlink_t nlink = 0;
  off_t size = 0;
  dev_t rdev = 0;
  int64_t mtime = 0;
  std::string content;  // file data, link target or sorted directory listing
  std::map<std::string, std::string> xattrs;
  bool operator==(const Entry&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Entry& e) {
  out << "{ino " << e.ino << ", mode " << std::oct << e.mode << std::dec << ", uid " << e.uid
      << ", gid " << e.gid << ", nlink " << e.nlink << ", size " << e.size << ", rdev " << e.rdev
      << ", mtime " << e.mtime << ", " << e.content.size() << " bytes of content, "
      << e.xattrs.size() << " xattrs}";
  return out;
}

using Snapshot = std::map<std::string, Entry>;

std::map<std::string, std::string> xattrs_of(const std::string& p) {
  std::map<std::string, std::string> out;
  std::string names(65536, '\0');
  const ssize_t size = llistxattr(p.c_str(), names.data(), names.size());
  if (size < 0) {
    if (errno != ENOTSUP) ADD_FAILURE() << "llistxattr " << p << ": " << errno_name(errno);
    return out;
  }
  for (size_t at = 0; at < static_cast<size_t>(size);) {
    const std::string name(names.c_str() + at);
    at += name.size() + 1;
    std::string value(65536, '\0');
    const ssize_t n = lgetxattr(p.c_str(), name.c_str(), value.data(), value.size());
    if (n < 0) {
      ADD_FAILURE() << "lgetxattr " << p << " " << name << ": " << errno_name(errno);
      continue;
    }
    value.resize(static_cast<size_t>(n));
    out[name] = value;
  }
  return out;
}

// Walks everything under root (root included, as ".").
void walk(const std::string& root, const std::string& rel, Snapshot& out) {
  const std::string p = rel == "." ? root : root + "/" + rel;
  const struct stat st = lstat_of(p);
  Entry e{st.st_ino,   st.st_mode,  st.st_uid,  st.st_gid,
          st.st_nlink, st.st_size,  st.st_rdev, nanoseconds(st.st_mtim),
          {},          xattrs_of(p)};
  if (S_ISREG(st.st_mode)) {
    const Bytes data = read_file(p);
    e.content.assign(data.begin(), data.end());
  } else if (S_ISLNK(st.st_mode)) {
    std::string target(4096, '\0');
    const ssize_t n = readlink(p.c_str(), target.data(), target.size());
    if (n < 0) ADD_FAILURE() << "readlink " << p << ": " << errno_name(errno);
    target.resize(n < 0 ? 0 : static_cast<size_t>(n));
    e.content = target;
  } else if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names = list_dir(p);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      e.content += name + "\n";
      if (name != "." && name != "..") walk(root, rel == "." ? name : rel + "/" + name, out);
    }
  }
  out[rel] = e;
}

Snapshot snapshot(const std::string& root) {
  Snapshot out;
  walk(root, ".", out);
  return out;
}

void expect_same(const Snapshot& got, const Snapshot& want) {
  for (const auto& [name, entry] : want) {
    const auto found = got.find(name);
    if (found == got.end()) {
      ADD_FAILURE() << name << " is gone";
      continue;
    }
    EXPECT_EQ(found->second, entry) << name;
    if (found->second.content != entry.content) {
      EXPECT_TRUE(same_bytes(Bytes(found->second.content.begin(), found->second.content.end()),
                             Bytes(entry.content.begin(), entry.content.end())))
          << name;
    }
  }
  for (const auto& [name, entry] : got) {
    if (!want.contains(name)) ADD_FAILURE() << name << " appeared: " << entry;
  }
}

class Persistence : public MountedTest {
 protected:
  void SetUp() override {
    MountedTest::SetUp();
    if (HasFatalFailure()) return;
    if (!fs_.can_remount()) GTEST_SKIP() << "needs a daemon to stop: not on a plain directory";
  }
  void remount() {
    const Status done = fs_.remount();
    ASSERT_TRUE(done) << done.error();
  }
  void crash_and_mount() {
    const Status killed = fs_.kill9();
    ASSERT_TRUE(killed) << killed.error();
    const Status mounted = fs_.mount();
    ASSERT_TRUE(mounted) << mounted.error();
  }
  void fsync_path(const std::string& p) {
    Fd fd = open_file(p, O_RDONLY);
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(fsync(fd.get()), 0) << p << ": " << errno_name(errno);
  }
  std::pair<uint64_t, uint64_t> free_blocks_and_inodes() {
    struct statvfs st {};
    if (statvfs(path().c_str(), &st) != 0) ADD_FAILURE() << "statvfs: " << errno_name(errno);
    return {st.f_bfree, st.f_ffree};
  }
};

TEST_F(Persistence, RemountKeepsNamesDataAttributesAndInodes) {
  ASSERT_SYS(mkdir(path("a").c_str(), 0755));
  ASSERT_SYS(mkdir(path("a/b").c_str(), 0750));
  ASSERT_SYS(mkdir(path("a/b/c").c_str(), 0700));
  ASSERT_TRUE(write_file(path("a/file"), random_bytes(kMiB + 3, 1)));
  ASSERT_TRUE(write_file(path("a/empty"), {}));
  {
    Fd sparse = open_file(path("a/sparse"), O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(sparse.valid());
    ASSERT_TRUE(write_at(sparse.get(), random_bytes(4096, 2), 0));
    ASSERT_TRUE(write_at(sparse.get(), random_bytes(5000, 3), static_cast<off_t>(16 * kMiB)));
  }
  ASSERT_SYS(link(path("a/file").c_str(), path("a/b/hard").c_str()));
  ASSERT_SYS(symlink(std::string(3000, 'l').c_str(), path("a/long-link").c_str()));
  ASSERT_SYS(symlink("file", path("a/short-link").c_str()));
  ASSERT_SYS(mkfifo(path("a/fifo").c_str(), 0600));
  ASSERT_SYS(mknod(path("a/device").c_str(), S_IFCHR | 0600, makedev(1, 5)));
  ASSERT_SYS(chmod(path("a/file").c_str(), 04640));
  ASSERT_SYS(chown(path("a/empty").c_str(), 1234, 5678));
  ASSERT_SYS(setxattr(path("a/file").c_str(), "user.one", "1", 1, 0));
  const Bytes big = random_bytes(3 * 1024, 4);
  ASSERT_SYS(setxattr(path("a").c_str(), "user.big", big.data(), big.size(), 0));
  ASSERT_SYS(mkdir(path("many").c_str(), 0755));
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(write_file(path("many/entry" + std::to_string(i)), to_bytes(std::to_string(i))));
  }
  const timespec times[2] = {{1'111'111'111, 1}, {1'222'222'222, 2}};
  ASSERT_SYS(utimensat(AT_FDCWD, path("a/b").c_str(), times, 0));

  const Snapshot before = snapshot(path());
  ASSERT_NO_FATAL_FAILURE(remount());
  expect_same(snapshot(path()), before);
  const auto usage = free_blocks_and_inodes();

  // A mount cycle with no changes leaks nothing.
  ASSERT_NO_FATAL_FAILURE(remount());
  expect_same(snapshot(path()), before);
  EXPECT_EQ(free_blocks_and_inodes(), usage) << "free blocks and inodes after a second remount";

  // And the remounted filesystem takes changes as usual.
  ASSERT_SYS(unlink(path("a/file").c_str()));
  EXPECT_EQ(lstat_of(path("a/b/hard")).st_nlink, 1u);
  ASSERT_TRUE(write_file(path("a/new"), to_bytes("new")));
  ASSERT_NO_FATAL_FAILURE(remount());
  EXPECT_TRUE(same_bytes(read_file(path("a/new")), to_bytes("new")));
  EXPECT_EQ(lstat_of(path("a/b/hard")).st_nlink, 1u);
  EXPECT_TRUE(same_bytes(read_file(path("a/b/hard")), Bytes(before.at("a/file").content.begin(),
                                                            before.at("a/file").content.end())));
}

TEST_F(Persistence, DeletesAndRenamesSurviveRemount) {
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(write_file(path("d/f" + std::to_string(i)), to_bytes(std::to_string(i))));
  }
  for (int i = 0; i < 20; i += 2) ASSERT_SYS(unlink(path("d/f" + std::to_string(i)).c_str()));
  ASSERT_SYS(rename(path("d/f1").c_str(), path("moved").c_str()));
  ASSERT_SYS(rename(path("d/f3").c_str(), path("d/f5").c_str()));
  ASSERT_SYS(setxattr(path("moved").c_str(), "user.x", "v", 1, 0));
  ASSERT_SYS(removexattr(path("moved").c_str(), "user.x"));
  const Snapshot before = snapshot(path());
  ASSERT_NO_FATAL_FAILURE(remount());
  expect_same(snapshot(path()), before);
}

// After a crash, what was fsynced (file data and, by fsync of the directory, its name) is
// intact. What was not may be missing or partial, but never holds foreign data, and the
// filesystem mounts and works.
TEST_F(Persistence, FsyncedDataSurvivesACrash) {
  const Bytes synced = random_bytes(4 * kMiB + 5, 1);
  {
    Fd fd = open_file(path("synced"), O_RDWR | O_CREAT | O_TRUNC);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(write_at(fd.get(), synced, 0));
    ASSERT_EQ(fsync(fd.get()), 0);
  }
  ASSERT_NO_FATAL_FAILURE(fsync_path(path()));
  const ino_t synced_ino = stat_of(path("synced")).st_ino;

  const Bytes unsynced = random_bytes(2 * kMiB, 2);
  {
    Fd fd = open_file(path("unsynced"), O_RDWR | O_CREAT | O_TRUNC);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(write_at(fd.get(), unsynced, 0));
  }
  ASSERT_NO_FATAL_FAILURE(crash_and_mount());

  EXPECT_EQ(stat_of(path("synced")).st_ino, synced_ino);
  EXPECT_TRUE(same_bytes(read_file(path("synced")), synced));
  struct stat st {};
  if (lstat(path("unsynced").c_str(), &st) == 0) {
    const Bytes got = read_file(path("unsynced"));
    EXPECT_LE(got.size(), unsynced.size());
    for (size_t block = 0; block * 4096 < got.size(); ++block) {
      const size_t begin = block * 4096;
      const size_t end = std::min(got.size(), begin + 4096);
      const Bytes part(got.begin() + begin, got.begin() + end);
      const bool ours = std::equal(part.begin(), part.end(), unsynced.begin() + begin);
      EXPECT_TRUE(ours || all_zero(part)) << "block " << block << " of the unsynced file";
    }
  } else {
    EXPECT_EQ(errno, ENOENT) << errno_name(errno);
  }

  // Still a working filesystem.
  ASSERT_TRUE(write_file(path("afterwards"), to_bytes("works")));
  EXPECT_TRUE(same_bytes(read_file(path("afterwards")), to_bytes("works")));
  ASSERT_NO_FATAL_FAILURE(remount());
  EXPECT_TRUE(same_bytes(read_file(path("afterwards")), to_bytes("works")));
  EXPECT_TRUE(same_bytes(read_file(path("synced")), synced));
}

TEST_F(Persistence, FsyncedDirectoryChangesSurviveACrash) {
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  for (int i = 0; i < 50; ++i) {
    const std::string name = path("d/f" + std::to_string(i));
    ASSERT_TRUE(write_file(name, to_bytes("content " + std::to_string(i))));
    ASSERT_NO_FATAL_FAILURE(fsync_path(name));
  }
  ASSERT_SYS(rename(path("d/f0").c_str(), path("d/renamed").c_str()));
  ASSERT_SYS(unlink(path("d/f1").c_str()));
  ASSERT_SYS(mkdir(path("d/sub").c_str(), 0755));
  ASSERT_NO_FATAL_FAILURE(fsync_path(path("d")));
  ASSERT_NO_FATAL_FAILURE(fsync_path(path()));
  const Snapshot before = snapshot(path("d"));

  ASSERT_NO_FATAL_FAILURE(crash_and_mount());
  expect_same(snapshot(path("d")), before);
}

// A crash in the middle of a stream of writes and namespace changes: the filesystem must
// mount again, and everything in it must be readable.
TEST_F(Persistence, CrashDuringWritesLeavesAMountableFilesystem) {
  ASSERT_SYS(mkdir(path("busy").c_str(), 0755));
  const std::string dir = path("busy");
  const pid_t writer = fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    // Runs until the daemon dies under it; then every call fails and the loop ends.
    const Bytes data = random_bytes(300 * 1024, 3);
    for (int i = 0;; ++i) {
      const std::string name = dir + "/w" + std::to_string(i % 40);
      const int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) _exit(0);
      const bool wrote = write(fd, data.data(), data.size()) > 0;
      if (i % 7 == 0) fsync(fd);
      ::close(fd);
      if (!wrote) _exit(0);
      if (i % 5 == 0) rename(name.c_str(), (dir + "/r" + std::to_string(i % 13)).c_str());
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const Status killed = fs_.kill9();
  int status = 0;
  // The writer fails fast once the connection is gone; give it a generous bound.
  for (int i = 0; i < 300 && waitpid(writer, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (waitpid(writer, &status, WNOHANG) == 0) {
    kill(writer, SIGKILL);
    waitpid(writer, &status, 0);
    ADD_FAILURE() << "the writer hung on the dead mount";
  }
  ASSERT_TRUE(killed) << killed.error();
  const Status mounted = fs_.mount();
  ASSERT_TRUE(mounted) << mounted.error();

  const Snapshot after = snapshot(path());  // reads every file; fails on any error
  EXPECT_TRUE(after.contains("busy"));
  for (const auto& [name, entry] : after) {
    if (S_ISREG(entry.mode)) {
      EXPECT_LE(entry.size, 300 * 1024) << name;
    }
  }
  ASSERT_TRUE(write_file(path("busy/after"), to_bytes("ok")));
  EXPECT_TRUE(same_bytes(read_file(path("busy/after")), to_bytes("ok")));
}

}  // namespace
}  // namespace stripefs::test
