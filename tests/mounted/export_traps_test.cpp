// What an NFS or SMB server exporting the mount relies on, each a known trap of FUSE NAS
// filesystems: file handles (name_to_handle_at, as knfsd and Ganesha's FSAL_VFS use them)
// that work after the kernel forgot the inode and after a remount, and go stale once the
// inode is gone or reused, for every kind of node; "." and ".." looked up by inode;
// directory link counts; ENODATA for an absent xattr; and every kind of lock answered,
// never hung, blocking ones granted once the holder lets go.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

// A file handle as name_to_handle_at gives it.
struct Handle {
  std::unique_ptr<file_handle, void (*)(void*)> fh{nullptr, std::free};
  std::string bytes() const {
    return std::string(reinterpret_cast<const char*>(fh->f_handle), fh->handle_bytes);
  }
};

Handle handle_of(const std::string& path) {
  Handle h;
  h.fh.reset(static_cast<file_handle*>(std::malloc(sizeof(file_handle) + MAX_HANDLE_SZ)));
  h.fh->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (name_to_handle_at(AT_FDCWD, path.c_str(), h.fh.get(), &mount_id, 0) != 0) {
    ADD_FAILURE() << "name_to_handle_at " << path << ": " << errno_name(errno);
    h.fh.reset();
  }
  return h;
}

// The kernel forgets every unused dentry and inode: the daemon gets FORGETs, and a handle
// must bring the inode back by asking the daemon (LOOKUP of ".").
void forget_inodes() {
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
}

class ExportTraps : public MountedTest {
 protected:
  std::string mount_options() const override { return "default_permissions"; }
  int open_by(const Handle& h, int flags) {
    Fd mount(::open(path().c_str(), O_RDONLY | O_DIRECTORY));
    return open_by_handle_at(mount.get(), h.fh.get(), flags);
  }
};

TEST_F(ExportTraps, HandlesWorkAfterTheKernelForgotTheInodeAndAfterARemount) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  ASSERT_SYS(mkdir(path("d/sub").c_str(), 0755));
  ASSERT_TRUE(write_file(path("d/f"), to_bytes("handle me")));
  ASSERT_SYS(symlink("f", path("d/link").c_str()));
  ASSERT_SYS(mkfifo(path("d/fifo").c_str(), 0644));
  ASSERT_SYS(mknod(path("d/null").c_str(), S_IFCHR | 0644, makedev(1, 3)));
  const Handle file = handle_of(path("d/f"));
  const Handle dir = handle_of(path("d/sub"));
  // Every other kind of node too (name_to_handle_at without AT_SYMLINK_FOLLOW: the link).
  struct Special {
    const char* name;
    mode_t type;
    Handle handle;
    ino_t ino;
  };
  std::vector<Special> specials;
  for (auto [name, type] :
       {std::pair{"d/link", S_IFLNK}, std::pair{"d/fifo", S_IFIFO}, std::pair{"d/null", S_IFCHR}}) {
    specials.push_back(
        {name, static_cast<mode_t>(type), handle_of(path(name)), lstat_of(path(name)).st_ino});
    ASSERT_TRUE(specials.back().handle.fh) << name;
  }
  ASSERT_TRUE(file.fh && dir.fh);
  const ino_t d_ino = stat_of(path("d")).st_ino;

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "after drop_caches" : "after a remount");
    if (round == 0) {
      forget_inodes();
    } else {
      const Status again = fs_.remount();
      ASSERT_TRUE(again) << again.error();
    }
    Fd f(open_by(file, O_RDONLY));
    ASSERT_TRUE(f.valid()) << "open_by_handle_at: " << errno_name(errno);
    EXPECT_TRUE(same_bytes(read_at(f.get(), 0, 64), to_bytes("handle me")));
    Fd sub(open_by(dir, O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(sub.valid()) << "open_by_handle_at (directory): " << errno_name(errno);
    // ".." of a directory brought back by its handle: the daemon answers LOOKUP(sub, "..").
    Fd parent(openat(sub.get(), "..", O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(parent.valid()) << errno_name(errno);
    EXPECT_EQ(fstat_of(parent.get()).st_ino, d_ino);
    for (const Special& special : specials) {
      Fd node(open_by(special.handle, O_PATH));
      ASSERT_TRUE(node.valid()) << "open_by_handle_at " << special.name << ": "
                                << errno_name(errno);
      const struct stat st = fstat_of(node.get());
      EXPECT_EQ(st.st_mode & S_IFMT, special.type) << special.name;
      EXPECT_EQ(st.st_ino, special.ino) << special.name;
    }
    char target[16] = {};
    Fd link(open_by(specials[0].handle, O_PATH));
    EXPECT_EQ(readlinkat(link.get(), "", target, sizeof target - 1), 1) << errno_name(errno);
    EXPECT_STREQ(target, "f");
  }
}

// A handle names an inode and its generation: once the file is gone it is stale, and so it
// stays when a new file takes the inode number (the generation differs). A freed inode is
// reused only once a checkpoint covers the free, which a remount makes certain: over
// several reuses of one slot no handle repeats.
TEST_F(ExportTraps, HandlesOfRemovedOrReusedInodesAreStaleAndNeverRepeat) {
  if (std::getenv("STRIPEFS_TEST_TARGET") != nullptr) GTEST_SKIP() << "needs the daemon";
  std::vector<Handle> handles;
  std::set<std::string> seen;
  std::set<ino_t> inos;
  for (int i = 0; i < 4; ++i) {
    const std::string name = path("n" + std::to_string(i));
    ASSERT_TRUE(write_file(name, to_bytes("n")));
    inos.insert(stat_of(name).st_ino);
    handles.push_back(handle_of(name));
    ASSERT_TRUE(handles.back().fh);
    EXPECT_TRUE(seen.insert(handles.back().bytes()).second) << "a handle came back for " << name;
    ASSERT_SYS(unlink(name.c_str()));
    forget_inodes();
    for (const Handle& h : handles) EXPECT_ERRNO(ESTALE, open_by(h, O_RDONLY));
    const Status again = fs_.remount();
    ASSERT_TRUE(again) << again.error();
    for (const Handle& h : handles) EXPECT_ERRNO(ESTALE, open_by(h, O_RDONLY));
  }
  EXPECT_EQ(inos.size(), 1u) << "the inode number was not reused: the test proves less";
}

// A directory's link count is 2 plus its subdirectories, through mkdir, rmdir and rename.
TEST_F(ExportTraps, DirectoryLinkCountsFollowTheirSubdirectories) {
  const nlink_t root = stat_of(path()).st_nlink;
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  ASSERT_SYS(mkdir(path("e").c_str(), 0755));
  EXPECT_EQ(stat_of(path()).st_nlink, root + 2);
  EXPECT_EQ(stat_of(path("d")).st_nlink, 2u);
  ASSERT_SYS(mkdir(path("d/a").c_str(), 0755));
  ASSERT_SYS(mkdir(path("d/b").c_str(), 0755));
  ASSERT_TRUE(write_file(path("d/file"), to_bytes("x")));
  EXPECT_EQ(stat_of(path("d")).st_nlink, 4u);
  ASSERT_SYS(rmdir(path("d/a").c_str()));
  EXPECT_EQ(stat_of(path("d")).st_nlink, 3u);
  ASSERT_SYS(rename(path("d/b").c_str(), path("e/b").c_str()));
  EXPECT_EQ(stat_of(path("d")).st_nlink, 2u);
  EXPECT_EQ(stat_of(path("e")).st_nlink, 3u);
  EXPECT_EQ(stat_of(path("e/b")).st_nlink, 2u);
  if (fs_.can_remount()) {
    const Status again = fs_.remount();
    ASSERT_TRUE(again) << again.error();
    EXPECT_EQ(stat_of(path("d")).st_nlink, 2u);
    EXPECT_EQ(stat_of(path("e")).st_nlink, 3u);
    EXPECT_EQ(stat_of(path()).st_nlink, root + 2);
  }
}

// Samba asks for xattrs that are often absent (DOS attributes, streams, NT ACLs): the
// answer must be ENODATA, for files, directories and symlinks, and a size query of one
// present gives its size.
TEST_F(ExportTraps, AnAbsentXattrIsEnodata) {
  ASSERT_TRUE(write_file(path("f"), to_bytes("x")));
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  ASSERT_SYS(symlink("f", path("l").c_str()));
  char value[64];
  for (const char* name : {"f", "d"}) {
    EXPECT_ERRNO(ENODATA, getxattr(path(name).c_str(), "user.DOSATTRIB", value, sizeof(value)));
    EXPECT_ERRNO(ENODATA, getxattr(path(name).c_str(), "user.DOSATTRIB", nullptr, 0));
    EXPECT_ERRNO(ENODATA, removexattr(path(name).c_str(), "user.DOSATTRIB"));
  }
  EXPECT_ERRNO(ENODATA, lgetxattr(path("l").c_str(), "trusted.x", value, sizeof(value)));
  ASSERT_SYS(setxattr(path("f").c_str(), "user.DOSATTRIB", "0x20", 4, 0));
  EXPECT_EQ(getxattr(path("f").c_str(), "user.DOSATTRIB", nullptr, 0), 4);
  EXPECT_ERRNO(ERANGE, getxattr(path("f").c_str(), "user.DOSATTRIB", value, 2));
}

// Every lock a file server takes is answered at once: flock (shared, exclusive, upgrade,
// non-blocking conflict), POSIX record locks (F_SETLK, F_GETLK, conflicts between
// processes) and open file description locks. None may hang (Samba waits on them).
TEST_F(ExportTraps, EveryKindOfLockIsAnsweredNeverHung) {
  ASSERT_TRUE(write_file(path("f"), Bytes(8192, 1)));
  auto answered = std::async(std::launch::async, [this] {
    Fd a = open_file(path("f"), O_RDWR);
    Fd b = open_file(path("f"), O_RDWR);
    EXPECT_SYS(flock(a.get(), LOCK_SH));
    EXPECT_SYS(flock(b.get(), LOCK_SH | LOCK_NB));
    EXPECT_ERRNO(EWOULDBLOCK, flock(b.get(), LOCK_EX | LOCK_NB));
    EXPECT_SYS(flock(a.get(), LOCK_UN));
    EXPECT_SYS(flock(b.get(), LOCK_EX | LOCK_NB));  // an upgrade
    EXPECT_ERRNO(EWOULDBLOCK, flock(a.get(), LOCK_SH | LOCK_NB));
    EXPECT_SYS(flock(b.get(), LOCK_UN));

    // Open file description locks conflict between descriptions, in one process.
    struct flock ofd {};
    ofd.l_type = F_WRLCK;
    ofd.l_start = 0;
    ofd.l_len = 4096;
    EXPECT_SYS(fcntl(a.get(), F_OFD_SETLK, &ofd));
    struct flock probe = ofd;
    EXPECT_SYS(fcntl(b.get(), F_OFD_GETLK, &probe));
    EXPECT_EQ(probe.l_type, F_WRLCK) << "the conflicting lock was not reported";
    EXPECT_ERRNO(EAGAIN, fcntl(b.get(), F_OFD_SETLK, &ofd));
    ofd.l_start = 4096;
    EXPECT_SYS(fcntl(b.get(), F_OFD_SETLK, &ofd));  // a disjoint range

    // POSIX record locks conflict between processes.
    struct flock rec {};
    rec.l_type = F_WRLCK;
    rec.l_whence = SEEK_SET;
    rec.l_start = 10000;  // clear of the description locks above (the two kinds conflict)
    rec.l_len = 10;
    Fd c = open_file(path("f"), O_RDWR);
    EXPECT_SYS(fcntl(c.get(), F_SETLK, &rec));
    const pid_t child = fork();
    if (child == 0) {
      const int fd = ::open(path("f").c_str(), O_RDWR);
      struct flock want = rec;
      const bool refused = fcntl(fd, F_SETLK, &want) == -1 && (errno == EAGAIN || errno == EACCES);
      struct flock ask = rec;
      const bool seen =
          fcntl(fd, F_GETLK, &ask) == 0 && ask.l_type == F_WRLCK && ask.l_pid == getppid();
      _exit(refused && seen ? 0 : 1);
    }
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "another process was not refused, or did not see the lock";
    rec.l_type = F_UNLCK;
    EXPECT_SYS(fcntl(c.get(), F_SETLK, &rec));
  });
  ASSERT_EQ(answered.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a lock request hung";
  answered.get();
}

// A lock request that must wait (Samba's blocking byte-range locks, Ganesha's NLM and
// NFSv4 blocking locks) waits while another holds the lock and is granted once it lets go:
// flock, an open file description lock and a POSIX record lock (another process).
TEST_F(ExportTraps, BlockingLocksWaitAndAreGrantedOnRelease) {
  ASSERT_TRUE(write_file(path("f"), Bytes(8192, 1)));
  auto answered = std::async(std::launch::async, [this] {
    Fd holder = open_file(path("f"), O_RDWR);
    Fd waiter = open_file(path("f"), O_RDWR);
    // A waiter that has been granted says so; it must not be before the release.
    const auto waits_then_gets = [&](auto lock, auto unlock, const char* what) {
      std::atomic<bool> granted{false};
      std::thread t([&] {
        if (lock() == 0) granted = true;
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_FALSE(granted.load()) << what << ": granted while another held it";
      EXPECT_SYS(unlock());
      t.join();
      EXPECT_TRUE(granted.load()) << what << ": not granted after the release";
    };
    EXPECT_SYS(flock(holder.get(), LOCK_EX));
    waits_then_gets([&] { return flock(waiter.get(), LOCK_EX); },
                    [&] { return flock(holder.get(), LOCK_UN); }, "flock");
    EXPECT_SYS(flock(waiter.get(), LOCK_UN));

    struct flock ofd {};
    ofd.l_type = F_WRLCK;
    ofd.l_len = 4096;
    EXPECT_SYS(fcntl(holder.get(), F_OFD_SETLK, &ofd));
    struct flock wanted = ofd;
    struct flock release = ofd;
    release.l_type = F_UNLCK;
    waits_then_gets([&] { return fcntl(waiter.get(), F_OFD_SETLKW, &wanted); },
                    [&] { return fcntl(holder.get(), F_OFD_SETLK, &release); }, "OFD lock");
    EXPECT_SYS(fcntl(waiter.get(), F_OFD_SETLK, &release));

    // POSIX record locks belong to processes: the waiter is a child, which reports through
    // its exit status whether it waited. It says through a pipe when it is about to ask;
    // the parent's release comes 200 ms after that, so a slow start cannot look like no wait.
    struct flock rec {};
    rec.l_type = F_WRLCK;
    rec.l_whence = SEEK_SET;
    rec.l_start = 10000;
    rec.l_len = 10;
    EXPECT_SYS(fcntl(holder.get(), F_SETLK, &rec));
    int ready[2];
    ASSERT_SYS(pipe(ready));
    const pid_t child = fork();
    if (child == 0) {
      const int fd = ::open(path("f").c_str(), O_RDWR);
      struct flock want = rec;
      const auto t0 = std::chrono::steady_clock::now();
      const bool told = ::write(ready[1], "x", 1) == 1;
      const bool got = fcntl(fd, F_SETLKW, &want) == 0;
      const bool waited = std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(100);
      _exit(told && got && waited ? 0 : 1);
    }
    ::close(ready[1]);
    char byte = 0;
    EXPECT_EQ(::read(ready[0], &byte, 1), 1) << "the child never got to its F_SETLKW";
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rec.l_type = F_UNLCK;
    EXPECT_SYS(fcntl(holder.get(), F_SETLK, &rec));
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "the other process's F_SETLKW did not wait for the lock, or was not granted it";
  });
  ASSERT_EQ(answered.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a blocking lock request hung after the release";
  answered.get();
}

}  // namespace
}  // namespace stripefs::test
