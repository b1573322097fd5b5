// The extent tree a commit stores: what it writes reads back as the file's extents, after
// any sequence of changes; an unchanged leaf is not written again; blocks are neither leaked
// nor given back twice.
#include "fs/core/extent_tree.hpp"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>
#include <set>

#include "fs/check/check.hpp"
#include "unit/fs/core/extent_map_changes.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::fs {
namespace {

// The blocks a tree lives in, in memory, with the bookkeeping a filesystem would do.
struct FakeBlocks {
  std::map<uint64_t, std::array<std::byte, kBlockSize>> images;
  std::set<uint64_t> in_use;
  uint64_t next = 1000;
  uint64_t images_written = 0;

  ExtentTree::Blocks blocks() {
    return {
        .allocate = [this]() -> Result<uint64_t> {
          in_use.insert(next);
          return next++;
        },
        .release =
            [this](uint64_t b) {
              EXPECT_EQ(in_use.erase(b), 1u) << "block " << b << " given back but not in use";
            },
        .image =
            [this](uint64_t b) {
              EXPECT_TRUE(in_use.contains(b)) << "block " << b << " written but not in use";
              ++images_written;
              auto& image = images[b];
              image.fill(std::byte{0});
              return std::span<std::byte, kBlockSize>(image);
            },
    };
  }

  // The extents under `root`, as load_extents reads them; and the tree loaded from them.
  std::vector<Extent> read(ExtentTree::Root root, ExtentTree* loaded = nullptr) {
    std::vector<Extent> out;
    if (loaded != nullptr) loaded->set_root(root);
    read_at(root.block, root.depth, out, loaded);
    return out;
  }
  void read_at(uint64_t block, uint32_t levels, std::vector<Extent>& out, ExtentTree* loaded) {
    const auto& image = images.at(block);
    if (levels == 1) {
      auto leaf = decode_extent_leaf(image, block);
      ASSERT_TRUE(leaf) << leaf.error().message;
      if (loaded != nullptr) loaded->add_leaf(block, *leaf);
      out.insert(out.end(), leaf->begin(), leaf->end());
      return;
    }
    if (loaded != nullptr) loaded->add_index(block);
    uint32_t level = 0;
    auto index = decode_extent_index(image, block, &level);
    ASSERT_TRUE(index) << index.error().message;
    ASSERT_EQ(level, levels - 1);
    for (const IndexEntry& e : *index) read_at(e.block, levels - 1, out, loaded);
  }
};

std::set<uint64_t> blocks_of(const ExtentTree& tree) {
  const std::vector<uint64_t> all = tree.blocks();
  return {all.begin(), all.end()};
}

// `n` one-block extents, every other file block, at scattered volume blocks.
std::vector<Extent> scattered(size_t n, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<Extent> extents;
  for (size_t i = 0; i < n; ++i) extents.push_back({2 * i, 1'000'000 + random() % 1'000'000, 1});
  return extents;
}

TEST(ExtentTree, StoresWhatReadsBackAndWritesNothingAgainWhenNothingChanged) {
  FakeBlocks disk;
  ExtentTree tree;
  const std::vector<Extent> extents = scattered(1000, 1);
  ExtentTree::Written first;
  auto root = tree.store(extents, disk.blocks(), &first);
  ASSERT_TRUE(root) << root.error().message;
  EXPECT_TRUE(first.rebuilt);
  EXPECT_EQ(first.leaves, (1000 + kLeafExtents - 1) / kLeafExtents);
  EXPECT_EQ(root->depth, 2u);
  EXPECT_EQ(disk.read(*root), extents);
  EXPECT_EQ(blocks_of(tree), disk.in_use);

  ExtentTree::Written again;
  auto same = tree.store(extents, disk.blocks(), &again);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->block, root->block);
  EXPECT_EQ(again.leaves, 0u);
  EXPECT_EQ(again.index_blocks, 0u);
}

TEST(ExtentTree, OneChangedExtentRewritesOneLeafAndNoIndex) {
  FakeBlocks disk;
  ExtentTree tree;
  std::vector<Extent> extents = scattered(1000, 2);
  ASSERT_TRUE(tree.store(extents, disk.blocks()));
  extents[500].physical += 7;  // rewritten elsewhere (copy on write)
  ExtentTree::Written written;
  auto root = tree.store(extents, disk.blocks(), &written);
  ASSERT_TRUE(root);
  EXPECT_EQ(written.leaves, 1u);
  EXPECT_EQ(written.index_blocks, 0u);
  EXPECT_EQ(disk.read(*root), extents);
}

TEST(ExtentTree, ALeafThatOutgrowsItsBlockSplitsAndTheIndexFollows) {
  FakeBlocks disk;
  ExtentTree tree;
  std::vector<Extent> extents = scattered(2 * kLeafExtents, 3);  // two full leaves
  ASSERT_TRUE(tree.store(extents, disk.blocks()));
  ASSERT_EQ(tree.leaf_count(), 2u);
  // The first leaf's range gets ten more extents (the odd blocks between its own).
  for (uint64_t b = 1; b < 20; b += 2) extents.push_back({b, 5'000'000 + b, 1});
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.logical < b.logical; });
  ExtentTree::Written written;
  auto root = tree.store(extents, disk.blocks(), &written);
  ASSERT_TRUE(root);
  EXPECT_FALSE(written.rebuilt);
  EXPECT_EQ(tree.leaf_count(), 3u);
  EXPECT_EQ(written.leaves, 2u) << "the full leaf, split in two; the second leaf untouched";
  EXPECT_EQ(written.index_blocks, 1u);
  EXPECT_EQ(disk.read(*root), extents);
}

TEST(ExtentTree, ALoadedTreeWritesOnlyWhatChangesAfterIt) {
  FakeBlocks disk;
  std::vector<Extent> extents = scattered(3000, 4);
  ExtentTree::Root root;
  {
    ExtentTree tree;
    auto stored = tree.store(extents, disk.blocks());
    ASSERT_TRUE(stored);
    root = *stored;
  }
  ExtentTree loaded;  // as load_extents builds it from the disk
  ASSERT_EQ(disk.read(root, &loaded), extents);
  ExtentTree::Written unchanged;
  ASSERT_TRUE(loaded.store(extents, disk.blocks(), &unchanged));
  EXPECT_EQ(unchanged.leaves + unchanged.index_blocks, 0u);
  extents.erase(extents.begin() + 2000);
  ExtentTree::Written written;
  auto after = loaded.store(extents, disk.blocks(), &written);
  ASSERT_TRUE(after);
  EXPECT_EQ(written.leaves, 1u);
  EXPECT_EQ(disk.read(*after), extents);
}

TEST(ExtentTree, LeavesLeftSparsePackAgain) {
  FakeBlocks disk;
  ExtentTree tree;
  std::vector<Extent> extents = scattered(20 * kLeafExtents, 5);
  ASSERT_TRUE(tree.store(extents, disk.blocks()));
  // Keep one extent in ten: twenty leaves for what two would hold.
  std::vector<Extent> few;
  for (size_t i = 0; i < extents.size(); i += 10) few.push_back(extents[i]);
  ExtentTree::Written written;
  auto root = tree.store(few, disk.blocks(), &written);
  ASSERT_TRUE(root);
  EXPECT_TRUE(written.rebuilt);
  EXPECT_EQ(tree.leaf_count(), (few.size() + kLeafExtents - 1) / kLeafExtents);
  EXPECT_EQ(disk.read(*root), few);
  EXPECT_EQ(blocks_of(tree), disk.in_use);
  tree.release_all(disk.blocks().release);
  EXPECT_TRUE(disk.in_use.empty());
  EXPECT_TRUE(tree.empty());
}

TEST(ExtentTree, GrowsToThreeLevelsAndShrinksBackToOneLeaf) {
  FakeBlocks disk;
  ExtentTree tree;
  std::vector<Extent> extents = scattered(kLeafExtents * kIndexEntries + 1000, 8);
  auto root = tree.store(extents, disk.blocks());
  ASSERT_TRUE(root) << root.error().message;
  EXPECT_EQ(root->depth, 3u);
  EXPECT_EQ(disk.read(*root), extents);
  extents[30'000].physical += 1;
  ExtentTree::Written one;
  root = tree.store(extents, disk.blocks(), &one);
  ASSERT_TRUE(root);
  EXPECT_EQ(one.leaves, 1u);
  EXPECT_EQ(one.index_blocks, 0u);
  EXPECT_EQ(disk.read(*root), extents);
  // Down to two leaves' worth (packed again, one index block), then to one leaf (no index).
  for (const size_t keep : {kLeafExtents + 10, kLeafExtents - 10}) {
    extents.resize(keep);
    root = tree.store(extents, disk.blocks());
    ASSERT_TRUE(root);
    EXPECT_EQ(root->depth, keep > kLeafExtents ? 2u : 1u);
    EXPECT_EQ(disk.read(*root), extents);
    EXPECT_EQ(blocks_of(tree), disk.in_use) << keep << " extents";
  }
}

// Random changes as a file sees them (copy on write moves blocks, writes fill holes,
// truncates and punched holes remove ranges, neighbours merge), each stored and read back.
TEST(ExtentTree, AnySequenceOfChangesReadsBackAsStored) {
  FakeBlocks disk;
  ExtentTree tree;
  std::mt19937_64 random(6);
  std::map<uint64_t, Extent> file;  // by first block
  for (const Extent& e : scattered(4000, 7)) file[e.logical] = e;
  uint64_t written_leaves = 0, rounds_with_few = 0;
  for (int round = 0; round < 300; ++round) {
    for (int change = 0; change < 1 + static_cast<int>(random() % 5); ++change) {
      const uint64_t b = random() % 10'000;
      switch (random() % 10) {
        case 0:
        case 1:
        case 2:
        case 3:  // copy on write of the extent at or after b
          if (auto it = file.lower_bound(b); it != file.end()) it->second.physical = random();
          break;
        case 4:
        case 5:
        case 6:  // a write into a hole
          if (auto after = file.upper_bound(b);
              after == file.begin() || std::prev(after)->second.logical_end() <= b) {
            file[b] = {b, random(), 1};
          }
          break;
        case 7:  // a range removed
          file.erase(file.lower_bound(b), file.lower_bound(b + random() % 10));
          break;
        default:  // two neighbours merge
          if (auto it = file.lower_bound(b); it != file.end() && std::next(it) != file.end()) {
            auto next = std::next(it);
            if (it->second.logical_end() <= next->first) {
              it->second.length = static_cast<uint32_t>(next->second.logical_end() - it->first);
              file.erase(next);
            }
          }
          break;
      }
    }
    std::vector<Extent> extents;
    for (const auto& [first, e] : file) extents.push_back(e);
    if (extents.size() <= kInlineExtents) {
      ++rounds_with_few;
      continue;
    }
    ExtentTree::Written written;
    auto root = tree.store(extents, disk.blocks(), &written);
    ASSERT_TRUE(root) << root.error().message;
    written_leaves += written.leaves;
    ASSERT_EQ(disk.read(*root), extents) << "round " << round;
    ASSERT_EQ(blocks_of(tree), disk.in_use) << "round " << round;
  }
  EXPECT_EQ(rounds_with_few, 0u) << "the file should keep needing a tree";
  // A few changes a round; rewriting the whole tree would write some 20 leaves each.
  EXPECT_LT(written_leaves, 300u * 20 / 2) << "stores should write only what changed";
}

}  // namespace
}  // namespace stripefs::fs

namespace stripefs::fs {
namespace {

// Through the filesystem: a file rewritten block by block under copy on write keeps an
// extent per block; an fsync after one more block writes a leaf or two, not the tree, and
// what it wrote reads back after a remount and after a crash.
TEST(ExtentTreeOnDisk, AnFsyncOfOneBlockWritesItsLeafAndTheFileReadsBackAfterACrash) {
  test::MemoryFs t;
  constexpr uint64_t kBlocks = 1024;
  const uint64_t ino = t.create(kRootInode, "f");
  std::vector<std::byte> model = test::pattern(kBlocks * kBlockSize, 1);
  ASSERT_TRUE(t.write(ino, 0, model));
  ASSERT_TRUE(t.fs->fsync(ino, false));
  // Every other block rewritten: each gets a block of its own, apart from its neighbours.
  for (uint64_t b = 0; b < kBlocks; b += 2) {
    const std::vector<std::byte> block = test::pattern(kBlockSize, 100 + b);
    std::copy(block.begin(), block.end(), model.begin() + static_cast<ptrdiff_t>(b * kBlockSize));
    ASSERT_TRUE(t.write(ino, b * kBlockSize, block));
  }
  ASSERT_TRUE(t.fs->fsync(ino, false));
  const uint64_t leaves = t.fs->stats().extent_leaves_written;
  ASSERT_GE(leaves, kBlocks / kLeafExtents) << "the file should have an extent tree by now";

  const std::vector<std::byte> one = test::pattern(kBlockSize, 7);
  std::copy(one.begin(), one.end(), model.begin() + 501 * kBlockSize);
  ASSERT_TRUE(t.write(ino, 501 * kBlockSize, one));
  ASSERT_TRUE(t.fs->fsync(ino, false));
  const FsStats after = t.fs->stats();
  EXPECT_GE(after.extent_leaves_written - leaves, 1u);
  EXPECT_LE(after.extent_leaves_written - leaves, 2u) << "one leaf changed (split at most)";

  t.crash_and_mount();
  EXPECT_EQ(t.read(ino, 0, model.size()), model) << "after a crash";
  t.remount();
  EXPECT_EQ(t.read(ino, 0, model.size()), model) << "after a remount";
  // Loaded from disk, the tree again writes only what changes.
  const std::vector<std::byte> two = test::pattern(kBlockSize, 8);
  std::copy(two.begin(), two.end(), model.begin() + 900 * kBlockSize);
  ASSERT_TRUE(t.write(ino, 900 * kBlockSize, two));
  ASSERT_TRUE(t.fs->fsync(ino, false));
  EXPECT_LE(t.fs->stats().extent_leaves_written, 2u);
  t.remount();
  EXPECT_EQ(t.read(ino, 0, model.size()), model);

  // The offline check agrees with what the commits left (the file's block count, every
  // tree block in use once); and again once the file fits in its inode.
  const auto checked = [&](const char* when) {
    ASSERT_TRUE(t.fs->unmount());
    t.fs.reset();
    CheckOptions options;
    options.force = true;
    auto report = check_filesystem(*t.volume, options);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->exit_code(), 0) << when;
    t.mount();
  };
  checked("with an extent tree");
  SetAttr shrink;
  shrink.size = 3 * kBlockSize;
  ASSERT_TRUE(t.fs->setattr(ino, shrink));
  ASSERT_TRUE(t.fs->fsync(ino, false));
  checked("with its extents back in the inode");
  model.resize(3 * kBlockSize);
  EXPECT_EQ(t.read(ino, 0, model.size()), model);
}

// What store_extents does: a plan that lists only the leaves the map's changes meet. After
// any sequence of changes the tree reads back as the map's full listing, and a store after
// one small change writes few leaves.
TEST(ExtentTree, ARangedStoreReadsBackAsTheWholeMap) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    FakeBlocks disk;
    ExtentTree tree;
    ExtentMapChanges changes(seed);
    ExtentMap& map = changes.map();
    // Enough scattered extents for a tree of many leaves.
    for (uint64_t b = 0; b < 6 * kLeafExtents; ++b) map.insert({2 * b, 5'000'000'000 + 7 * b, 1});
    const ExtentTree::Lister list = [&map](uint64_t from, uint64_t to) {
      return map.on_disk(from, to);
    };
    for (int round = 0; round < 150; ++round) {
      const int steps = static_cast<int>(changes.random() % 6);
      for (int i = 0; i < steps; ++i) changes.step();
      const std::vector<Extent> all = map.on_disk();
      if (all.size() <= kInlineExtents) {  // the filesystem keeps these in the inode
        tree.release_all(disk.blocks().release);
        map.stored();
        continue;
      }
      const bool had_tree = !tree.empty();
      const auto changed = had_tree ? map.changed() : std::nullopt;
      ExtentTree::Plan plan = tree.plan(list, changed);
      ASSERT_EQ(plan.extents, all.size()) << "seed " << seed << " round " << round;
      ExtentTree::Written written;
      auto root = tree.store(std::move(plan), disk.blocks(), &written);
      ASSERT_TRUE(root) << root.error().message;
      map.stored();
      ASSERT_EQ(disk.read(*root), all) << "seed " << seed << " round " << round;
      ASSERT_EQ(blocks_of(tree), disk.in_use) << "seed " << seed << " round " << round;
      if (had_tree && steps == 0) {
        EXPECT_EQ(written.leaves + written.index_blocks, 0u);
      }
    }
  }
}

TEST(ExtentTree, OneChangedBlockListsOneLeaf) {
  FakeBlocks disk;
  ExtentTree tree;
  ExtentMap map;
  for (uint64_t b = 0; b < 20 * kLeafExtents; ++b) map.insert({2 * b, 1'000'000 + 7 * b, 1});
  uint64_t listed = 0;
  const ExtentTree::Lister list = [&](uint64_t from, uint64_t to) {
    auto part = map.on_disk(from, to);
    listed += part.size();
    return part;
  };
  ASSERT_TRUE(tree.store(tree.plan(list, map.changed()), disk.blocks()));
  map.stored();
  EXPECT_EQ(listed, 20 * kLeafExtents) << "a new map's store lists everything";
  listed = 0;
  map.replace(2000, 1, 9'000'000);  // copy on write of one block, then its data written
  map.settle(2000, 2001, true);
  ExtentTree::Written written;
  auto root = tree.store(tree.plan(list, map.changed()), disk.blocks(), &written);
  ASSERT_TRUE(root);
  map.stored();
  EXPECT_LE(listed, 2 * kLeafExtents) << "the leaf holding block 2000 (and at most one beside it)";
  EXPECT_EQ(written.leaves, 1u);
  EXPECT_EQ(written.index_blocks, 0u);
  EXPECT_EQ(disk.read(*root), map.on_disk());
}

// A tree written unmerged (an older image, or fsck's rewrite): contiguous extents in two
// leaves, which on_disk() lists as one. Loaded, changed far from them, and stored by the
// plan store_extents makes, it still reads back as the map's full listing.
TEST(ExtentTree, ALoadedTreeWithUnmergedExtentsIsListedWholeAtItsFirstStore) {
  FakeBlocks disk;
  std::vector<Extent> extents = scattered(2 * kLeafExtents, 11);
  // The first leaf ends with [e, e + 5) and the second begins with its continuation.
  const uint64_t e = extents[kLeafExtents - 1].logical;
  extents[kLeafExtents - 1] = {e, 7'000'000, 1};
  extents.insert(extents.begin() + kLeafExtents, Extent{e + 1, 7'000'001, 1});
  ExtentTree::Root root;
  {
    ExtentTree writer;
    auto stored = writer.store(extents, disk.blocks());
    ASSERT_TRUE(stored);
    ASSERT_EQ(writer.leaf_count(), 3u);
    root = *stored;
  }
  ExtentTree tree;
  const std::vector<Extent> read = disk.read(root, &tree);
  ASSERT_EQ(read, extents);
  ExtentMap map;
  for (const Extent& x : read) map.add(MemExtent{x, false});
  map.loaded(read.size());
  EXPECT_FALSE(map.changed()) << "the disk holds apart what on_disk() merges";
  map.insert({2 * kLeafExtents * 2 + 100, 8'000'000, 1});  // far away, in the last leaf
  const ExtentTree::Lister list = [&map](uint64_t from, uint64_t to) {
    return map.on_disk(from, to);
  };
  auto stored = tree.store(tree.plan(list, map.changed()), disk.blocks());
  ASSERT_TRUE(stored) << stored.error().message;
  map.stored();
  EXPECT_EQ(disk.read(*stored), map.on_disk());

  // Loaded merged, the map's changes are known from the start.
  ExtentMap again;
  const std::vector<Extent> merged = disk.read(*stored);
  for (const Extent& x : merged) again.add(MemExtent{x, false});
  again.loaded(merged.size());
  ASSERT_TRUE(again.changed());
  EXPECT_TRUE(again.changed()->empty());
}

TEST(ExtentTree, NoExtentsIsRefusedAndWritesNothing) {
  FakeBlocks disk;
  ExtentTree tree;
  auto root = tree.store(std::vector<Extent>{}, disk.blocks());
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().code, EINVAL);
  EXPECT_TRUE(disk.in_use.empty());
  EXPECT_EQ(disk.images_written, 0u);
}

}  // namespace
}  // namespace stripefs::fs
