// acl_ops: with POSIX ACLs on, the core keeps the mode and the ACLs in step as ext4 does —
// inheritance of a default ACL (and the umask without one), chmod rewriting the access ACL,
// setfacl rewriting the mode, set-group-ID dropped for a caller outside the group — and all
// of it survives a remount.
#include <sys/xattr.h>

#include "fs/core/posix_acl.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::AclEntry;
using fs::kRootInode;
using fs::PosixAcl;
constexpr uint32_t kNone = PosixAcl::kUndefinedId;

std::string acl_of(std::vector<AclEntry> entries) {
  std::string s = PosixAcl::from_mode(0).encode().substr(0, 4);  // the version
  for (const AclEntry& e : entries) {
    for (uint64_t v : {uint64_t{e.tag} | uint64_t{e.perm} << 16 | uint64_t{e.id} << 32}) {
      for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
  }
  return s;
}

// u::rwx, u:1000:rwx, g::r-x, m::rwx, o::---
std::string named_default() {
  return acl_of({{fs::kAclUserObj, 7, kNone},
                 {fs::kAclUser, 7, 1000},
                 {fs::kAclGroupObj, 5, kNone},
                 {fs::kAclMask, 7, kNone},
                 {fs::kAclOther, 0, kNone}});
}

struct AclFs : MemoryFs {
  AclFs() { fs->enable_posix_acls(); }
  void remount_with_acls() {
    remount();
    fs->enable_posix_acls();
  }
  uint32_t mode(uint64_t ino) { return fs->getattr(ino)->mode; }
};

TEST(AclOps, WithoutADefaultACLTheUmaskApplies) {
  AclFs t;
  fs::Caller user{1000, 1000, 022};
  auto f = t.fs->mknod(kRootInode, "f", S_IFREG | 0666, 0, user);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->mode, uint32_t{S_IFREG | 0644});
  auto d = t.fs->mknod(kRootInode, "d", S_IFDIR | 0777, 0, user);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->mode, uint32_t{S_IFDIR | 0755});
  EXPECT_EQ(t.fs->getxattr(f->ino, fs::kAclAccessName).error().code, ENODATA);
}

TEST(AclOps, ANewNodeInheritsTheDefaultACLAndIgnoresTheUmask) {
  AclFs t;
  const uint64_t dir = t.create(kRootInode, "shared", S_IFDIR | 0755);
  ASSERT_TRUE(t.fs->setxattr(dir, fs::kAclDefaultName, named_default(), 0));
  fs::Caller user{1000, 1000, 077};
  auto f = t.fs->mknod(dir, "f", S_IFREG | 0666, 0, user);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->mode, uint32_t{S_IFREG | 0660}) << "group bits from the inherited mask";
  auto access = t.fs->getxattr(f->ino, fs::kAclAccessName);
  ASSERT_TRUE(access) << access.error().message;
  EXPECT_EQ(*access, acl_of({{fs::kAclUserObj, 6, kNone},
                             {fs::kAclUser, 7, 1000},
                             {fs::kAclGroupObj, 5, kNone},
                             {fs::kAclMask, 6, kNone},
                             {fs::kAclOther, 0, kNone}}));
  EXPECT_EQ(t.fs->getxattr(f->ino, fs::kAclDefaultName).error().code, ENODATA)
      << "only directories take the default along";
  auto sub = t.fs->mknod(dir, "sub", S_IFDIR | 0777, 0, user);
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->mode, uint32_t{S_IFDIR | 0770});
  EXPECT_EQ(*t.fs->getxattr(sub->ino, fs::kAclDefaultName), named_default());
  auto link = t.fs->symlink(dir, "l", "f", user);
  ASSERT_TRUE(link);
  EXPECT_EQ(link->mode, uint32_t{S_IFLNK | 0777});
  t.remount_with_acls();
  EXPECT_EQ(t.mode(f->ino), uint32_t{S_IFREG | 0660});
  EXPECT_TRUE(t.fs->getxattr(f->ino, fs::kAclAccessName));
  EXPECT_EQ(*t.fs->getxattr(sub->ino, fs::kAclDefaultName), named_default());
}

TEST(AclOps, ChmodRewritesTheAccessACLsMask) {
  AclFs t;
  const uint64_t f = t.create(kRootInode, "f", S_IFREG | 0640);
  const std::string acl = acl_of({{fs::kAclUserObj, 6, kNone},
                                  {fs::kAclUser, 6, 1000},
                                  {fs::kAclGroupObj, 4, kNone},
                                  {fs::kAclMask, 6, kNone},
                                  {fs::kAclOther, 0, kNone}});
  ASSERT_TRUE(t.fs->setxattr(f, fs::kAclAccessName, acl, 0));
  EXPECT_EQ(t.mode(f), uint32_t{S_IFREG | 0660}) << "the mode's group bits are the mask";
  fs::SetAttr chmod;
  chmod.mode = 0604;
  ASSERT_TRUE(t.fs->setattr(f, chmod));
  auto after = PosixAcl::decode(*t.fs->getxattr(f, fs::kAclAccessName));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->entries()[3], (AclEntry{fs::kAclMask, 0, kNone}));
  EXPECT_EQ(after->entries()[2].perm, 4) << "the owning group's entry is not the mask";
  EXPECT_EQ(after->mode_bits(), 0604u);
}

TEST(AclOps, AnACLTheModeSaysInFullIsNotStoredAndSetgidGoesForAnOutsider) {
  AclFs t;
  const uint64_t f = t.create(kRootInode, "f", S_IFREG | S_ISGID | 0640);
  const std::string plain = acl_of(
      {{fs::kAclUserObj, 7, kNone}, {fs::kAclGroupObj, 5, kNone}, {fs::kAclOther, 1, kNone}});
  auto outsider = [](uint32_t) { return false; };
  ASSERT_TRUE(t.fs->setxattr(f, fs::kAclAccessName, plain, 0, outsider));
  EXPECT_EQ(t.mode(f), uint32_t{S_IFREG | 0751}) << "set-group-ID dropped";
  EXPECT_EQ(t.fs->getxattr(f, fs::kAclAccessName).error().code, ENODATA);
  // A bad value changes nothing; a default ACL on a file is refused.
  EXPECT_EQ(t.fs->setxattr(f, fs::kAclAccessName, "junk", 0).error().code, EINVAL);
  EXPECT_EQ(t.fs->setxattr(f, fs::kAclDefaultName, plain, 0).error().code, EACCES);
  EXPECT_EQ(t.mode(f), uint32_t{S_IFREG | 0751});
}

TEST(AclOps, WithoutACLsOnTheValuesAreKeptAsTheyCome) {
  MemoryFs t;  // noacl: the kernel applied the umask, and enforces nothing
  const uint64_t f = t.create(kRootInode, "f", S_IFREG | 0640);
  const std::string plain = acl_of(
      {{fs::kAclUserObj, 7, kNone}, {fs::kAclGroupObj, 5, kNone}, {fs::kAclOther, 1, kNone}});
  ASSERT_TRUE(t.fs->setxattr(f, fs::kAclAccessName, plain, 0));
  EXPECT_EQ(*t.fs->getxattr(f, fs::kAclAccessName), plain);
  EXPECT_EQ(t.fs->getattr(f)->mode, uint32_t{S_IFREG | 0640});
}

}  // namespace
}  // namespace stripefs::test
