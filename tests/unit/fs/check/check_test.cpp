// The offline check (fsck.stripefs's engine) on a RAID5 of memory members: a healthy
// filesystem has nothing wrong; each kind of damage is found by a read-only check, which
// writes nothing, with exit code 4; a repairing check puts it right (exit 1), after which a
// second check finds nothing (exit 0), the filesystem mounts and the files left read right:
// blocks claimed twice are copied, directories whose shape is damaged are laid out again, a
// directory loop is broken and what no name reaches goes to a /lost+found made for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>

#include "unit/fs/check/checked_fs.hpp"

namespace stripefs::test {
namespace {

TEST(FsCheck, AHealthyFilesystemHasNothingWrong) {
  Checked c;
  const fs::CheckReport r = c.check(false, true);
  EXPECT_TRUE(r.checked);
  EXPECT_EQ(r.exit_code(), 0) << all(r);
  EXPECT_EQ(r.directories, 3u);
  EXPECT_EQ(r.files, 43u);
  EXPECT_EQ(r.symlinks, 2u);
  EXPECT_GE(r.data_blocks_checked, kBig / kBlockSize);
  // Clean and not forced: counted, not checked.
  fs::CheckOptions quick;
  auto q = fs::check_filesystem(*c.t.volume, quick);
  ASSERT_TRUE(q.has_value());
  EXPECT_FALSE(q->checked);
  EXPECT_TRUE(q->was_clean);
  EXPECT_EQ(q->inodes_used, r.inodes_used);
  EXPECT_EQ(q->blocks_used, r.blocks_used);
}

// One kind of damage: made on the unmounted volume; then the word its finding must hold.
struct Damage {
  const char* name;
  std::function<void(Checked&)> make;
  const char* finding;
  bool safe;  // every repair it needs may be made by a preen (-p)
};

class FsCheckDamage : public testing::TestWithParam<Damage> {};

TEST_P(FsCheckDamage, IsFoundReadOnlyWithoutWritingAndRepaired) {
  Checked c;
  GetParam().make(c);
  const size_t before = c.members();
  const fs::CheckReport found = c.check(false, true);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  EXPECT_NE(all(found).find(GetParam().finding), std::string::npos) << all(found);
  EXPECT_EQ(c.members(), before) << "a read-only check wrote";
  const bool safe = std::all_of(found.findings.begin(), found.findings.end(),
                                [](const fs::Finding& f) { return f.safe; });
  EXPECT_EQ(safe, GetParam().safe) << all(found);
  const fs::CheckReport repaired = c.check(true, true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  // What was not damaged reads as it was written.
  // (Only the damage that shortens it on purpose leaves it shorter.)
  const uint64_t big_size = c.inode(c.big).size;
  if (std::string_view(GetParam().name) != "blocks_past_the_size_not_in_the_orphan_list") {
    EXPECT_EQ(big_size, kBig);
  }
  EXPECT_TRUE(c.t.read(c.big, 0, big_size) ==
              std::vector(c.big_data.begin(), c.big_data.begin() + big_size));
}

INSTANTIATE_TEST_SUITE_P(
    , FsCheckDamage,
    testing::Values(
        Damage{"block_in_use_marked_free",
               [](Checked& c) {
                 c.flip_bit(c.sb.block_bitmap_start, c.inode(c.big).inline_extents[0].physical + 3);
               },
               "in use are marked free", true},
        Damage{"leaked_block",
               [](Checked& c) { c.flip_bit(c.sb.block_bitmap_start, c.sb.total_blocks - 9); },
               "hold nothing", true},
        Damage{"inode_in_use_marked_free",
               [](Checked& c) { c.flip_bit(c.sb.inode_bitmap_start, c.small - 1); },
               "inode bitmap: 1 inodes (", true},
        Damage{"wrong_link_count",
               [](Checked& c) {
                 DiskInode n = c.inode(c.linked);
                 n.nlink = 7;
                 c.set_inode(c.linked, n);
               },
               "field nlink: 7, but 2", true},
        Damage{"wrong_directory_link_count",
               [](Checked& c) {
                 DiskInode n = c.inode(c.dir);
                 n.nlink = 2;
                 c.set_inode(c.dir, n);
               },
               "field nlink: 2, but 3", true},
        Damage{"damaged_inode",
               [](Checked& c) {
                 AlignedBuffer b = c.read_block(c.inode_block(c.small));
                 b.data()[Checked::slot(c.small) + 8] ^= std::byte{0xff};
                 c.write_block(c.inode_block(c.small), b);
               },
               "field checksum", false},
        Damage{"free_slot_still_named",
               [](Checked& c) {
                 DiskInode empty;
                 c.set_inode(c.small, empty);
               },
               "its slot is free", false},
        Damage{"entry_type",
               [](Checked& c) {
                 auto [self, bucket] = c.bucket_with(kRootInode, "big");
                 for (auto& e : bucket.entries) {
                   if (e.name == "big") e.type = 4;
                 }
                 c.set_bucket(self, bucket);
               },
               "field type: 4", true},
        Damage{"entry_to_a_free_inode",
               [](Checked& c) {
                 auto [self, bucket] = c.bucket_with(kRootInode, "short");
                 for (auto& e : bucket.entries) {
                   if (e.name == "short") e.ino = c.sb.inode_count - 3;
                 }
                 c.set_bucket(self, bucket);
               },
               "it would be named #", false},
        Damage{"directory_parent",
               [](Checked& c) {
                 DiskInode n = c.inode(c.sub);
                 n.parent = kRootInode;
                 c.set_inode(c.sub, n);
               },
               "field parent: 1", true},
        Damage{"block_count",
               [](Checked& c) {
                 DiskInode n = c.inode(c.big);
                 n.blocks += 5;
                 c.set_inode(c.big, n);
               },
               "field blocks", true},
        Damage{"extent_outside_the_data_area",
               [](Checked& c) {
                 DiskInode n = c.inode(c.small);
                 n.inline_extents.push_back({1000, c.sb.total_blocks + 5, 1, false});
                 c.set_inode(c.small, n);
               },
               "outside the data area", false},
        Damage{"directory_block_wrong_on_one_member",
               [](Checked& c) { c.corrupt_on_member(c.bucket_with(c.sub, "f7").first); },
               "right in redundancy", true},
        Damage{"inode_table_block_wrong_on_one_member",
               [](Checked& c) { c.corrupt_on_member(c.inode_block(c.big)); }, "right in redundancy",
               true},
        Damage{
            "file_data_wrong_on_one_member",
            [](Checked& c) { c.corrupt_on_member(c.inode(c.big).inline_extents[0].physical + 17); },
            "file block 17", true},
        Damage{"directory_header_with_no_good_copy",
               [](Checked& c) { c.scribble(c.dir_block(c.sub, 0)); }, "header: directory header at",
               false},
        Damage{"directory_bucket_with_no_good_copy",
               [](Checked& c) { c.scribble(c.bucket_with(c.dir, "small").first); },
               "bucket 0: directory bucket at", false},
        Damage{"entry_with_a_wrong_key",
               [](Checked& c) {
                 auto [self, bucket] = c.bucket_with(c.sub, "f3");
                 for (auto& e : bucket.entries) {
                   if (e.name == "f3") e.key ^= 0x10;
                 }
                 c.set_bucket(self, bucket);
               },
               "is not its name's", true},
        Damage{"directory_loop",
               [](Checked& c) {
                 // /dir/sub/up names /dir, and /dir loses its name in the root.
                 auto [root_self, root_bucket] = c.bucket_with(kRootInode, "dir");
                 std::erase_if(root_bucket.entries,
                               [](const fs::DirEntry& e) { return e.name == "dir"; });
                 c.set_bucket(root_self, root_bucket);
                 auto [self, bucket] = c.bucket_with(c.sub, "f3");
                 bucket.entries.push_back(
                     {fs::DirectoryIndex::name_key("up", c.sb.hash_seed), c.dir, DT_DIR, "up"});
                 c.set_bucket(self, bucket);
               },
               "(a loop)", false},
        Damage{"block_claimed_twice",
               [](Checked& c) {
                 DiskInode n = c.inode(c.small);
                 n.inline_extents[0].physical = c.inode(c.big).inline_extents[0].physical;
                 c.set_inode(c.small, n);
               },
               "claimed more than once", false},
        Damage{"blocks_past_the_size_not_in_the_orphan_list",
               [](Checked& c) {
                 DiskInode n = c.inode(c.big);
                 n.size = 4096;
                 c.set_inode(c.big, n);
               },
               "the orphan list does not name it", true},
        Damage{"orphan_list_block", [](Checked& c) { c.scribble(c.sb.orphan_start); },
               "orphan bitmap block 0", true},
        Damage{"checksum_table_block",
               [](Checked& c) {
                 AlignedBuffer b = c.read_block(c.sb.checksum_start);
                 b.data()[2000] ^= std::byte{1};
                 c.write_block(c.sb.checksum_start, b);
               },
               "checksum table block 0", false}),
    [](const testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

// An orphan: unlinked while open when the daemon stopped. The check frees it as a mount
// would.
// A directory whose buckets overflowed keeps blocks from file block kOverflowBase (2^32)
// on, past where a file may reach: that is no damage.
TEST(FsCheck, ADirectoryWithOverflowBlocksIsClean) {
  Checked c;
  c.t.mount();
  const uint64_t d = c.t.create(kRootInode, "many", S_IFDIR | 0755);
  const std::string tail(200, 'n');  // ~19 names a bucket: some fill before their split
  for (int i = 0; i < 3000; ++i) c.t.create(d, (std::to_string(i) + tail).c_str());
  c.unmount();
  // Its extents, inline or in a one-level tree: some must map overflow blocks.
  const DiskInode n = c.inode(d);
  std::vector<fs::Extent> extents = n.inline_extents;
  if (n.tree_depth == 1) {
    AlignedBuffer leaf = c.read_block(n.tree_root);
    auto got = fs::decode_extent_leaf(c.span(leaf), n.tree_root);
    ASSERT_TRUE(got.has_value()) << got.error().message;
    extents = *got;
  }
  ASSERT_TRUE(std::any_of(extents.begin(), extents.end(),
                          [](const fs::Extent& e) { return e.logical >= fs::kOverflowBase; }))
      << "no bucket overflowed (tree depth " << n.tree_depth << "): the test proves nothing";
  const fs::CheckReport r = c.check(false, true);
  EXPECT_EQ(r.exit_code(), 0) << all(r);
}

TEST(FsCheck, AnOrphanIsFreed) {
  Checked c;
  c.t.mount();
  const uint64_t ino = c.t.create(kRootInode, "doomed");
  ASSERT_TRUE(c.t.write(ino, 0, pattern(50000, 3)).has_value());
  ASSERT_TRUE(c.t.fs->open(ino).has_value());
  ASSERT_TRUE(c.t.fs->unlink(kRootInode, "doomed").has_value());
  ASSERT_TRUE(c.t.fs->sync().has_value());
  c.t.fs.reset();  // the daemon dies with the file open
  const fs::CheckReport found = c.check(false);
  EXPECT_FALSE(found.was_clean);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  EXPECT_NE(all(found).find("an orphan"), std::string::npos) << all(found);
  EXPECT_EQ(all(found).find("does not name it"), std::string::npos)
      << "the daemon listed it: " << all(found);
  // Unlisted, a mount after a crash would never free it: said so.
  c.flip_bit(c.sb.orphan_start, ino - 1);
  const fs::CheckReport unlisted = c.check(false);
  EXPECT_NE(all(unlisted).find("an orphan), and the orphan list does not name it"),
            std::string::npos)
      << all(unlisted);
  c.flip_bit(c.sb.orphan_start, ino - 1);
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  // Freed, and unlisted with it.
  AlignedBuffer list = c.read_block(c.sb.orphan_start);
  const uint64_t bit = ino - 1;
  EXPECT_EQ(std::to_integer<int>(list.data()[fs::kHeaderSize + bit / 8] >> (bit % 8)) & 1, 0);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
}

// The data pass reads extents a piece (1 MiB) at a time: a file of more than one piece
// checks clean block by block, and one block wrong on a member past the first piece is
// found alone, under its own file block, and repaired.
TEST(FsCheck, FileDataPastTheFirstReadPieceIsCheckedBlockByBlock) {
  Checked c;
  c.t.mount();
  constexpr uint64_t kBlocks = 600;  // two whole pieces and a part
  const uint64_t ino = c.t.create(kRootInode, "long");
  const std::vector<std::byte> data = pattern(kBlocks * kBlockSize, 7);
  ASSERT_TRUE(c.t.write(ino, 0, data).has_value());
  c.unmount();
  const fs::CheckReport clean = c.check(false, true);
  EXPECT_EQ(clean.exit_code(), 0) << all(clean);
  EXPECT_GE(clean.data_blocks_checked, kBig / kBlockSize + kBlocks);
  const DiskInode disk = c.inode(ino);
  ASSERT_EQ(disk.inline_extents[0].length, kBlocks) << "one extent, as written";
  c.corrupt_on_member(disk.inline_extents[0].physical + 517);
  const fs::CheckReport found = c.check(false, true);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  EXPECT_EQ(found.findings.size(), 1u) << all(found);
  EXPECT_NE(all(found).find("file block 517 "), std::string::npos) << all(found);
  EXPECT_EQ(c.check(true, true).exit_code(), 1);
  EXPECT_EQ(c.check(false, true).exit_code(), 0);
  c.t.mount();
  EXPECT_TRUE(c.t.read(ino, 0, data.size()) == data);
}

// A file no name reaches gets "#ino" in /lost+found, which the check makes (there is none),
// as e2fsck reconnects one, and reads as before under it.
TEST(FsCheck, AFileNoNameReachesIsNamedAfterItsInodeInLostAndFound) {
  Checked c;
  auto [self, bucket] = c.bucket_with(c.dir, "small");
  std::erase_if(bucket.entries, [](const fs::DirEntry& e) { return e.name == "small"; });
  c.set_bucket(self, bucket);
  const uint32_t root_links = c.inode(kRootInode).nlink;
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("/lost+found: missing; made"), std::string::npos) << all(repaired);
  EXPECT_NE(all(repaired).find("named #" + std::to_string(c.small) + " in /lost+found"),
            std::string::npos)
      << all(repaired);
  EXPECT_EQ(c.inode(kRootInode).nlink, root_links + 1);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  auto lost = c.t.fs->lookup(kRootInode, "lost+found");
  ASSERT_TRUE(lost.has_value()) << lost.error().message;
  EXPECT_EQ(lost->mode, S_IFDIR | 0700u);
  auto found = c.t.fs->lookup(lost->ino, "#" + std::to_string(c.small));
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(found->ino, c.small);
  EXPECT_TRUE(c.t.read(c.small, 0, c.small_data.size()) == c.small_data);
  EXPECT_EQ(*c.t.fs->getxattr(c.small, "user.colour"), "blue");
}

// The root names a file "lost+found": no second entry of that name is made; what needs a
// name gets it in the root.
TEST(FsCheck, ALostAndFoundThatIsNoDirectoryIsLeftAndTheRootTakesTheInode) {
  Checked c;
  c.t.mount();
  c.t.create(kRootInode, "lost+found");
  c.unmount();
  auto [self, bucket] = c.bucket_with(c.dir, "small");
  std::erase_if(bucket.entries, [](const fs::DirEntry& e) { return e.name == "small"; });
  c.set_bucket(self, bucket);
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("named #" + std::to_string(c.small) + " in the root directory"),
            std::string::npos)
      << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  auto file = c.t.fs->lookup(kRootInode, "lost+found");
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(S_ISREG(file->mode));
  EXPECT_TRUE(c.t.fs->lookup(kRootInode, "#" + std::to_string(c.small)).has_value());
}

// A directory whose header no copy holds right is laid out again from its buckets: every
// name in it is kept.
TEST(FsCheck, ADirectoryWithoutItsHeaderKeepsEveryName) {
  Checked c;
  c.scribble(c.dir_block(c.sub, 0));
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_EQ(all(repaired).find("lost+found"), std::string::npos) << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  for (int i = 0; i < 40; ++i) {
    EXPECT_TRUE(c.t.fs->lookup(c.sub, "f" + std::to_string(i)).has_value()) << i;
  }
  auto linked = c.t.fs->lookup(c.sub, "linked");
  ASSERT_TRUE(linked.has_value());
  EXPECT_EQ(linked->nlink, 2u);
  // It takes new names as any directory does.
  EXPECT_NE(c.t.create(c.sub, "after"), 0u);
}

// Entries in a bucket their keys do not belong in (lookups miss them) are found and put
// where they belong, in a directory of many buckets.
TEST(FsCheck, AnEntryInTheWrongBucketIsPutWhereLookupsFindIt) {
  Checked c;
  c.t.mount();
  const uint64_t many = c.t.create(kRootInode, "many", S_IFDIR | 0755);
  for (int i = 0; i < 300; ++i) c.t.create(many, ("n" + std::to_string(i)).c_str());
  c.unmount();
  auto header_block = c.read_block(c.dir_block(many, 0));
  auto header = fs::decode_dir_header(c.span(header_block), c.dir_block(many, 0));
  ASSERT_TRUE(header.has_value());
  ASSERT_GE(header->buckets(), 2u);
  auto [from, bucket] = c.bucket_with(many, "n17");
  fs::DirEntry moved;
  std::erase_if(bucket.entries, [&](const fs::DirEntry& e) {
    if (e.name != "n17") return false;
    moved = e;
    return true;
  });
  c.set_bucket(from, bucket);
  const uint64_t to = from == c.dir_block(many, 1) ? c.dir_block(many, 2) : c.dir_block(many, 1);
  AlignedBuffer other = c.read_block(to);
  auto target = fs::decode_dir_bucket(c.span(other), to);
  ASSERT_TRUE(target.has_value());
  target->entries.push_back(moved);
  c.set_bucket(to, *target);
  const fs::CheckReport found = c.check(false);
  EXPECT_EQ(found.exit_code(), 4);
  EXPECT_NE(all(found).find("entry 'n17': in bucket"), std::string::npos) << all(found);
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  for (int i = 0; i < 300; ++i) {
    EXPECT_TRUE(c.t.fs->lookup(many, "n" + std::to_string(i)).has_value()) << i;
  }
}

// Two inodes of one table block: one wrong on its member, the other's bytes wrong in the
// parity beside it. Rebuilt from parity, the first comes back right and the second wrong: only
// the first inode's slot is taken from the rebuild, so the second, right as it is, stays.
TEST(FsCheck, AnInodeWrongOnOneMemberIsTakenAloneFromRedundancy) {
  Checked c;
  const uint64_t table = c.inode_block(c.big);
  ASSERT_EQ(c.inode_block(c.small), table);
  const uint64_t big_at = Checked::slot(c.big), small_at = Checked::slot(c.small);
  c.corrupt_on_member(table, false, big_at + 8, big_at + 40);
  c.corrupt_on_member(table, true, small_at + 8, small_at + 40);
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("inode " + std::to_string(c.big) + " (volume block"),
            std::string::npos)
      << all(repaired);
  EXPECT_EQ(all(repaired).find("cleared"), std::string::npos) << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  EXPECT_TRUE(c.t.read(c.small, 0, c.small_data.size()) == c.small_data);
}

// The mount itself takes a superblock wrong on one member from redundancy and rewrites it.
TEST(FsCheck, AMountHealsASuperblockWrongOnOneMember) {
  Checked c;
  c.corrupt_on_member(0);
  c.t.mount();
  ASSERT_TRUE(c.t.fs);
  EXPECT_TRUE(c.t.read(c.big, 0, kBig) == c.big_data);
  c.unmount();
  EXPECT_EQ(c.check(false).exit_code(), 0) << "the member was not rewritten";
}

// A bad extent inside an extent tree: a check leaves it and the blocks it points at stay
// in use (a repaired bitmap must not hand them out); a repair writes the tree again without
// it, and the file's other extents read as before.
TEST(FsCheck, ABadExtentInATreeIsRemovedAndTheTreeWrittenAgain) {
  Checked c;
  c.t.mount();
  const uint64_t ino = c.t.create(kRootInode, "fragmented");
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(c.t.write(ino, i * (1 << 20), pattern(kBlockSize, 40 + i)).has_value());
    ASSERT_TRUE(c.t.fs->sync().has_value());
  }
  c.unmount();
  const DiskInode n = c.inode(ino);
  ASSERT_EQ(n.tree_depth, 1u) << "the file should need an extent tree";
  AlignedBuffer leaf = c.read_block(n.tree_root);
  auto extents = fs::decode_extent_leaf(c.span(leaf), n.tree_root);
  ASSERT_TRUE(extents.has_value());
  ASSERT_GE(extents->size(), 7u);
  const uint64_t bad_logical = extents->back().logical;
  extents->back().logical = fs::kMaxFileSize / kBlockSize;  // past the largest file
  fs::encode_extent_leaf(*extents, n.tree_root, c.span(leaf));
  c.write_block(n.tree_root, leaf);
  const fs::CheckReport found = c.check(false);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  EXPECT_NE(all(found).find("past the largest file; left as it is"), std::string::npos)
      << all(found);
  const fs::CheckReport repaired = c.check(true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("past the largest file; removed"), std::string::npos)
      << all(repaired);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  for (uint64_t i = 0; i < 8; ++i) {
    const auto got = c.t.read(ino, i * (1 << 20), kBlockSize);
    if (i * (1 << 20) / kBlockSize == bad_logical) {
      EXPECT_TRUE(got == std::vector<std::byte>(kBlockSize)) << i;  // a hole now
    } else {
      EXPECT_TRUE(got == pattern(kBlockSize, 40 + i)) << i;
    }
  }
}

// Two files claiming one block: nothing says which is right, so each keeps a copy; writing
// one then leaves the other alone. A directory claiming a block second gets a copy sealed
// where it lives.
TEST(FsCheck, ABlockClaimedTwiceIsCopiedForTheSecondClaimant) {
  Checked c;
  c.t.mount();
  const uint64_t later = c.t.create(kRootInode, "later", S_IFDIR | 0755);
  c.t.create(later, "inside");
  c.unmount();
  const uint64_t shared = c.inode(c.big).inline_extents[0].physical;
  DiskInode n = c.inode(c.small);
  n.inline_extents[0].physical = shared;
  c.set_inode(c.small, n);
  // `big` (an inode before `later`) claims `later`'s bucket too.
  DiskInode b = c.inode(c.big);
  b.inline_extents.push_back({5000, c.dir_block(later, 1), 1, true});  // reads as zeros
  b.blocks += 1;
  c.set_inode(c.big, b);
  const AlignedBuffer first_block = c.read_block(shared);
  const fs::CheckReport found = c.check(false);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  const fs::CheckReport repaired = c.check(true, true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("given copies of its own"), std::string::npos) << all(repaired);
  EXPECT_EQ(c.check(false, true).exit_code(), 0) << "data checksums came along";
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  EXPECT_NE(c.inode(c.small).inline_extents[0].physical, shared);
  const auto small_now = c.t.read(c.small, 0, kBlockSize);
  EXPECT_TRUE(std::equal(small_now.begin(), small_now.end(), first_block.data()));
  ASSERT_TRUE(c.t.write(c.small, 0, pattern(kBlockSize, 99)).has_value());
  EXPECT_TRUE(c.t.read(c.big, 0, kBig) == c.big_data);
  EXPECT_TRUE(c.t.fs->lookup(later, "inside").has_value());
}

// An inode the bitmap does not list, taken in by pass 2 (a name reaches it), claims a block
// of another: it is given a copy, as pass 1b does for the inodes it saw, and a second check
// is clean.
TEST(FsCheck, ABlockClaimedByAnInodePass2TookInIsCopiedToo) {
  Checked c;
  const uint64_t shared = c.inode(c.big).inline_extents[0].physical;
  DiskInode n = c.inode(c.small);
  n.inline_extents[0].physical = shared;
  c.set_inode(c.small, n);
  c.flip_bit(c.sb.inode_bitmap_start, c.small - 1);
  const fs::CheckReport found = c.check(false);
  EXPECT_EQ(found.exit_code(), 4) << all(found);
  const std::string text = all(found);
  const size_t first = text.find("claimed more than once");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("claimed more than once", first + 1), std::string::npos)
      << "reported once, not by each run of pass 1b: " << text;
  EXPECT_EQ(text.find("claimed by another inode too"), std::string::npos) << text;
  const fs::CheckReport repaired = c.check(true, true);
  EXPECT_EQ(repaired.exit_code(), 1) << all(repaired);
  EXPECT_NE(all(repaired).find("given copies of its own"), std::string::npos) << all(repaired);
  EXPECT_EQ(all(repaired).find("left as they are"), std::string::npos) << all(repaired);
  EXPECT_EQ(c.check(false, true).exit_code(), 0);
  ASSERT_NO_FATAL_FAILURE(c.expect_repaired());
  EXPECT_NE(c.inode(c.small).inline_extents[0].physical, shared);
  EXPECT_TRUE(c.t.read(c.big, 0, kBig) == c.big_data);
}

}  // namespace
}  // namespace stripefs::test
