// The offline check of an inode's xattrs kept in a run of blocks (values up to 64 KiB): a
// block of the run wrong on one member is taken from redundancy with every attribute kept;
// one that no copy holds right loses the inode its xattrs (never the file), and the blocks
// of the run are accounted for either way.
#include <gtest/gtest.h>

#include <string>

#include "unit/fs/check/checked_fs.hpp"

namespace stripefs::test {
namespace {

const std::string& big_value() {
  static const std::string value = [] {
    const auto bytes = pattern(60000, 41);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }();
  return value;
}

// `Checked`, with a run of xattrs on `small` as well.
struct CheckedRun : Checked {
  CheckedRun() {
    t.mount();
    EXPECT_TRUE(t.fs->setxattr(small, "user.stream", big_value(), 0).has_value());
    unmount();
  }
};

TEST(FsCheckXattrRun, AHealthyRunIsClean) {
  CheckedRun c;
  const DiskInode n = c.inode(c.small);
  ASSERT_GE(n.xattr_blocks, 2u);
  const fs::CheckReport r = c.check(false, true);
  EXPECT_EQ(r.exit_code(), 0) << all(r);
}

TEST(FsCheckXattrRun, ABlockWrongOnOneMemberIsTakenFromRedundancy) {
  CheckedRun c;
  const DiskInode n = c.inode(c.small);
  c.corrupt_on_member(n.xattr_block + n.xattr_blocks - 1);
  const fs::CheckReport found = c.check(false, true);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  EXPECT_NE(all(found).find("xattr block (volume block"), std::string::npos) << all(found);
  EXPECT_NE(all(found).find("right in redundancy"), std::string::npos) << all(found);
  const fs::CheckReport repaired = c.check(true, true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  auto value = c.t.fs->getxattr(c.small, "user.stream");
  ASSERT_TRUE(value.has_value()) << value.error().message;
  EXPECT_EQ(*value, big_value());
  EXPECT_EQ(*c.t.fs->getxattr(c.small, "user.colour"), "blue");
}

TEST(FsCheckXattrRun, ABlockNoCopyHoldsRightDropsTheXattrsNotTheFile) {
  CheckedRun c;
  const DiskInode n = c.inode(c.small);
  c.scribble(n.xattr_block + 1);
  const fs::CheckReport found = c.check(false, true);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  EXPECT_NE(all(found).find("xattr run block at volume block " + std::to_string(n.xattr_block + 1)),
            std::string::npos)
      << all(found);
  const fs::CheckReport repaired = c.check(true, true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("its xattrs are dropped"), std::string::npos) << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  auto gone = c.t.fs->getxattr(c.small, "user.stream");
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, ENODATA);
  EXPECT_TRUE(c.t.read(c.small, 0, c.small_data.size()) == c.small_data);
  // The inode can take xattrs again.
  EXPECT_TRUE(c.t.fs->setxattr(c.small, "user.stream", big_value(), 0).has_value());
}

}  // namespace
}  // namespace stripefs::test
