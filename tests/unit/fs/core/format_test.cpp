#include <gtest/gtest.h>
#include <sys/stat.h>

#include "fs/core/format.hpp"
#include "fs/core/xattr_format.hpp"
#include "fs/core/make_fs.hpp"

namespace stripefs::fs {
namespace {

using Block = std::array<std::byte, kBlockSize>;

FsSuperblock sample_superblock() {
  auto sb = plan_layout(100000, 48,
                        MakeFsOptions{.label = "lbl",
                                      .uuid = {},
                                      .journal_blocks = 0,
                                      .inode_count = 0,
                                      .root_uid = 0,
                                      .root_gid = 0,
                                      .checksums = true});
  EXPECT_TRUE(sb.has_value());
  return *sb;
}

TEST(FsFormat, SuperblockRoundTripsAndRejectsEachDamage) {
  const FsSuperblock sb = sample_superblock();
  Block b;
  encode_fs_superblock(sb, b);
  auto back = decode_fs_superblock(b);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->label, "lbl");
  EXPECT_EQ(back->data_start, sb.data_start);
  EXPECT_EQ(back->data_start % 48, 0u);
  EXPECT_EQ(back->inode_count, sb.inode_count);
  EXPECT_EQ(back->hash_seed, sb.hash_seed);
  EXPECT_EQ(back->major, kFormatMajor);
  EXPECT_EQ(back->checksum_start, sb.inode_table_start + sb.inode_table_blocks());
  EXPECT_EQ(back->checksum_blocks, sb.checksum_blocks);
  EXPECT_GE(back->checksum_blocks * kChecksumsPerBlock, sb.total_blocks - sb.data_start)
      << "the table covers every data block";
  EXPECT_EQ(back->minor, kFormatMinor);
  EXPECT_EQ(back->orphan_start, back->checksum_start + back->checksum_blocks);
  EXPECT_GE(back->orphan_blocks * kBitsPerBitmapBlock, back->inode_count)
      << "the orphan list has a bit for every inode";
  EXPECT_GE(back->data_start, back->orphan_start + back->orphan_blocks);
  // Each field that can be wrong is named.
  auto refused = [&](auto mutate, std::string_view field) {
    FsSuperblock bad = sb;
    mutate(bad);
    Block out;
    encode_fs_superblock(bad, out);
    auto r = decode_fs_superblock(out);
    ASSERT_FALSE(r.has_value()) << field;
    EXPECT_NE(r.error().message.find(field), std::string::npos) << r.error().message;
  };
  refused([](FsSuperblock& s) { s.major = 9; }, "field version");
  refused([](FsSuperblock& s) { s.inode_bitmap_blocks = 0; }, "field inode_bitmap");
  refused([](FsSuperblock& s) { s.block_bitmap_blocks = 0; }, "field block_bitmap");
  refused([](FsSuperblock& s) { s.data_start = s.total_blocks; }, "field data_start");
  refused([](FsSuperblock& s) { s.stripe_blocks = 0; }, "field stripe_blocks");
  refused([](FsSuperblock& s) { s.journal_blocks = 3; }, "field journal_start/journal_blocks");
  refused([](FsSuperblock& s) { s.checksum_blocks = 1; }, "field checksum_start/checksum_blocks");
  refused([](FsSuperblock& s) { s.checksum_blocks = 0; }, "field checksum_start/checksum_blocks");
  refused([](FsSuperblock& s) { ++s.checksum_start; }, "field checksum_start/checksum_blocks");
  refused([](FsSuperblock& s) { ++s.orphan_start; }, "field orphan_start/orphan_blocks");
  refused([](FsSuperblock& s) { s.orphan_blocks = s.data_start; }, "field data_start");
  // A superblock of minor 0 has no orphan list, whatever those bytes hold.
  {
    FsSuperblock old = sb;
    old.minor = 0;
    Block out;
    encode_fs_superblock(old, out);
    auto r = decode_fs_superblock(out);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_FALSE(r->has_orphan_list());
  }
  for (size_t at : {size_t{16}, size_t{100}, size_t{kBlockSize - 1}}) {
    Block damaged = b;
    damaged[at] ^= std::byte{1};
    EXPECT_FALSE(decode_fs_superblock(damaged).has_value()) << at;
  }
}

// Format 1 (made without checksums) has no table, and reads back as such.
TEST(FsFormat, AFormatOneSuperblockHasNoChecksumTable) {
  MakeFsOptions options;
  options.checksums = false;
  auto sb = plan_layout(100000, 48, options);
  ASSERT_TRUE(sb.has_value());
  EXPECT_EQ(sb->major, kFormatNoChecksums);
  EXPECT_FALSE(sb->has_checksums());
  EXPECT_EQ(sb->orphan_start, sb->inode_table_start + sb->inode_table_blocks());
  EXPECT_EQ(sb->data_start, (sb->orphan_start + sb->orphan_blocks + 47) / 48 * 48);
  Block b;
  encode_fs_superblock(*sb, b);
  auto back = decode_fs_superblock(b);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_FALSE(back->has_checksums());
}

TEST(FsFormat, InodeRoundTripsWithExtentsAndInlineSymlink) {
  DiskInode n;
  n.mode = S_IFREG | 0640;
  n.uid = 1000;
  n.gid = 100;
  n.nlink = 3;
  n.size = 5ull << 30;
  n.blocks = 77;
  n.atime = {-5, 1};
  n.mtime = {1 << 30, 999999999};
  n.ctime = {4102444800, 7};  // past 2038
  n.generation = 42;
  n.inline_extents = {{0, 1000, 10, false}, {20, 5000, 3, true}};
  std::array<std::byte, kInodeSize> raw;
  encode_inode(n, raw);
  auto back = decode_inode(raw, 7);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->inline_extents, n.inline_extents);
  EXPECT_EQ(back->mtime, n.mtime);
  EXPECT_EQ(back->atime, n.atime);
  EXPECT_EQ(back->ctime, n.ctime);
  EXPECT_EQ(back->size, n.size);
  raw[30] ^= std::byte{4};
  auto bad = decode_inode(raw, 7);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("inode 7: field checksum"), std::string::npos);
  // Overlapping extents are refused even with a good checksum.
  n.inline_extents = {{0, 1000, 10, false}, {5, 5000, 3, false}};
  encode_inode(n, raw);
  EXPECT_FALSE(decode_inode(raw, 7).has_value());
  DiskInode link;
  link.mode = S_IFLNK | 0777;
  link.inline_symlink = "../target";
  encode_inode(link, raw);
  EXPECT_EQ(decode_inode(raw, 8)->inline_symlink, "../target");
}

TEST(FsFormat, DirectoryAndXattrBlocksRoundTripAndCheckSelf) {
  DirBucket bucket;
  bucket.overflow = kOverflowBase + 3;
  bucket.entries.push_back({123, 5, 8, "a"});
  bucket.entries.push_back({456, 6, 4, std::string(255, 'n')});
  Block b;
  encode_dir_bucket(bucket, 900, b);
  auto back = decode_dir_bucket(b, 900);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries[1].name, std::string(255, 'n'));
  EXPECT_EQ(back->overflow, bucket.overflow);
  auto moved = decode_dir_bucket(b, 901);
  ASSERT_FALSE(moved.has_value());
  EXPECT_NE(moved.error().message.find("field self"), std::string::npos);
  std::vector<Xattr> attrs{{"user.a", std::string("\0\1\2", 3)}, {"security.selinux", "ctx"}};
  encode_xattrs(attrs, 10, b);
  auto xs = decode_xattrs(b, 10);
  ASSERT_TRUE(xs.has_value());
  EXPECT_EQ((*xs)[0].value, std::string("\0\1\2", 3));
  b[kHeaderSize + 10] ^= std::byte{1};
  EXPECT_FALSE(decode_xattrs(b, 10).has_value());
}

TEST(FsFormat, ExtentTreeBlocksRoundTrip) {
  std::vector<Extent> extents;
  for (uint64_t i = 0; i < kLeafExtents; ++i)
    extents.push_back({i * 10, 1000 + i * 10, 5, i % 2 == 0});
  Block b;
  encode_extent_leaf(extents, 77, b);
  auto back = decode_extent_leaf(b, 77);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, extents);
  std::vector<IndexEntry> index{{0, 500}, {1000, 501}};
  encode_extent_index(index, 1, 78, b);
  uint32_t level = 0;
  auto idx = decode_extent_index(b, 78, &level);
  ASSERT_TRUE(idx.has_value());
  EXPECT_EQ(level, 1u);
  EXPECT_EQ((*idx)[1].block, 501u);
}

TEST(FsFormat, TooSmallVolumeIsRefusedWithTheNumbers) {
  auto r = plan_layout(1200, 48, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("too small"), std::string::npos);
}

}  // namespace
}  // namespace stripefs::fs
