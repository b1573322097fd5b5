#include "fs/core/space_ops.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

namespace stripefs::fs {
namespace {

constexpr uint64_t kB = kBlockSize;

// A file of 10 blocks: cached [1,2), written [4,6), unwritten [6,8), pending [8,9).
struct Sparse {
  FileCache cache;
  ExtentMap extents;
  uint64_t size = 10 * kB;
  Sparse() {
    cache.insert(1 * kB, kB, std::make_shared<AlignedBuffer>(kB), 0, 1);
    extents.insert(Extent{4, 100, 2, false});
    extents.insert(Extent{6, 200, 2, true});
    extents.add(MemExtent{Extent{8, 300, 1, false}, true});
  }
  uint64_t seek(uint64_t offset, int whence) {
    auto r = seek_data_or_hole(cache, extents, size, offset, whence);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : UINT64_MAX;
  }
};

TEST(SeekDataOrHole, WalksCachedWrittenUnwrittenAndPendingBlocks) {
  Sparse f;
  EXPECT_EQ(f.seek(0, SEEK_DATA), 1 * kB) << "cached data";
  EXPECT_EQ(f.seek(1 * kB + 5, SEEK_DATA), 1 * kB + 5) << "inside data: the offset itself";
  EXPECT_EQ(f.seek(1 * kB, SEEK_HOLE), 2 * kB);
  EXPECT_EQ(f.seek(2 * kB, SEEK_DATA), 4 * kB) << "a written extent";
  EXPECT_EQ(f.seek(4 * kB, SEEK_HOLE), 6 * kB) << "unwritten extents read as zeros";
  EXPECT_EQ(f.seek(6 * kB, SEEK_DATA), 8 * kB) << "pending: data on its way to disk";
  EXPECT_EQ(f.seek(8 * kB, SEEK_HOLE), 9 * kB);
  EXPECT_EQ(f.seek(0, SEEK_HOLE), 0u);
  auto none = seek_data_or_hole(f.cache, f.extents, f.size, 9 * kB, SEEK_DATA);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ENXIO);
  auto past = seek_data_or_hole(f.cache, f.extents, f.size, f.size, SEEK_HOLE);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, ENXIO);
}

// The end of the file is a hole, also inside its last block.
TEST(SeekDataOrHole, TheEndIsAHole) {
  FileCache cache;
  ExtentMap extents;
  extents.insert(Extent{0, 100, 3, false});
  EXPECT_EQ(*seek_data_or_hole(cache, extents, 2 * kB + 100, 0, SEEK_HOLE), 2 * kB + 100);
  EXPECT_EQ(*seek_data_or_hole(cache, extents, 2 * kB + 100, 2 * kB, SEEK_DATA), 2 * kB);
}

}  // namespace
}  // namespace stripefs::fs
