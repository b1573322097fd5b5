// The request shapes stripefsctl iostat reports: size buckets, alignment, merges, and that a
// request is counted once, on the device the array sent it to.
#include "raid/member_shape.hpp"

#include <gtest/gtest.h>

#include "raid/aligned_buffer.hpp"
#include "raid/faulty_member.hpp"
#include "raid/io_batch.hpp"
#include "raid/memory_member.hpp"

namespace stripefs {
namespace {

TEST(MemberShape, SizeBucketsArePowersOfTwoFrom4KTo1MAndAbove) {
  EXPECT_EQ(size_bucket(1), 0u);
  EXPECT_EQ(size_bucket(512), 0u);
  EXPECT_EQ(size_bucket(4096), 0u);
  EXPECT_EQ(size_bucket(4097), 1u);
  EXPECT_EQ(size_bucket(8192), 1u);
  EXPECT_EQ(size_bucket(65536), 4u);
  EXPECT_EQ(size_bucket(65537), 5u);
  EXPECT_EQ(size_bucket(1 << 20), 8u);
  EXPECT_EQ(size_bucket((1 << 20) + 1), 9u);
  EXPECT_EQ(size_bucket(uint64_t{1} << 40), 9u);
  EXPECT_STREQ(size_bucket_name(0), "4K");
  EXPECT_STREQ(size_bucket_name(4), "64K");
  EXPECT_STREQ(size_bucket_name(8), "1M");
  EXPECT_STREQ(size_bucket_name(9), ">1M");
}

TEST(MemberShape, AlignmentAgainstTheUnit) {
  constexpr uint64_t kUnit = 64 * 1024;
  EXPECT_EQ(alignment_of(0, kUnit, kUnit), Alignment::aligned);
  EXPECT_EQ(alignment_of(3 * kUnit, 2 * kUnit, kUnit), Alignment::aligned);
  EXPECT_EQ(alignment_of(4096, 4096, kUnit), Alignment::within);
  EXPECT_EQ(alignment_of(0, 4096, kUnit), Alignment::within);
  // Ends one block past a boundary, or starts off one and crosses it.
  EXPECT_EQ(alignment_of(0, kUnit + 4096, kUnit), Alignment::straddling);
  EXPECT_EQ(alignment_of(kUnit - 4096, 8192, kUnit), Alignment::straddling);
  EXPECT_EQ(alignment_of(4096, kUnit, kUnit), Alignment::straddling);
  // Ends exactly on the boundary without starting on one: within.
  EXPECT_EQ(alignment_of(kUnit - 4096, 4096, kUnit), Alignment::within);
}

TEST(MemberShape, CountersAddUpPerDirection) {
  MemberShapeCounters counters;
  counters.note(MemberOp::read, 0, 4096, 1, false, 4096);
  counters.note(MemberOp::read, 8192, 8192, 2, false, 4096);
  counters.note(MemberOp::write, 0, 1 << 20, 3, true, 65536);
  counters.note(MemberOp::write, 4096, 65536, 1, false, 65536);
  counters.note(MemberOp::flush, 0, 0, 1, false, 4096);
  const MemberShape s = counters.snapshot();
  EXPECT_EQ(s.read.requests, 2u);
  EXPECT_EQ(s.read.bytes, 12288u);
  EXPECT_EQ(s.read.sizes[0], 1u);
  EXPECT_EQ(s.read.sizes[1], 1u);
  EXPECT_EQ(s.read.merged, 1u);
  EXPECT_EQ(s.read.merged_ios, 2u);
  EXPECT_EQ(s.read.aligned, 2u);
  EXPECT_EQ(s.write.requests, 2u);
  EXPECT_EQ(s.write.sizes[8], 1u);
  EXPECT_EQ(s.write.sizes[4], 1u);
  EXPECT_EQ(s.write.merged, 1u);
  EXPECT_EQ(s.write.merged_ios, 3u);
  EXPECT_EQ(s.write.aligned, 1u);
  EXPECT_EQ(s.write.straddling, 1u);
  EXPECT_EQ(s.fua_writes, 1u);
  EXPECT_EQ(s.flushes, 1u);
}

TEST(MemberShape, SubmitIosCountsMergedRequestsOnTheDeviceItWasSentTo) {
  MemoryMember inner("inner", 8 << 20);
  FaultyMember outer(inner);  // a wrapper: passes requests on with submit()
  Member* members[] = {&outer};
  AlignedBuffer a(4096), b(4096), c(4096);
  // Two contiguous I/Os merge into one 8 KiB request; the third stands apart. One tag for
  // all, as the Volume plans a full stripe's writes.
  std::vector<PlannedIo> ios = {{0, 1 << 20, a.data(), 4096, 0},
                                {0, (1 << 20) + 4096, b.data(), 4096, 0},
                                {0, 2 << 20, c.data(), 4096, 0}};
  auto failed = submit_ios_async(members, MemberOp::write, std::move(ios)).get();
  EXPECT_TRUE(failed.empty());
  const MemberShape s = outer.shape();
  EXPECT_EQ(s.write.requests, 2u);
  EXPECT_EQ(s.write.merged, 1u);
  EXPECT_EQ(s.write.merged_ios, 2u);
  EXPECT_EQ(s.write.sizes[0], 1u);
  EXPECT_EQ(s.write.sizes[1], 1u);
  // Counted once: not again on the device the wrapper passed them to.
  EXPECT_EQ(inner.shape().write.requests, 0u);
  // The blocking helpers count too.
  ASSERT_TRUE(member_flush(outer));
  EXPECT_EQ(outer.shape().flushes, 1u);
}

}  // namespace
}  // namespace stripefs
