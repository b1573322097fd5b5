// Planning a writeback from a file's cache and block map alone: no Filesystem, no Volume.
#include "fs/core/writeback_plan.hpp"

#include <gtest/gtest.h>

#include <set>

namespace stripefs::fs {
namespace {

constexpr uint64_t kB = kBlockSize;
constexpr uint64_t kStripe = 4;  // blocks

// Free volume blocks from 1000 on, as a set; records what it was asked.
struct FakeSpace {
  std::set<uint64_t> used;
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> asked;  // want, goal, align
  bool broken = false;
  WritebackSpace space(uint64_t max_run = UINT64_MAX) {
    return {[this](uint64_t want, uint64_t goal,
                   uint64_t align) -> Result<std::pair<uint64_t, uint64_t>> {
              asked.emplace_back(want, goal, align);
              if (broken) return fail(ENOSPC, "full");
              uint64_t first = goal;
              if (first == 0 || used.contains(first)) {
                first = 1000;
                while (first % align != 0 || used.contains(first)) ++first;
              }
              uint64_t n = 0;
              while (n < want && !used.contains(first + n)) used.insert(first + n++);
              return std::pair{first, n};
            },
            kStripe, max_run};
  }
};

struct File {
  FileCache cache;
  ExtentMap extents;
  IntervalSet inflight, delalloc;
  void write(uint64_t block, uint64_t blocks) {
    cache.insert(block * kB, blocks * kB, std::make_shared<AlignedBuffer>(blocks * kB), 0, 1);
    extents.for_each_hole(block, block + blocks,
                          [&](uint64_t a, uint64_t b) { delalloc.add(a, b); });
  }
  WritebackPlan plan(FakeSpace& space, uint64_t offset = 0, uint64_t end = UINT64_MAX,
                     uint64_t max_run = UINT64_MAX) {
    return plan_writeback(9, 77, offset, end, cache, extents, inflight, delalloc,
                          space.space(max_run));
  }
};

uint64_t piece_blocks(const WritebackJob& job) {
  uint64_t n = 0;
  for (const VolumePiece& p : job.pieces) n += p.data.size() / kB;
  return n;
}

TEST(WritebackPlan, EveryDirtyBlockOnceFromFreshStripeAlignedBlocks) {
  File f;
  f.write(0, 12);
  FakeSpace space;
  WritebackPlan plan = f.plan(space);
  ASSERT_TRUE(plan.job);
  const WritebackJob& job = *plan.job;
  EXPECT_EQ(job.id, 9u);
  EXPECT_EQ(job.ino, 77u);
  EXPECT_EQ(job.bytes, 12 * kB);
  EXPECT_EQ(piece_blocks(job), 12u);
  EXPECT_EQ(job.pieces.front().offset % (kStripe * kB), 0u) << "file block 0 starts a stripe";
  for (size_t i = 1; i < job.pieces.size(); ++i) {
    EXPECT_LT(job.pieces[i - 1].offset, job.pieces[i].offset) << "sorted";
  }
  EXPECT_EQ(job.allocated, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 12}}));
  EXPECT_EQ(plan.promised_released, 12u);
  EXPECT_TRUE(f.delalloc.empty());
  EXPECT_EQ(f.inflight.count(0, 12), 12u);
  EXPECT_EQ(f.cache.dirty_bytes(), 0u) << "frozen";
  ASSERT_EQ(f.extents.size(), 1u);
  EXPECT_TRUE(f.extents.begin()->second.pending) << "left out of commits until written";
  EXPECT_TRUE(f.extents.on_disk().empty());
  EXPECT_FALSE(plan.deferred);
  EXPECT_FALSE(plan.failed);
}

TEST(WritebackPlan, MappedBlocksKeepTheirPlaceAndUnwrittenOnesAreConverted) {
  File f;
  f.extents.insert(Extent{0, 500, 4, false});
  f.extents.insert(Extent{4, 504, 4, true});
  f.write(2, 8);  // [2,4) written extent, [4,8) unwritten, [8,10) a hole
  FakeSpace space;
  WritebackPlan plan = f.plan(space);
  ASSERT_TRUE(plan.job);
  EXPECT_EQ(plan.job->pieces.front().offset, 502 * kB);
  EXPECT_EQ(plan.job->converted, (std::vector<std::pair<uint64_t, uint64_t>>{{4, 8}}));
  EXPECT_EQ(plan.job->allocated, (std::vector<std::pair<uint64_t, uint64_t>>{{8, 10}}));
  ASSERT_EQ(space.asked.size(), 1u);
  EXPECT_EQ(std::get<1>(space.asked[0]), 508u) << "the goal continues the previous extent";
  EXPECT_EQ(plan.promised_released, 2u) << "only the hole was promised";
}

// Two jobs for one block could land in either order: newer data over blocks still in flight
// waits for that job.
TEST(WritebackPlan, RangesOverBlocksInFlightWait) {
  File f;
  f.write(0, 4);
  f.write(8, 4);
  f.inflight.add(9, 10);
  FakeSpace space;
  WritebackPlan plan = f.plan(space);
  ASSERT_TRUE(plan.job);
  EXPECT_TRUE(plan.deferred);
  EXPECT_EQ(plan.job->blocks, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 4}}));
  EXPECT_EQ(f.cache.dirty_bytes(), 4 * kB) << "the waiting range stays dirty";
}

TEST(WritebackPlan, TakesExactlyItsRangeAndCapsEachAllocation) {
  File f;
  f.write(0, 16);
  FakeSpace space;
  WritebackPlan plan = f.plan(space, 4 * kB, 12 * kB, /*max_run=*/3);
  ASSERT_TRUE(plan.job);
  EXPECT_EQ(plan.job->bytes, 8 * kB);
  EXPECT_EQ(f.cache.dirty_bytes(), 8 * kB);
  for (const auto& [want, goal, align] : space.asked) EXPECT_LE(want, 3u);
  EXPECT_EQ(piece_blocks(*plan.job), 8u);
}

TEST(WritebackPlan, AnAllocationThatFailsIsReported) {
  File f;
  f.write(0, 4);
  FakeSpace space;
  space.broken = true;
  WritebackPlan plan = f.plan(space);
  ASSERT_TRUE(plan.failed);
  EXPECT_EQ(plan.failed->code, ENOSPC);
  EXPECT_NE(plan.failed->message.find("inode 77"), std::string::npos);
  EXPECT_FALSE(plan.job) << "nothing to write";
}

// Copy on write: dirty data over written blocks gets new blocks, pending and replacing the
// old; an unwritten extent is written in place.
TEST(WritebackPlan, CopyOnWriteGivesWrittenBlocksNewOnes) {
  File f;
  f.extents.insert(Extent{0, 500, 8, false});
  f.extents.insert(Extent{8, 700, 4, true});
  f.write(2, 8);  // over blocks 2..7 (written) and 8..9 (unwritten)
  FakeSpace space;
  for (uint64_t b = 500; b < 508; ++b) space.used.insert(b);  // the file's blocks
  for (uint64_t b = 700; b < 704; ++b) space.used.insert(b);
  WritebackSpace cow = space.space();
  cow.copy_on_write = true;
  WritebackPlan plan =
      plan_writeback(9, 77, 0, UINT64_MAX, f.cache, f.extents, f.inflight, f.delalloc, cow);
  ASSERT_TRUE(plan.job);
  EXPECT_EQ(plan.job->allocated, (std::vector<std::pair<uint64_t, uint64_t>>{{2, 8}}));
  EXPECT_EQ(plan.job->converted, (std::vector<std::pair<uint64_t, uint64_t>>{{8, 10}}));
  const ExtentMap::At at = f.extents.at(2);
  ASSERT_NE(at.extent, nullptr);
  EXPECT_TRUE(at.extent->pending);
  EXPECT_EQ(at.extent->replaces, 502u);
  EXPECT_NE(f.extents.map(2), 502u) << "written in place";
  EXPECT_EQ(f.extents.map(8), 700u) << "an unwritten block moved";
  EXPECT_EQ(f.extents.on_disk(), (std::vector<Extent>{{0, 500, 8, false}, {8, 700, 4, true}}))
      << "commits keep the old blocks meanwhile";
}

// A job stops taking ranges once it replaces max_replaced runs: the frees its completion
// makes must fit one transaction. The rest waits (deferred) for the next job.
TEST(WritebackPlan, CopyOnWriteReplacesAtMostMaxReplacedRunsPerJob) {
  File f;
  for (uint64_t e = 0; e < 4; ++e) f.extents.insert(Extent{e * 10, 500 + e * 100, 4, false});
  for (uint64_t e = 0; e < 4; ++e) f.write(e * 10, 2);  // four ranges, four separate runs
  FakeSpace space;
  WritebackSpace cow = space.space();
  cow.copy_on_write = true;
  cow.max_replaced = 2;
  WritebackPlan plan =
      plan_writeback(9, 77, 0, UINT64_MAX, f.cache, f.extents, f.inflight, f.delalloc, cow);
  ASSERT_TRUE(plan.job);
  EXPECT_EQ(plan.job->allocated.size(), 2u);
  EXPECT_TRUE(plan.deferred);
  EXPECT_EQ(f.cache.dirty_bytes(), 4 * kB) << "two ranges left dirty for the next job";
}

}  // namespace
}  // namespace stripefs::fs
