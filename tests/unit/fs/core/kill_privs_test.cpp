// Filesystem::kill_privs and a write's KillPrivs: the set-id rules of setattr_should_drop_suidgid
// (Linux 6.2 and later), the capabilities removed (other attributes kept, a capability set
// again found again), and all of it committed.
#include <sys/stat.h>

#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::kRootInode;

struct PrivsFs : MemoryFs {
  uint32_t mode(uint64_t ino) { return fs->getattr(ino)->mode & 07777; }
  uint64_t file(std::string_view name, uint32_t mode) {
    const uint64_t ino = create(kRootInode, name, S_IFREG | 0644);
    fs::SetAttr change;
    change.mode = mode;
    EXPECT_TRUE(fs->setattr(ino, change));
    return ino;
  }
  bool has_caps(uint64_t ino) { return fs->getxattr(ino, fs::kFcapsName).has_value(); }
};

fs::KillPrivs by(uint32_t uid, uint32_t gid, bool in_other_group = false) {
  fs::KillPrivs k;
  k.suid_sgid = true;
  k.who = {uid, gid};
  k.in_group = [in_other_group](uint32_t) { return in_other_group; };
  return k;
}

TEST(KillPrivs, SetIdBitsGoAsOnALocalFilesystem) {
  PrivsFs t;
  struct Case {
    uint32_t mode;
    fs::KillPrivs who;
    uint32_t after;
    const char* why;
  };
  const Case cases[] = {
      {06755, by(1000, 1000), 0755, "set-user-ID always; set-group-ID with group execute"},
      {06755, by(1000, 0), 0755, "group execute: even for a member of the file's group"},
      {02644, by(1000, 1000), 0644, "no group execute, not in the file's group"},
      {02644, by(1000, 0), 02644, "no group execute, the file's group is the caller's"},
      {02644, by(1000, 1000, true), 02644, "no group execute, one of the caller's groups"},
      {04644, by(1000, 0), 0644, "set-user-ID alone"},
      {0755, by(1000, 1000), 0755, "nothing to take"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const uint64_t ino = t.file("f" + std::to_string(n++), c.mode);
    fs::KillPrivs k = c.who;
    ASSERT_TRUE(t.fs->kill_privs(ino, k));
    EXPECT_EQ(t.mode(ino), c.after) << std::oct << c.mode << ": " << c.why;
    EXPECT_EQ(k.killed, c.after != c.mode) << c.why;
  }
  // Not asked to: a caller with CAP_FSETID.
  const uint64_t kept = t.file("kept", 06755);
  fs::KillPrivs none;
  ASSERT_TRUE(t.fs->kill_privs(kept, none));
  EXPECT_EQ(t.mode(kept), 06755u);
  EXPECT_FALSE(none.killed);
  // A directory keeps its set-group-ID (new entries inherit the group).
  auto dir = t.fs->mknod(kRootInode, "d", S_IFDIR | 02775, 0, t.root);
  ASSERT_TRUE(dir);
  fs::KillPrivs k = by(1000, 1000);
  ASSERT_TRUE(t.fs->kill_privs(dir->ino, k));
  EXPECT_EQ(t.mode(dir->ino), 02775u);
  t.remount();
  EXPECT_EQ(t.mode(kept), 06755u);
  EXPECT_EQ(t.mode(t.fs->lookup(kRootInode, "f0")->ino), 0755u) << "committed";
}

TEST(KillPrivs, AWriteRemovesCapabilitiesAndTheInodeRemembersHavingNone) {
  PrivsFs t;
  const uint64_t ino = t.file("f", 0755);
  ASSERT_TRUE(t.fs->setxattr(ino, "user.keep", "v", 0));
  ASSERT_TRUE(t.fs->setxattr(ino, fs::kFcapsName, "caps", 0));
  const std::vector<std::byte> data(4096, std::byte{1});
  fs::KillPrivs k;
  k.caps = true;
  auto copy = [&](std::span<std::byte> dest) -> Result<void> {
    std::memcpy(dest.data(), data.data(), dest.size());
    return {};
  };
  ASSERT_TRUE(t.fs->write(ino, 0, data.size(), copy, &k));
  EXPECT_TRUE(k.killed);
  EXPECT_FALSE(t.has_caps(ino));
  EXPECT_TRUE(t.fs->getxattr(ino, "user.keep")) << "other attributes stay";
  fs::KillPrivs again;
  again.caps = true;
  ASSERT_TRUE(t.fs->write(ino, 0, data.size(), copy, &again));
  EXPECT_FALSE(again.killed) << "nothing left to take";
  // Set again, the next change finds them.
  ASSERT_TRUE(t.fs->setxattr(ino, fs::kFcapsName, "caps", 0));
  fs::KillPrivs after_set;
  after_set.caps = true;
  ASSERT_TRUE(t.fs->kill_privs(ino, after_set));
  EXPECT_TRUE(after_set.killed);
  EXPECT_FALSE(t.has_caps(ino));
  t.remount();
  EXPECT_FALSE(t.has_caps(ino)) << "committed";
  EXPECT_TRUE(t.fs->getxattr(ino, "user.keep"));
  // A file with no attributes at all has nothing to read.
  const uint64_t bare = t.file("bare", 0755);
  fs::KillPrivs k2;
  k2.caps = true;
  ASSERT_TRUE(t.fs->kill_privs(bare, k2));
  EXPECT_FALSE(k2.killed);
}

// Where the caller's capabilities must be read (a fallocate, a chown), they are read only
// for a file with set-id bits.
TEST(KillPrivs, TheCallersCapabilitiesAreAskedForOnlyWhenTheyMatter) {
  PrivsFs t;
  int asked = 0;
  auto lacking = [&] {
    fs::KillPrivs k;
    k.who = {1000, 1000};
    k.lacks_fsetid = [&asked] {
      ++asked;
      return true;
    };
    return k;
  };
  const uint64_t plain = t.file("plain", 0755);
  fs::KillPrivs k = lacking();
  ASSERT_TRUE(t.fs->kill_privs(plain, k));
  EXPECT_EQ(asked, 0);
  const uint64_t suid = t.file("suid", 04755);
  k = lacking();
  ASSERT_TRUE(t.fs->kill_privs(suid, k));
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(k.killed);
  EXPECT_EQ(t.mode(suid), 0755u);
  // A caller that has CAP_FSETID keeps them.
  const uint64_t kept = t.file("kept", 06755);
  k = fs::KillPrivs{};
  k.lacks_fsetid = [] { return false; };
  ASSERT_TRUE(t.fs->kill_privs(kept, k));
  EXPECT_FALSE(k.killed);
  EXPECT_EQ(t.mode(kept), 06755u);
}

TEST(KillPrivs, ARefusedChangeTakesNothing) {
  PrivsFs t;
  const uint64_t ino = t.file("f", 06755);
  ASSERT_TRUE(t.fs->setxattr(ino, fs::kFcapsName, "caps", 0));
  ASSERT_TRUE(t.fs->unmount());
  t.fs.reset();
  fs::FsOptions read_only;
  read_only.read_only = true;
  t.mount(read_only);
  fs::KillPrivs k = by(1000, 1000);
  auto r = t.fs->kill_privs(ino, k);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EROFS);
  k = fs::KillPrivs{};
  k.caps = true;
  r = t.fs->kill_privs(ino, k);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EROFS);
  EXPECT_FALSE(k.killed);
  EXPECT_EQ(t.mode(ino), 06755u);
  EXPECT_TRUE(t.has_caps(ino));
}

}  // namespace
}  // namespace stripefs::test
