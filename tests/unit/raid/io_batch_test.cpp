#include "raid/io_batch.hpp"

#include <gtest/gtest.h>

#include "raid/aligned_buffer.hpp"

namespace stripefs {
namespace {

std::vector<MergedRequest> merge(std::vector<PlannedIo> ios, DeviceLimits limits,
                                 unsigned members = 2) {
  std::vector<const DeviceLimits*> table(members, &limits);
  return merge_ios(std::move(ios), table);
}

TEST(IoBatch, MergesContiguousNeighboursIntoOneRequest) {
  AlignedBuffer a(65536), b(65536);
  DeviceLimits limits;  // max_io 1 MiB
  // Out of order on purpose: sorted by offset first.
  auto out = merge({{0, 8192, b.data(), 8192, 1},
                    {0, 0, a.data(), 8192, 0},
                    {0, 16384, b.data() + 8192, 4096, 2}},
                   limits);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].offset, 0u);
  // a | b, b+8192 contiguous in memory: two iovecs, not three.
  ASSERT_EQ(out[0].iov.size(), 2u);
  EXPECT_EQ(out[0].iov[0].iov_base, a.data());
  EXPECT_EQ(out[0].iov[1].iov_len, 12288u);
  EXPECT_EQ(out[0].tags, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(IoBatch, KeepsMembersAndGapsApart) {
  AlignedBuffer a(65536);
  auto out =
      merge({{1, 0, a.data(), 4096, 0}, {0, 0, a.data(), 4096, 1}, {0, 8192, a.data(), 4096, 2}},
            DeviceLimits{});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].member, 0u);
  EXPECT_EQ(out[1].offset, 8192u);
  EXPECT_EQ(out[2].member, 1u);
}

// Requests never exceed max_io nor cross a multiple of it (rounded down to the optimal I/O
// size): they stay aligned to the device's limits, even when a single piece spans one.
TEST(IoBatch, CutsAtAlignedLimits) {
  AlignedBuffer big(1 << 20);
  DeviceLimits limits;
  limits.max_io = 100 * 1024;  // not a multiple of the optimal size
  limits.optimal_io = 16 * 1024;
  const uint64_t boundary = 96 * 1024;
  auto out = merge({{0, 4096, big.data(), 400 * 1024, 7}}, limits, 1);
  uint64_t expect_offset = 4096, total = 0;
  for (const auto& r : out) {
    uint64_t length = 0;
    for (const auto& v : r.iov) length += v.iov_len;
    EXPECT_EQ(r.offset, expect_offset);
    EXPECT_LE(length, boundary);
    EXPECT_EQ(r.offset / boundary, (r.offset + length - 1) / boundary);
    EXPECT_EQ(r.tags, std::vector<uint32_t>{7});
    expect_offset += length;
    total += length;
  }
  EXPECT_EQ(total, 400u * 1024);
  EXPECT_EQ(out.size(), 5u);  // 4K..96K, then 96K steps, then the tail
  EXPECT_EQ(out[1].offset, boundary);
}

TEST(IoBatch, ReportsFailuresByTag) {
  struct Failing : Member {
    Failing() : Member("failing", 1 << 20, {}) {}
    void submit(MemberRequest r) override { r.done(-EIO); }
  } failing;
  AlignedBuffer a(8192);
  std::vector<Member*> members{&failing};
  std::vector<FailedIo> seen;
  submit_ios(members, MemberOp::write,
             {{0, 0, a.data(), 4096, 3}, {0, 4096, a.data() + 4096, 4096, 4}}, false,
             [&](std::vector<FailedIo> f) { seen = std::move(f); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].tag, 3u);
  EXPECT_EQ(seen[1].tag, 4u);
  EXPECT_EQ(seen[0].error, EIO);
}

}  // namespace
}  // namespace stripefs
