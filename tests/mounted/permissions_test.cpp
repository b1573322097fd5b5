// Access control for an unprivileged user. The checks run in a forked child that drops to
// uid and gid 65534 (nobody); the mount uses default_permissions (the kernel enforces the
// mode bits) and allow_other (users other than the mounter may enter at all).
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

// Failures found in the child, sent to the parent as text. No gtest in the child: its
// assertions would report into a copy of the parent's state that nobody reads.
class ChildChecks {
 public:
  void expect_errno(long result, int err, int expected, const char* what) {
    if (result == -1 && err == expected) return;
    failures_ += std::string(what) + ": " +
                 (result == -1 ? "failed with " + errno_name(err) : "succeeded") + ", expected " +
                 errno_name(expected) + "\n";
  }
  void expect_ok(long result, int err, const char* what) {
    if (result != -1) return;
    failures_ += std::string(what) + ": failed with " + errno_name(err) + "\n";
  }
  void expect(bool condition, const std::string& what) {
    if (!condition) failures_ += what + "\n";
  }
  const std::string& failures() const { return failures_; }

 private:
  std::string failures_;
};

#define CHILD_ERRNO(checks, expected, expr)                 \
  do {                                                      \
    errno = 0;                                              \
    const long result_ = static_cast<long>(expr);           \
    (checks).expect_errno(result_, errno, expected, #expr); \
  } while (0)
#define CHILD_OK(checks, expr)                    \
  do {                                            \
    errno = 0;                                    \
    const long result_ = static_cast<long>(expr); \
    (checks).expect_ok(result_, errno, #expr);    \
  } while (0)

class Permissions : public MountedTest {
 public:  // for the helpers that several fixtures' tests share
  using MountedTest::path;
  std::string mount_options() const override { return "default_permissions,allow_other"; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
    MountedTest::SetUp();
  }

  // Runs body as nobody:nogroup without supplementary groups; fails the test with whatever
  // the child reports.
  void as_nobody(const std::function<void(ChildChecks&)>& body) {
    in_child(body, [] {
      return setgroups(0, nullptr) == 0 && setgid(kNogroup) == 0 && setuid(kNobody) == 0;
    });
  }
  // Runs body as root without CAP_FSETID (and without CAP_DAC_OVERRIDE's help: files of
  // its own), which may keep no set-id bits on what it changes.
  void as_root_without_fsetid(const std::function<void(ChildChecks&)>& body) {
    in_child(body, [] {
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2]{};
      if (syscall(SYS_capget, &header, data) != 0) return false;
      data[CAP_FSETID / 32].effective &= ~(1u << (CAP_FSETID % 32));
      return syscall(SYS_capset, &header, data) == 0;
    });
  }
  // Runs body in a child once `become` has made it someone else (false: it could not).
  void in_child(const std::function<void(ChildChecks&)>& body, bool (*become)()) {
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
        if (stat(path().c_str(), &st) != 0) {
          checks.expect(false, "nobody cannot reach " + path() + ": " + errno_name(errno) +
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
    EXPECT_EQ(report, "") << "as uid " << kNobody << ":\n" << report;
  }

  void make_file(const std::string& rel, mode_t mode, const std::string& content = "secret") {
    ASSERT_TRUE(write_file(path(rel), to_bytes(content)));
    ASSERT_SYS(chmod(path(rel).c_str(), mode));
  }
  void remount() {
    if (!fs_.can_remount()) return;  // a target directory: its cache stays
    const Status done = fs_.remount();
    ASSERT_TRUE(done) << done.error();
  }
  void make_dir(const std::string& rel, mode_t mode) {
    ASSERT_SYS(mkdir(path(rel).c_str(), 0700));
    ASSERT_SYS(chmod(path(rel).c_str(), mode));
  }
};

TEST_F(Permissions, OwnerOnlyFileRefusesEveryoneElse) {
  ASSERT_NO_FATAL_FAILURE(make_file("private", 0600));
  const std::string file = path("private");
  as_nobody([&](ChildChecks& c) {
    CHILD_ERRNO(c, EACCES, open(file.c_str(), O_RDONLY));
    CHILD_ERRNO(c, EACCES, open(file.c_str(), O_WRONLY));
    CHILD_ERRNO(c, EACCES, open(file.c_str(), O_RDWR | O_TRUNC));
    CHILD_ERRNO(c, EACCES, truncate(file.c_str(), 0));
    CHILD_ERRNO(c, EPERM, chmod(file.c_str(), 0666));
    CHILD_ERRNO(c, EPERM, chown(file.c_str(), kNobody, kNogroup));
    const timespec times[2] = {{1, 0}, {1, 0}};
    CHILD_ERRNO(c, EPERM, utimensat(AT_FDCWD, file.c_str(), times, 0));
    CHILD_ERRNO(c, EACCES, utimensat(AT_FDCWD, file.c_str(), nullptr, 0));
    struct stat st {};
    CHILD_OK(c, stat(file.c_str(), &st));  // the directory is searchable
    c.expect(st.st_mode == (S_IFREG | 0600), "stat shows the mode to others too");
  });
  EXPECT_TRUE(same_bytes(read_file(file), to_bytes("secret"))) << "nothing changed";
  EXPECT_EQ(stat_of(file).st_mode, S_IFREG | 0600);
}

TEST_F(Permissions, ModeBitsGrantExactlyWhatTheySay) {
  ASSERT_NO_FATAL_FAILURE(make_file("readable", 0644, "public"));
  ASSERT_NO_FATAL_FAILURE(make_file("writable", 0666, "shared"));
  ASSERT_NO_FATAL_FAILURE(make_file("group", 0640, "group"));
  ASSERT_SYS(chown(path("group").c_str(), 0, kNogroup));
  // Only one class applies: nobody is in the group, so "other" read does not help.
  ASSERT_NO_FATAL_FAILURE(make_file("not-for-group", 0604));
  ASSERT_SYS(chown(path("not-for-group").c_str(), 0, kNogroup));

  const std::string readable = path("readable");
  const std::string writable = path("writable");
  const std::string group = path("group");
  const std::string not_for_group = path("not-for-group");
  as_nobody([&](ChildChecks& c) {
    const int fd = open(readable.c_str(), O_RDONLY);
    c.expect_ok(fd, errno, "open readable for reading");
    if (fd >= 0) {
      char buffer[16] = {};
      c.expect(read(fd, buffer, sizeof(buffer)) == 6 && std::string(buffer) == "public",
               "read what a 0644 file holds");
      ::close(fd);
    }
    CHILD_ERRNO(c, EACCES, open(readable.c_str(), O_WRONLY));

    const int wfd = open(writable.c_str(), O_WRONLY | O_APPEND);
    c.expect_ok(wfd, errno, "open writable for writing");
    if (wfd >= 0) {
      c.expect(write(wfd, "+", 1) == 1, "append to a 0666 file");
      ::close(wfd);
    }
    // Write permission is enough to set both times to now, but not to any other time.
    CHILD_OK(c, utimensat(AT_FDCWD, writable.c_str(), nullptr, 0));
    const timespec times[2] = {{1, 0}, {1, 0}};
    CHILD_ERRNO(c, EPERM, utimensat(AT_FDCWD, writable.c_str(), times, 0));

    const int gfd = open(group.c_str(), O_RDONLY);
    c.expect_ok(gfd, errno, "open a 0640 file of our group for reading");
    if (gfd >= 0) ::close(gfd);
    CHILD_ERRNO(c, EACCES, open(group.c_str(), O_WRONLY));
    CHILD_ERRNO(c, EACCES, open(not_for_group.c_str(), O_RDONLY));
  });
  EXPECT_TRUE(same_bytes(read_file(writable), to_bytes("shared+")));
}

TEST_F(Permissions, DirectoriesNeedWriteToChangeAndSearchToEnter) {
  ASSERT_NO_FATAL_FAILURE(make_dir("closed", 0755));
  ASSERT_NO_FATAL_FAILURE(make_file("closed/file", 0666));
  ASSERT_NO_FATAL_FAILURE(make_dir("open", 0777));
  ASSERT_NO_FATAL_FAILURE(make_dir("private", 0700));
  ASSERT_NO_FATAL_FAILURE(make_file("private/file", 0666));
  ASSERT_NO_FATAL_FAILURE(make_dir("search-only", 0711));
  ASSERT_NO_FATAL_FAILURE(make_file("search-only/known", 0644, "known"));

  const std::string root = path();
  as_nobody([&](ChildChecks& c) {
    const std::string closed = root + "/closed";
    CHILD_ERRNO(c, EACCES, open((closed + "/new").c_str(), O_WRONLY | O_CREAT, 0644));
    CHILD_ERRNO(c, EACCES, mkdir((closed + "/sub").c_str(), 0755));
    CHILD_ERRNO(c, EACCES, unlink((closed + "/file").c_str()));
    CHILD_ERRNO(c, EACCES, rename((closed + "/file").c_str(), (closed + "/moved").c_str()));
    CHILD_ERRNO(c, EACCES, symlink("x", (closed + "/link").c_str()));
    // The file's own mode still lets us write it.
    const int fd = open((closed + "/file").c_str(), O_WRONLY);
    c.expect_ok(fd, errno, "open a 0666 file in a 0755 directory");
    if (fd >= 0) ::close(fd);

    const std::string open_dir = root + "/open";
    const int created = open((open_dir + "/mine").c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    c.expect_ok(created, errno, "create in a 0777 directory");
    if (created >= 0) {
      c.expect(write(created, "mine", 4) == 4, "write our new file");
      struct stat st {};
      c.expect(fstat(created, &st) == 0 && st.st_uid == kNobody && st.st_gid == kNogroup,
               "a new file belongs to its creator");
      ::close(created);
    }
    CHILD_OK(c, mkdir((open_dir + "/subdir").c_str(), 0755));
    CHILD_OK(c, rename((open_dir + "/mine").c_str(), (open_dir + "/renamed").c_str()));

    struct stat st {};
    CHILD_ERRNO(c, EACCES, stat((root + "/private/file").c_str(), &st));
    CHILD_ERRNO(c, EACCES, open((root + "/private").c_str(), O_RDONLY | O_DIRECTORY));
    CHILD_OK(c, stat((root + "/search-only/known").c_str(), &st));
    CHILD_ERRNO(c, EACCES, open((root + "/search-only").c_str(), O_RDONLY | O_DIRECTORY));
  });
  EXPECT_TRUE(same_bytes(read_file(path("open/renamed")), to_bytes("mine")));
  EXPECT_EQ(stat_of(path("open/subdir")).st_uid, kNobody);
  EXPECT_EQ(list_dir(path("closed")).size(), 3u) << "., .. and file: nothing added";
}

// In a sticky directory only a file's owner (or the directory's, or root) may remove or
// rename it; Linux reports EPERM.
TEST_F(Permissions, StickyDirectoryProtectsOthersFiles) {
  ASSERT_NO_FATAL_FAILURE(make_dir("tmp", 01777));
  ASSERT_NO_FATAL_FAILURE(make_file("tmp/roots", 0666, "root's"));
  const std::string dir = path("tmp");
  as_nobody([&](ChildChecks& c) {
    const std::string roots = dir + "/roots";
    const int fd = open(roots.c_str(), O_WRONLY | O_APPEND);
    c.expect_ok(fd, errno, "write a 0666 file in a sticky directory");
    if (fd >= 0) ::close(fd);
    CHILD_ERRNO(c, EPERM, unlink(roots.c_str()));
    CHILD_ERRNO(c, EPERM, rename(roots.c_str(), (dir + "/taken").c_str()));

    const std::string mine = dir + "/mine";
    const int created = open(mine.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    c.expect_ok(created, errno, "create in a sticky directory");
    if (created >= 0) ::close(created);
    CHILD_ERRNO(c, EPERM, rename(mine.c_str(), roots.c_str()));  // would replace root's
    CHILD_OK(c, rename(mine.c_str(), (dir + "/mine2").c_str()));
    CHILD_OK(c, unlink((dir + "/mine2").c_str()));
  });
  EXPECT_TRUE(same_bytes(read_file(path("tmp/roots")), to_bytes("root's")));
  EXPECT_EQ(list_dir(path("tmp")).size(), 3u);
}

TEST_F(Permissions, OwnersMayChmodButNotGiveAway) {
  ASSERT_NO_FATAL_FAILURE(make_dir("open", 0777));
  const std::string file = path("open/mine");
  as_nobody([&](ChildChecks& c) {
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    c.expect_ok(fd, errno, "create");
    if (fd >= 0) ::close(fd);
    CHILD_OK(c, chmod(file.c_str(), 0600));
    CHILD_ERRNO(c, EPERM, chown(file.c_str(), 0, static_cast<gid_t>(-1)));
    CHILD_ERRNO(c, EPERM, chown(file.c_str(), static_cast<uid_t>(-1), 0));  // not our group
    CHILD_OK(c, chown(file.c_str(), kNobody, kNogroup));                    // no change is allowed
    // Setting set-group-ID on a file of a group we are not in is silently dropped; here we
    // are in the group, so it sticks.
    CHILD_OK(c, chmod(file.c_str(), 02700));
  });
  const struct stat st = stat_of(file);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_mode, S_IFREG | 02700);
}

// POSIX ACLs, enforced by the kernel (FUSE_CAP_POSIX_ACL) and kept in step with the mode by
// the daemon, as on ext4. The values are built here in the kernel's xattr form (what
// setfacl hands it), independently of the daemon's own code.
struct Entry {
  uint16_t tag, perm;
  uint32_t id;
};
constexpr uint16_t kUserObj = 1, kUser = 2, kGroupObj = 4, kMask = 0x10, kOther = 0x20;
constexpr uint32_t kNoId = 0xffffffff;

std::string acl(std::initializer_list<Entry> entries) {
  std::string s;
  auto put = [&s](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  for (const Entry& e : entries) {
    put(e.tag, 2);
    put(e.perm, 2);
    put(e.id, 4);
  }
  return s;
}

// u::rw-, u:nobody:r--, g::---, m::r--, o::---
std::string nobody_may_read() {
  return acl({{kUserObj, 6, kNoId},
              {kUser, 4, kNobody},
              {kGroupObj, 0, kNoId},
              {kMask, 4, kNoId},
              {kOther, 0, kNoId}});
}

// An attribute's value, or "" when there is none.
std::string xattr_of(const std::string& file, const char* name) {
  char value[256];
  const ssize_t n = getxattr(file.c_str(), name, value, sizeof(value));
  return n < 0 ? std::string() : std::string(value, static_cast<size_t>(n));
}

#define ASSERT_SET_ACL(file, name, value) \
  ASSERT_SYS(setxattr((file).c_str(), name, (value).data(), (value).size(), 0))

TEST_F(Permissions, AnAclEntryGrantsANamedUserWhatTheModeDoesNot) {
  ASSERT_NO_FATAL_FAILURE(make_file("private", 0600));
  const std::string file = path("private");
  const std::string value = nobody_may_read();
  ASSERT_SET_ACL(file, "system.posix_acl_access", value);
  EXPECT_EQ(stat_of(file).st_mode, S_IFREG | 0640) << "the mask shows as the group bits";
  as_nobody([&](ChildChecks& c) {
    const int fd = open(file.c_str(), O_RDONLY);
    c.expect_ok(fd, errno, "open for reading, granted by u:nobody:r");
    if (fd >= 0) ::close(fd);
    CHILD_ERRNO(c, EACCES, open(file.c_str(), O_WRONLY));
  });
  // chmod moves the mask: g::--- now takes the named entry's read away too.
  ASSERT_SYS(chmod(file.c_str(), 0600));
  as_nobody([&](ChildChecks& c) { CHILD_ERRNO(c, EACCES, open(file.c_str(), O_RDONLY)); });
  EXPECT_EQ(xattr_of(file, "system.posix_acl_access"), acl({{kUserObj, 6, kNoId},
                                                            {kUser, 4, kNobody},
                                                            {kGroupObj, 0, kNoId},
                                                            {kMask, 0, kNoId},
                                                            {kOther, 0, kNoId}}));
  // Across a remount, and with the kernel's cache gone, it holds.
  ASSERT_NO_FATAL_FAILURE(remount());
  ASSERT_SYS(chmod(file.c_str(), 0640));
  as_nobody([&](ChildChecks& c) {
    const int fd = open(file.c_str(), O_RDONLY);
    c.expect_ok(fd, errno, "open for reading after a remount and chmod g+r");
    if (fd >= 0) ::close(fd);
  });
}

TEST_F(Permissions, ADefaultAclIsInheritedInsteadOfTheUmask) {
  ASSERT_NO_FATAL_FAILURE(make_dir("shared", 0755));
  const std::string dir = path("shared");
  // d:u::rwx, d:u:nobody:rwx, d:g::r-x, d:m::rwx, d:o::r-x
  const std::string def = acl({{kUserObj, 7, kNoId},
                               {kUser, 7, kNobody},
                               {kGroupObj, 5, kNoId},
                               {kMask, 7, kNoId},
                               {kOther, 5, kNoId}});
  ASSERT_SET_ACL(dir, "system.posix_acl_default", def);
  const mode_t old_umask = umask(077);
  const int fd = open((dir + "/report").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
  const int made = mkdir((dir + "/sub").c_str(), 0777);
  const int made_errno = errno;
  umask(old_umask);
  ASSERT_GE(fd, 0) << errno_name(errno);
  ::close(fd);
  ASSERT_EQ(made, 0) << errno_name(made_errno);
  EXPECT_EQ(stat_of(dir + "/report").st_mode, S_IFREG | 0664) << "the umask is not applied";
  EXPECT_EQ(stat_of(dir + "/sub").st_mode, S_IFDIR | 0775);
  EXPECT_EQ(xattr_of(dir + "/sub", "system.posix_acl_default"), def)
      << "a subdirectory inherits the default";
  const std::string report = dir + "/report";
  const std::string nested = dir + "/sub/nested";
  as_nobody([&](ChildChecks& c) {
    const int w = open(report.c_str(), O_WRONLY);
    c.expect_ok(w, errno, "write root's file, granted by the inherited u:nobody entry");
    if (w >= 0) ::close(w);
    const int created = open(nested.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    c.expect_ok(created, errno, "create in a subdirectory that inherited the default ACL");
    if (created >= 0) ::close(created);
  });
  EXPECT_EQ(stat_of(nested).st_uid, kNobody);
}

TEST_F(Permissions, WithoutADefaultAclTheUmaskStillApplies) {
  ASSERT_NO_FATAL_FAILURE(make_dir("plain", 0755));
  const mode_t old_umask = umask(027);
  const int fd = open(path("plain/f").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
  const int made = mkdir(path("plain/d").c_str(), 0777);
  const int fifo = mknod(path("plain/p").c_str(), S_IFIFO | 0666, 0);
  umask(old_umask);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(made, 0);
  ASSERT_EQ(fifo, 0);
  EXPECT_EQ(stat_of(path("plain/f")).st_mode, S_IFREG | 0640);
  EXPECT_EQ(stat_of(path("plain/d")).st_mode, S_IFDIR | 0750);
  EXPECT_EQ(stat_of(path("plain/p")).st_mode, S_IFIFO | 0640);
}

// File capabilities as setcap(8) writes them (struct vfs_cap_data, revision 2): CAP_NET_RAW
// permitted.
std::string file_caps() {
  const uint32_t words[5] = {0x02000000u, 1u << 13, 0, 0, 0};
  return std::string(reinterpret_cast<const char*>(words), sizeof(words));
}

// As on a local filesystem (Filesystem::kill_privs; the kernel's rules without killpriv v2):
// a write (buffered or direct), truncate or fallocate by someone without CAP_FSETID (nobody, root
// without it) clears set-user-ID and set-group-ID; root's keep them; a chown clears them; and every
// write, truncate and chown removes the file's capabilities. All of it survives a remount.
void check_changes_take_privs_away(Permissions& t) {
  for (const char* name :
       {"write", "direct", "truncate", "fallocate", "root", "root-nofsetid", "chown"}) {
    ASSERT_NO_FATAL_FAILURE(t.make_file(name, 06777));
  }
  const std::string caps = file_caps();
  for (const char* name : {"cap-write", "cap-truncate", "cap-chown"}) {
    ASSERT_NO_FATAL_FAILURE(t.make_file(name, 0755));
    ASSERT_SYS(setxattr(t.path(name).c_str(), "security.capability", caps.data(), caps.size(), 0));
  }
  t.as_nobody([&](ChildChecks& c) {
    int fd = open(t.path("write").c_str(), O_WRONLY);
    CHILD_OK(c, fd);
    CHILD_OK(c, pwrite(fd, "x", 1, 0));
    close(fd);
    void* block = nullptr;
    CHILD_OK(c, posix_memalign(&block, 4096, 4096) == 0 ? 0 : -1);
    std::memset(block, 'd', 4096);
    fd = open(t.path("direct").c_str(), O_WRONLY | O_DIRECT);
    CHILD_OK(c, fd);
    CHILD_OK(c, pwrite(fd, block, 4096, 0));
    close(fd);
    std::free(block);
    CHILD_OK(c, truncate(t.path("truncate").c_str(), 1));
    fd = open(t.path("fallocate").c_str(), O_WRONLY);
    CHILD_OK(c, fd);
    CHILD_OK(c, fallocate(fd, 0, 0, 8192));
    close(fd);
  });
  t.as_root_without_fsetid([&](ChildChecks& c) {
    const int fd = open(t.path("root-nofsetid").c_str(), O_WRONLY);
    CHILD_OK(c, fd);
    CHILD_OK(c, pwrite(fd, "x", 1, 0));
    close(fd);
  });
  ASSERT_TRUE(write_file(t.path("root"), to_bytes("root's")));
  ASSERT_SYS(chown(t.path("chown").c_str(), kNobody, kNogroup));
  ASSERT_TRUE(write_file(t.path("cap-write"), to_bytes("new")));
  ASSERT_SYS(truncate(t.path("cap-truncate").c_str(), 1));
  ASSERT_SYS(chown(t.path("cap-chown").c_str(), kNobody, kNogroup));
  for (int round = 0; round < 2; ++round) {
    const char* when = round == 0 ? "mounted" : "after a remount";
    for (const char* name :
         {"write", "direct", "truncate", "fallocate", "root-nofsetid", "chown"}) {
      EXPECT_EQ(stat_of(t.path(name)).st_mode, S_IFREG | 0777) << name << ", " << when;
    }
    EXPECT_EQ(stat_of(t.path("root")).st_mode, S_IFREG | 06777) << "root's write, " << when;
    for (const char* name : {"cap-write", "cap-truncate", "cap-chown"}) {
      char value[64];
      errno = 0;
      const ssize_t got =
          getxattr(t.path(name).c_str(), "security.capability", value, sizeof(value));
      EXPECT_TRUE(got == -1 && errno == ENODATA)
          << name << ", " << when << ": capabilities still there (" << got << ", "
          << errno_name(errno) << ")";
      EXPECT_EQ(stat_of(t.path(name)).st_mode, S_IFREG | 0755) << name << ", " << when;
    }
    ASSERT_NO_FATAL_FAILURE(t.remount());
  }
}

TEST_F(Permissions, ChangesTakeSetIdBitsAndCapabilitiesAway) {
  check_changes_take_privs_away(*this);
}

// The same with the kernel doing it (killpriv=v1): the two must not differ.
class PermissionsKillprivV1 : public Permissions {
 protected:
  std::string mount_options() const override {
    return "default_permissions,allow_other,killpriv=v1";
  }
};

TEST_F(PermissionsKillprivV1, ChangesTakeSetIdBitsAndCapabilitiesAway) {
  check_changes_take_privs_away(*this);
}

class PermissionsNoAcl : public Permissions {
 protected:
  std::string mount_options() const override { return "default_permissions,allow_other,noacl"; }
};

TEST_F(PermissionsNoAcl, AclsAreStoredButNotEnforced) {
  ASSERT_NO_FATAL_FAILURE(make_file("private", 0600));
  const std::string file = path("private");
  const std::string value = nobody_may_read();
  ASSERT_SET_ACL(file, "system.posix_acl_access", value);
  EXPECT_EQ(stat_of(file).st_mode, S_IFREG | 0600);
  as_nobody([&](ChildChecks& c) { CHILD_ERRNO(c, EACCES, open(file.c_str(), O_RDONLY)); });
}

}  // namespace
}  // namespace stripefs::test
