// Extended attributes: the user.* namespace and its flags, sizes and errors.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class Xattr : public MountedTest {
 protected:
  void SetUp() override {
    MountedTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(write_file(path("file"), to_bytes("data")));
    file_ = path("file");
  }

  // Our names on p (a filesystem may add others, e.g. security.*).
  std::set<std::string> names(const std::string& p) {
    const ssize_t size = listxattr(p.c_str(), nullptr, 0);
    if (size < 0) {
      ADD_FAILURE() << "listxattr size of " << p << ": " << errno_name(errno);
      return {};
    }
    std::string buffer(static_cast<size_t>(size), '\0');
    const ssize_t got = listxattr(p.c_str(), buffer.data(), buffer.size());
    if (got != size) {
      ADD_FAILURE() << "listxattr " << p << " returned " << got << ", size query said " << size;
      return {};
    }
    std::set<std::string> out;
    for (size_t at = 0; at < buffer.size();) {
      const std::string name(buffer.c_str() + at);
      if (name.starts_with("user.")) out.insert(name);
      at += name.size() + 1;
    }
    return out;
  }

  std::string get(const std::string& p, const std::string& name) {
    const ssize_t size = getxattr(p.c_str(), name.c_str(), nullptr, 0);
    if (size < 0) {
      ADD_FAILURE() << "getxattr size of " << name << ": " << errno_name(errno);
      return {};
    }
    std::string value(static_cast<size_t>(size), '\0');
    const ssize_t got = getxattr(p.c_str(), name.c_str(), value.data(), value.size());
    if (got != size) ADD_FAILURE() << "getxattr " << name << " returned " << got;
    return value;
  }

  std::string file_;
};

int set(const std::string& p, const std::string& name, const std::string& value, int flags = 0) {
  return setxattr(p.c_str(), name.c_str(), value.data(), value.size(), flags);
}

TEST_F(Xattr, SetGetListRemove) {
  ASSERT_SYS(set(file_, "user.greeting", "hello"));
  EXPECT_EQ(getxattr(file_.c_str(), "user.greeting", nullptr, 0), 5) << "the size query";
  EXPECT_EQ(get(file_, "user.greeting"), "hello");
  char small[2];
  EXPECT_ERRNO(ERANGE, getxattr(file_.c_str(), "user.greeting", small, sizeof(small)));

  ASSERT_SYS(set(file_, "user.empty", ""));
  EXPECT_EQ(getxattr(file_.c_str(), "user.empty", nullptr, 0), 0);
  EXPECT_EQ(names(file_), (std::set<std::string>{"user.greeting", "user.empty"}));

  ASSERT_SYS(removexattr(file_.c_str(), "user.greeting"));
  EXPECT_ERRNO(ENODATA, getxattr(file_.c_str(), "user.greeting", nullptr, 0));
  EXPECT_ERRNO(ENODATA, removexattr(file_.c_str(), "user.greeting"));
  EXPECT_ERRNO(ENODATA, getxattr(file_.c_str(), "user.never", nullptr, 0));
  EXPECT_EQ(names(file_), (std::set<std::string>{"user.empty"}));
  EXPECT_TRUE(same_bytes(read_file(file_), to_bytes("data"))) << "the data is untouched";
}

TEST_F(Xattr, CreateAndReplaceFlags) {
  ASSERT_SYS(set(file_, "user.a", "one", XATTR_CREATE));
  EXPECT_ERRNO(EEXIST, set(file_, "user.a", "two", XATTR_CREATE));
  EXPECT_EQ(get(file_, "user.a"), "one");
  EXPECT_ERRNO(ENODATA, set(file_, "user.b", "two", XATTR_REPLACE));
  EXPECT_ERRNO(ENODATA, getxattr(file_.c_str(), "user.b", nullptr, 0));
  ASSERT_SYS(set(file_, "user.a", "three", XATTR_REPLACE));
  EXPECT_EQ(get(file_, "user.a"), "three");
  ASSERT_SYS(set(file_, "user.a", "four"));
  EXPECT_EQ(get(file_, "user.a"), "four");
}

TEST_F(Xattr, LargeBinaryValuesRoundTrip) {
  const Bytes random = random_bytes(3 * 1024, 3);
  const std::string big(random.begin(), random.end());  // with NULs and every byte value
  ASSERT_SYS(set(file_, "user.big", big));
  EXPECT_EQ(getxattr(file_.c_str(), "user.big", nullptr, 0), static_cast<ssize_t>(big.size()));
  EXPECT_EQ(get(file_, "user.big"), big);
  ASSERT_SYS(set(file_, "user.big", "small now"));
  EXPECT_EQ(get(file_, "user.big"), "small now");
  ASSERT_SYS(set(file_, "user.big", big));
  EXPECT_EQ(get(file_, "user.big"), big);

  // The kernel's own limits.
  EXPECT_ERRNO(ERANGE, set(file_, "user." + std::string(256, 'n'), "x"));
  EXPECT_ERRNO(E2BIG, set(file_, "user.huge", std::string(65537, 'v')));
}

// Values up to the kernel's 64 KiB, and many of them on one inode (Samba keeps alternate
// data streams and NT ACLs in xattrs): they survive a remount, shrink back, and a file
// holding them gives its space back when it goes.
TEST_F(Xattr, ValuesUpTo64KiBAndManyPerInodeSurviveARemount) {
  std::map<std::string, std::string> want;
  for (const size_t size : {size_t{65536}, size_t{40000}, size_t{5000}, size_t{4100}}) {
    const Bytes random = random_bytes(size, size);
    want["user.v" + std::to_string(size)] = std::string(random.begin(), random.end());
  }
  for (int i = 0; i < 40; ++i)
    want["user.small" + std::to_string(i)] = std::string(300, 'a' + i % 26);
  for (const auto& [name, value] : want) ASSERT_SYS(set(file_, name, value));
  for (const auto& [name, value] : want) EXPECT_EQ(get(file_, name), value) << name;
  if (fs_.can_remount()) {
    const Status again = fs_.remount();
    ASSERT_TRUE(again) << again.error();
    for (const auto& [name, value] : want) EXPECT_EQ(get(file_, name), value) << name;
    std::set<std::string> listed;
    for (const auto& [name, value] : want) listed.insert(name);
    EXPECT_EQ(names(file_), listed);
  }
  // Back to what fits one block.
  for (const auto& [name, value] : want) {
    if (name != "user.small0") ASSERT_SYS(removexattr(file_.c_str(), name.c_str()));
  }
  EXPECT_EQ(get(file_, "user.small0"), want["user.small0"]);
  EXPECT_EQ(names(file_), std::set<std::string>{"user.small0"});
  // A directory's too, and the space comes back when the file goes.
  struct statvfs before {};
  ASSERT_SYS(statvfs(path().c_str(), &before));
  ASSERT_TRUE(write_file(path("g"), to_bytes("g")));
  ASSERT_SYS(set(path("g"), "user.big", want["user.v65536"]));
  ASSERT_SYS(unlink(path("g").c_str()));
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  ASSERT_SYS(set(path("d"), "user.big", want["user.v65536"]));
  EXPECT_EQ(get(path("d"), "user.big"), want["user.v65536"]);
  ASSERT_SYS(rmdir(path("d").c_str()));
  ::sync();
  struct statvfs after {};
  ASSERT_SYS(statvfs(path().c_str(), &after));
  EXPECT_GE(after.f_bfree + 8, before.f_bfree) << "blocks of removed xattrs were not freed";
}

TEST_F(Xattr, ManyNamesAreListed) {
  std::set<std::string> want;
  for (int i = 0; i < 32; ++i) {
    const std::string name = "user.attr" + std::to_string(i);
    ASSERT_SYS(set(file_, name, "value-" + std::to_string(i)));
    want.insert(name);
  }
  EXPECT_EQ(names(file_), want);
  for (int i = 0; i < 32; i += 2) {
    const std::string name = "user.attr" + std::to_string(i);
    ASSERT_SYS(removexattr(file_.c_str(), name.c_str()));
    want.erase(name);
  }
  EXPECT_EQ(names(file_), want);
  for (int i = 1; i < 32; i += 2) {
    EXPECT_EQ(get(file_, "user.attr" + std::to_string(i)), "value-" + std::to_string(i));
  }
}

TEST_F(Xattr, DirectoriesHaveThemAndSymlinksRefuseUserNames) {
  ASSERT_SYS(mkdir(path("dir").c_str(), 0755));
  ASSERT_SYS(set(path("dir"), "user.on-dir", "yes"));
  EXPECT_EQ(get(path("dir"), "user.on-dir"), "yes");

  // Linux keeps user.* to regular files and directories.
  ASSERT_SYS(symlink("file", path("link").c_str()));
  EXPECT_ERRNO(EPERM, lsetxattr(path("link").c_str(), "user.x", "v", 1, 0));
  // Through the link, the target's.
  ASSERT_SYS(set(path("link"), "user.via-link", "target"));
  EXPECT_EQ(get(file_, "user.via-link"), "target");
}

TEST_F(Xattr, ChangesUpdateTheChangeTime) {
  const struct stat before = stat_of(file_);
  let_clock_tick();
  ASSERT_SYS(set(file_, "user.t", "v"));
  struct stat after = stat_of(file_);
  EXPECT_GT(nanoseconds(after.st_ctim), nanoseconds(before.st_ctim));
  EXPECT_EQ(nanoseconds(after.st_mtim), nanoseconds(before.st_mtim));
  let_clock_tick();
  ASSERT_SYS(removexattr(file_.c_str(), "user.t"));
  EXPECT_GT(nanoseconds(stat_of(file_).st_ctim), nanoseconds(after.st_ctim));
}

}  // namespace
}  // namespace stripefs::test
