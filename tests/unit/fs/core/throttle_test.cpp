// Writers over the cache's size wait (Filesystem::throttle): what they leave behind must
// still reach the members in whole stripes.
#include <gtest/gtest.h>

#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

// Mounted again with a 2 MiB cache, over members whose writes take 20 ms (slower than the
// writer: the cache fills, and the writers wait).
void small_cache_slow_members(MemoryFs& t) {
  ASSERT_TRUE(t.fs->unmount().has_value());
  t.fs.reset();
  fs::FsOptions small;
  small.cache_bytes = 2ull << 20;
  t.mount(small);
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(20));
}

// Four streams of 1 MiB writes, interleaved, through a 2 MiB cache, over members slower
// than the writer: the writers wait at almost every write. A 1 MiB write is 5 whole stripes
// and a third (48-block stripes), so each stream keeps a partial stripe at its end that its
// next write completes. Forcing those tails out while writebacks were in flight wrote them
// as partial stripes (prereads, the write-hole log): 56 of the 64 MiB went whole.
TEST(Throttle, InterleavedStreamsOverASmallCacheStayWholeStripes) {
  MemoryFs t(128ull << 20);
  ASSERT_NO_FATAL_FAILURE(small_cache_slow_members(t));
  std::vector<uint64_t> files;
  for (int s = 0; s < 4; ++s) files.push_back(t.create(fs::kRootInode, "s" + std::to_string(s)));
  const VolumeStats before = t.volume->stats();
  std::vector<std::vector<std::byte>> chunks;
  for (int c = 0; c < 64; ++c) chunks.push_back(pattern(1 << 20, c));
  for (int i = 0; i < 16; ++i) {
    for (int s = 0; s < 4; ++s) {
      ASSERT_TRUE(t.write(files[s], uint64_t(i) << 20, chunks[16 * s + i]).has_value());
    }
  }
  for (uint64_t f : files) ASSERT_TRUE(t.fs->fsync(f, false).has_value());
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(0));
  const VolumeStats after = t.volume->stats();
  const uint64_t full = after.full_stripe_bytes - before.full_stripe_bytes;
  const uint64_t partial = after.partial_stripe_bytes - before.partial_stripe_bytes;
  // 64 MiB of data; each stream's last partial stripe (64 KiB) and the commits' metadata
  // may go as partial stripes.
  EXPECT_GE(full, 62ull << 20) << "partial " << partial;
  EXPECT_LT(partial, 2ull << 20) << "full " << full;
  for (int s = 0; s < 4; ++s) {
    for (int i : {0, 7, 15}) {
      EXPECT_EQ(t.read(files[s], uint64_t(i) << 20, 1 << 20), pattern(1 << 20, 16 * s + i))
          << "stream " << s << " MiB " << i;
    }
  }
}

// Files under a stripe each, more of them than the cache holds, beside a stream: each is
// its file's last partial stripe, which the throttle may keep back while writebacks are in
// flight. The writers must still go on, sync must finish, and everything must read back.
// (It guards against a hang or a loss; it does not tell when the small files went.)
TEST(Throttle, SmallFilesOverTheCacheBesideAStreamAllGoOut) {
  MemoryFs t(128ull << 20);
  ASSERT_NO_FATAL_FAILURE(small_cache_slow_members(t));
  const uint64_t stream = t.create(fs::kRootInode, "stream");
  std::vector<uint64_t> files;
  const auto chunk = pattern(1 << 20, 1);
  const auto piece = pattern(100 << 10, 2);  // 25 blocks: about half a 48-block stripe
  for (int i = 0; i < 64; ++i) {
    if (i % 8 == 0) {
      ASSERT_TRUE(t.write(stream, uint64_t(i / 8) << 20, chunk).has_value());
    }
    files.push_back(t.create(fs::kRootInode, "small" + std::to_string(i)));
    ASSERT_TRUE(t.write(files.back(), 0, piece).has_value()) << i;
  }
  ASSERT_TRUE(t.fs->sync().has_value());
  for (auto& m : t.array.faulty) m->set_latency(std::chrono::milliseconds(0));
  t.remount();
  for (uint64_t f : files) {
    EXPECT_EQ(t.read(f, 0, piece.size()), piece);
  }
  EXPECT_EQ(t.read(stream, 7ull << 20, 1 << 20), chunk);
}

}  // namespace
}  // namespace stripefs::test
