// The block and inode allocator alone, over bitmap blocks in a MetaStore.
#include "fs/core/allocator.hpp"

#include <gtest/gtest.h>

#include "unit/fs/core/meta_test_util.hpp"

namespace stripefs::fs {
namespace {

constexpr uint64_t kStart = test::MetaFixture::kFirstFree;  // the bitmap's first block
constexpr uint64_t kBlocks = 2;
constexpr uint64_t kItems = kBitsPerBitmapBlock + 1000;  // the second block is partly used

struct Bitmap {
  test::MetaFixture fixture;
  Bitmap(uint64_t used_items = 0) {
    for (uint64_t b = 0; b < kBlocks; ++b) {
      auto block = fixture.meta->fresh(kStart + b);
      for (uint64_t i = 0; i < kBitsPerBitmapBlock; ++i) {
        const uint64_t item = b * kBitsPerBitmapBlock + i;
        if (item < used_items) block[kHeaderSize + i / 8] |= std::byte(1u << (i % 8));
      }
      seal_block(block, BlockKind::bitmap, kStart + b);
    }
    fixture.commit_and_checkpoint();
  }
  BitmapAllocator loaded() {
    BitmapAllocator a(kStart, kBlocks, kItems);
    auto r = a.load(*fixture.meta);
    EXPECT_TRUE(r) << r.error().message;
    return a;
  }
};

TEST(BitmapAllocator, LoadsWhatIsInUseAndVerifiesEveryBlock) {
  Bitmap bitmap(100);
  BitmapAllocator a = bitmap.loaded();
  EXPECT_EQ(a.free_count(), kItems - 100);
  EXPECT_TRUE(a.busy(99));
  EXPECT_FALSE(a.busy(100));
  // A damaged bitmap block is refused, naming it.
  bitmap.fixture.meta->modify(kStart + 1)[100] ^= std::byte{1};
  BitmapAllocator damaged(kStart, kBlocks, kItems);
  auto r = damaged.load(*bitmap.fixture.meta);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(std::to_string(kStart + 1)), std::string::npos)
      << r.error().message;
}

// The goal first (a file growing in place), then a run aligned for a stripe, else the
// longest run there is.
TEST(BitmapAllocator, PrefersTheGoalThenAlignedRunsThenTheLongest) {
  Bitmap bitmap(10);
  BitmapAllocator a = bitmap.loaded();
  auto at_goal = a.reserve(5, 500, 1);
  ASSERT_TRUE(at_goal);
  EXPECT_EQ(*at_goal, (std::pair<uint64_t, uint64_t>{500, 5}));
  auto aligned = a.reserve(64, 0, 64);
  ASSERT_TRUE(aligned);
  EXPECT_EQ(aligned->first % 64, 0u);
  EXPECT_EQ(aligned->second, 64u);
  // Fill all but scattered single items: the longest run (1) is what a large request gets.
  BitmapAllocator full(kStart, kBlocks, kItems);
  ASSERT_TRUE(full.load(*bitmap.fixture.meta));
  for (uint64_t i = 0; i < kItems; i += 2) (void)full.reserve(1, i, 1);
  auto longest = full.reserve(100, 0, 1);
  ASSERT_TRUE(longest);
  EXPECT_EQ(longest->second, 1u);
}

// A freed item is cleared on disk at once but reused only once a checkpoint covers the
// transaction that freed it (until then replay could bring its old owner back).
TEST(BitmapAllocator, FreesAreReusedOnlyAfterTheirCheckpoint) {
  Bitmap bitmap;
  BitmapAllocator a = bitmap.loaded();
  MetaStore& meta = *bitmap.fixture.meta;
  auto got = a.reserve(kItems, 0, 1);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->second, kItems);
  a.mark_used(meta, 0, kItems);
  EXPECT_EQ(a.free_count(), 0u);
  const uint64_t freeing = meta.running();
  a.release(meta, 10, 5);
  EXPECT_EQ(a.deferred_count(), 5u);
  EXPECT_FALSE(a.reserve(1, 10, 1)) << "not reusable before the checkpoint";
  a.checkpointed(freeing - 1);
  EXPECT_FALSE(a.reserve(1, 10, 1));
  a.checkpointed(freeing);
  EXPECT_EQ(a.deferred_count(), 0u);
  auto again = a.reserve(5, 10, 1);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, (std::pair<uint64_t, uint64_t>{10, 5}));
  // On disk the bits were cleared when freed, and set again only by mark_used.
  bitmap.fixture.commit_and_checkpoint();
  BitmapAllocator reloaded(kStart, kBlocks, kItems);
  ASSERT_TRUE(reloaded.load(meta));
  EXPECT_EQ(reloaded.free_count(), 5u);
  EXPECT_FALSE(reloaded.busy(12));
}

TEST(BitmapAllocator, UnreserveGivesBackAtOnce) {
  Bitmap bitmap;
  BitmapAllocator a = bitmap.loaded();
  auto got = a.reserve(8, 100, 1);
  ASSERT_TRUE(got);
  EXPECT_EQ(a.free_count(), kItems - 8);
  a.unreserve(100, 8);
  EXPECT_EQ(a.free_count(), kItems);
  EXPECT_EQ(*a.reserve(8, 100, 1), (std::pair<uint64_t, uint64_t>{100, 8}));
}

}  // namespace
}  // namespace stripefs::fs
