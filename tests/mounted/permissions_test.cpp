// Access control for an unprivileged user. The checks run in a forked child that drops to
// uid and gid 65534 (nobody); the mount uses default_permissions (the kernel enforces the
// mode bits) and allow_other (users other than the mounter may enter at all).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <initializer_list>

#include "mounted/child_checks.hpp"
#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class Permissions : public MountedTest {
 protected:
  std::string mount_options() const override { return "default_permissions,allow_other"; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
    MountedTest::SetUp();
  }

  // Runs body as nobody:nogroup without supplementary groups (child_checks.hpp).
  void as_nobody(const std::function<void(ChildChecks&)>& body) {
    run_in_child(path(), become_nobody, body);
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
