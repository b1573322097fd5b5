// Damaged metadata: the mount refuses, naming the block and the field, or (for damage to one
// object) that object alone reads as EIO while the rest of the filesystem works.
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::kBlockSize;
using fs::kRootInode;

class Corruption : public ::testing::Test {
 protected:
  MemoryFs t;
  fs::FsSuperblock sb;

  void SetUp() override { sb = t.fs->superblock(); }
  void unmount() {
    ASSERT_TRUE(t.fs->unmount().has_value());
    t.fs.reset();
  }
  // Flips one byte of volume block `block` at `offset`.
  void damage(uint64_t block, size_t offset) {
    AlignedBuffer b(kBlockSize);
    ASSERT_TRUE(t.volume->read(block * kBlockSize, b.span()).has_value());
    b.data()[offset] ^= std::byte{0x5a};
    ASSERT_TRUE(t.volume->write(block * kBlockSize, b.span()).has_value());
  }
  std::string refusal() {
    auto m = fs::Filesystem::mount(*t.volume, {});
    EXPECT_FALSE(m.has_value());
    return m ? "" : m.error().message;
  }
};

TEST_F(Corruption, SuperblockChecksumAndMagicAreNamed) {
  unmount();
  damage(0, 200);
  EXPECT_NE(refusal().find("filesystem superblock (volume block 0): field checksum"),
            std::string::npos);
  damage(0, 200);  // undone: it mounts again
  damage(0, 0);
  EXPECT_NE(refusal().find("field magic"), std::string::npos);
  damage(0, 0);
  t.mount();
}

TEST_F(Corruption, DamagedBitmapRefusesTheMountNamingTheBlock) {
  unmount();
  damage(sb.block_bitmap_start, 100);
  const std::string why = refusal();
  EXPECT_NE(why.find(fmt::format("allocation bitmap at volume block {}: field checksum",
                                 sb.block_bitmap_start)),
            std::string::npos)
      << why;
}

TEST_F(Corruption, DamagedJournalRefusesTheMount) {
  unmount();
  damage(sb.journal_start, 10);
  EXPECT_NE(refusal().find("metadata journal"), std::string::npos);
}

TEST_F(Corruption, DamagedInodeIsEioForThatFileOnly) {
  const uint64_t victim = t.create(kRootInode, "victim");
  const uint64_t neighbour = t.create(kRootInode, "neighbour");
  ASSERT_EQ((victim - 1) / fs::kInodesPerBlock, (neighbour - 1) / fs::kInodesPerBlock);
  unmount();
  damage(sb.inode_table_start + (victim - 1) / fs::kInodesPerBlock,
         ((victim - 1) % fs::kInodesPerBlock) * fs::kInodeSize + 20);
  t.mount();
  EXPECT_EQ(t.fs->getattr(victim).error().code, EIO);
  EXPECT_EQ(t.fs->lookup(kRootInode, "victim").error().code, EIO);
  EXPECT_TRUE(t.fs->getattr(neighbour).has_value());
  EXPECT_TRUE(t.fs->lookup(kRootInode, "neighbour").has_value());
  EXPECT_TRUE(t.fs->mknod(kRootInode, "new", S_IFREG | 0644, 0, t.root).has_value());
}

TEST_F(Corruption, DamagedDirectoryIsEioForThatDirectoryOnly) {
  const uint64_t dir = t.create(kRootInode, "dir", S_IFDIR | 0755);
  const uint64_t inner = t.create(dir, "inner");
  const uint64_t other = t.create(kRootInode, "other", S_IFDIR | 0755);
  unmount();
  // The root directory's bucket 0 is the second data block (mkfs puts it there).
  damage(sb.data_start + 1, 40);
  t.mount();
  EXPECT_EQ(t.fs->lookup(kRootInode, "dir").error().code, EIO);
  EXPECT_EQ(t.fs->readdir(kRootInode, 2, [](auto, auto, auto, auto) { return true; }).error().code,
            EIO);
  EXPECT_EQ(t.fs->mknod(kRootInode, "x", S_IFREG | 0644, 0, t.root).error().code, EIO);
  // What hangs below it is still reachable by inode (as NFS handles reach it).
  EXPECT_TRUE(t.fs->getattr(inner).has_value());
  EXPECT_TRUE(t.fs->lookup(dir, "inner").has_value());
  EXPECT_TRUE(t.fs->mknod(other, "fine", S_IFREG | 0644, 0, t.root).has_value());
  EXPECT_TRUE(t.fs->unmount().has_value());
}

TEST_F(Corruption, MisdirectedBlockIsCaughtBySelf) {
  const uint64_t dir = t.create(kRootInode, "dir", S_IFDIR | 0755);
  t.create(dir, "inner");
  unmount();
  // A valid bucket at the wrong address: "dir"'s bucket (allocated right after the root's
  // two blocks: its header, then its bucket) written over the root's bucket.
  AlignedBuffer other(kBlockSize);
  ASSERT_TRUE(t.volume->read((sb.data_start + 3) * kBlockSize, other.span()).has_value());
  ASSERT_TRUE(t.volume->write((sb.data_start + 1) * kBlockSize, other.span()).has_value());
  t.mount();
  auto r = t.fs->lookup(kRootInode, "dir");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_NE(r.error().message.find("field self"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace stripefs::test
