#include "fs/core/file_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

namespace stripefs::fs {
namespace {

constexpr uint64_t kB = 4096;

// A buffer of `blocks` blocks, each filled with its tag + block index.
std::shared_ptr<AlignedBuffer> buffer_of(uint64_t blocks, uint8_t tag) {
  auto b = std::make_shared<AlignedBuffer>(blocks * kB);
  for (uint64_t i = 0; i < blocks; ++i) std::memset(b->data() + i * kB, tag + i, kB);
  return b;
}

uint8_t first_byte(const CachedRange& r, uint64_t into) {
  return std::to_integer<uint8_t>(r.buffer->data()[r.buffer_offset + into]);
}

TEST(FileCache, NewDataReplacesWhatItCoversAndCountsDirtyBytes) {
  FileCache cache;
  EXPECT_TRUE(cache.insert(0, 8 * kB, buffer_of(8, 0), 0, 1).empty());
  EXPECT_EQ(cache.dirty_bytes(), 8 * kB);
  auto replaced = cache.insert(2 * kB, 2 * kB, buffer_of(2, 100), 0, 2);
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(replaced[0], (ByteRun{2 * kB, 4 * kB}));
  EXPECT_EQ(cache.dirty_bytes(), 8 * kB);
  EXPECT_EQ(cache.ranges(), 3u) << "head, the new range, tail";
  // The tail still points into the first buffer, past the cut.
  auto tail = cache.covering(5 * kB, kB);
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->first, 4 * kB);
  EXPECT_EQ(first_byte(*tail->second, kB), 5);
  auto mid = cache.covering(2 * kB, 2 * kB);
  ASSERT_TRUE(mid);
  EXPECT_EQ(first_byte(*mid->second, 0), 100);
  EXPECT_FALSE(cache.covering(3 * kB, 2 * kB)) << "no single range holds it";
  EXPECT_EQ(cache.end(), 8 * kB);
}

// Stable pages: a frozen range (in flight) is never changed; newer data lands beside it, and
// the job's completion takes only its own ranges out.
TEST(FileCache, FrozenRangesAreNeverModifiedAndLeaveWithTheirJob) {
  FileCache cache;
  auto old = buffer_of(4, 10);
  cache.insert(0, 4 * kB, old, 0, 1);
  const uint64_t frozen = cache.freeze(
      0, UINT64_MAX, 7, [](uint64_t, const CachedRange&) { return FileCache::Freeze::take; });
  EXPECT_EQ(frozen, 4 * kB);
  EXPECT_EQ(cache.dirty_bytes(), 0u);
  // Newer data over the middle: a new buffer; the frozen one keeps its bytes.
  auto replaced = cache.insert(kB, kB, buffer_of(1, 200), 0, 2);
  EXPECT_TRUE(replaced.empty()) << "frozen bytes are not dirty bytes";
  EXPECT_EQ(cache.dirty_bytes(), kB);
  EXPECT_EQ(std::to_integer<uint8_t>(old->data()[kB]), 11) << "the frozen buffer is unchanged";
  EXPECT_EQ(cache.release_job(7, 0, UINT64_MAX), 2u) << "the two frozen pieces around it";
  ASSERT_EQ(cache.ranges(), 1u);
  auto left = cache.covering(kB, kB);
  ASSERT_TRUE(left);
  EXPECT_EQ(first_byte(*left->second, 0), 200);
  EXPECT_FALSE(left->second->in_flight);
}

TEST(FileCache, DropReturnsOnlyDirtyRuns) {
  FileCache cache;
  cache.insert(0, 4 * kB, buffer_of(4, 0), 0, 1);
  cache.insert(4 * kB, 4 * kB, buffer_of(4, 50), 0, 1);
  cache.freeze(4 * kB, 8 * kB, 3,
               [](uint64_t, const CachedRange&) { return FileCache::Freeze::take; });
  auto dropped = cache.drop(2 * kB, 6 * kB);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], (ByteRun{2 * kB, 4 * kB}));
  EXPECT_EQ(cache.dirty_bytes(), 2 * kB);
  EXPECT_EQ(cache.ranges(), 2u);
  EXPECT_EQ(cache.range_after(3 * kB), (ByteRun{6 * kB, 8 * kB}));
  EXPECT_EQ(cache.range_after(kB), (ByteRun{0, 2 * kB}));
  EXPECT_FALSE(cache.range_after(8 * kB));
}

TEST(FileCache, FreezeTakesExactlyItsRangeAndHonoursSkipAndStop) {
  FileCache cache;
  for (uint64_t i = 0; i < 4; ++i) cache.insert(i * 4 * kB, 4 * kB, buffer_of(4, 0), 0, 1);
  std::vector<uint64_t> shown;
  const uint64_t frozen =
      cache.freeze(2 * kB, 14 * kB, 1, [&](uint64_t start, const CachedRange& r) {
        shown.push_back(start);
        if (start == 4 * kB) return FileCache::Freeze::skip;
        if (start == 12 * kB) return FileCache::Freeze::stop;
        EXPECT_LE(start + r.length, 14 * kB);
        return FileCache::Freeze::take;
      });
  EXPECT_EQ(shown, (std::vector<uint64_t>{2 * kB, 4 * kB, 8 * kB, 12 * kB}));
  EXPECT_EQ(frozen, 2 * kB + 4 * kB) << "[2K,4K) and [8K,12K)";
  EXPECT_EQ(cache.dirty_bytes(), 16 * kB - frozen);
  // Frozen ranges are not shown again.
  shown.clear();
  cache.freeze(0, UINT64_MAX, 2, [&](uint64_t start, const CachedRange&) {
    shown.push_back(start);
    return FileCache::Freeze::skip;
  });
  EXPECT_EQ(shown, (std::vector<uint64_t>{0, 4 * kB, 12 * kB, 14 * kB}));
}

TEST(FileCache, SplitCoversTheRangeInOrder) {
  FileCache cache;
  cache.insert(2 * kB, 2 * kB, buffer_of(2, 0), 0, 1);
  cache.insert(6 * kB, 2 * kB, buffer_of(2, 0), 0, 1);
  std::vector<std::tuple<char, uint64_t, uint64_t>> parts;
  cache.split(
      3 * kB, 10 * kB,
      [&](uint64_t start, uint64_t length, const CachedRange&, uint64_t into) {
        parts.emplace_back('c', start, length);
        if (start == 3 * kB) {
          EXPECT_EQ(into, kB);
        }
      },
      [&](uint64_t first, uint64_t end) { parts.emplace_back('u', first, end - first); });
  const std::vector<std::tuple<char, uint64_t, uint64_t>> want{
      {'c', 3 * kB, kB}, {'u', 4 * kB, 2 * kB}, {'c', 6 * kB, 2 * kB}, {'u', 8 * kB, 2 * kB}};
  EXPECT_EQ(parts, want);
}

// Streaming writes: the touching dirty ranges around the newest one, up to two stripes back.
TEST(FileCache, DirtyRunAroundStopsAtFrozenRangesAndLookback) {
  FileCache cache;
  for (uint64_t i = 0; i < 6; ++i) cache.insert(i * 4 * kB, 4 * kB, buffer_of(4, 0), 0, 1);
  EXPECT_EQ(cache.dirty_run_around(12 * kB, 16 * kB, 100 * kB), (ByteRun{0, 24 * kB}));
  EXPECT_EQ(cache.dirty_run_around(12 * kB, 16 * kB, 8 * kB), (ByteRun{4 * kB, 24 * kB}));
  cache.freeze(4 * kB, 8 * kB, 1,
               [](uint64_t, const CachedRange&) { return FileCache::Freeze::take; });
  EXPECT_EQ(cache.dirty_run_around(12 * kB, 16 * kB, 100 * kB), (ByteRun{8 * kB, 24 * kB}));
  EXPECT_FALSE(cache.dirty_run_around(13 * kB, 16 * kB, 0)) << "no range starts there";
}

TEST(FileCache, OldestDirtyIgnoresFrozenRanges) {
  FileCache cache;
  EXPECT_FALSE(cache.oldest_dirty());
  cache.insert(0, kB, buffer_of(1, 0), 0, 50);
  cache.insert(kB, kB, buffer_of(1, 0), 0, 70);
  EXPECT_EQ(cache.oldest_dirty(), 50u);
  cache.freeze(0, kB, 1, [](uint64_t, const CachedRange&) { return FileCache::Freeze::take; });
  EXPECT_EQ(cache.oldest_dirty(), 70u);
}

// Against a model of every block: random inserts, drops, freezes (taking or skipping what
// they are shown) and job completions, then the cache must show exactly the model's newest
// bytes, count its dirty blocks, know the oldest dirty one, and show freeze() only dirty
// ranges. dirty_before() must agree with the model at any time asked, however its bound
// has aged.
TEST(FileCache, MatchesABlockModel) {
  constexpr uint64_t kBlocks = 64;
  struct Block {
    bool cached = false;
    uint8_t tag = 0;  // the byte the newest data holds
    bool frozen = false;
    uint64_t job = 0;
    uint64_t since = 0;
  };
  std::mt19937_64 rng(42);
  FileCache cache;
  std::vector<Block> model(kBlocks);
  std::set<uint64_t> live;  // jobs that froze something and have not completed
  uint64_t next_job = 1;
  uint8_t next_tag = 1;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t a = rng() % kBlocks, n = 1 + rng() % 8, b = std::min(kBlocks, a + n);
    switch (rng() % 4) {
      case 0: {  // write; now and then at an earlier time than the newest (another clock)
        const uint8_t tag = next_tag++;
        const uint64_t since = rng() % 8 == 0 ? rng() % (step + 1) : static_cast<uint64_t>(step);
        auto buf = std::make_shared<AlignedBuffer>((b - a) * kB);
        std::memset(buf->data(), tag, buf->size());
        cache.insert(a * kB, (b - a) * kB, buf, 0, since);
        for (uint64_t i = a; i < b; ++i) model[i] = {true, tag, false, 0, since};
        break;
      }
      case 1:  // truncate or punch
        cache.drop(a * kB, b * kB);
        for (uint64_t i = a; i < b; ++i) model[i] = {};
        break;
      case 2: {  // writeback of [a, b), taking some of what it is shown
        const uint64_t job = next_job++;
        const bool take_all = rng() % 2 == 0;
        cache.freeze(a * kB, b * kB, job, [&](uint64_t start, const CachedRange& r) {
          EXPECT_FALSE(r.in_flight) << "freeze shows only dirty ranges";
          EXPECT_GE(start, a * kB);
          EXPECT_LE(start + r.length, b * kB);
          if (!take_all && rng() % 2 == 0) return FileCache::Freeze::skip;
          live.insert(job);
          for (uint64_t i = start / kB; i < (start + r.length) / kB; ++i) {
            EXPECT_TRUE(model[i].cached && !model[i].frozen) << "block " << i;
            model[i].frozen = true;
            model[i].job = job;
          }
          return FileCache::Freeze::take;
        });
        if (take_all) {
          for (uint64_t i = a; i < b; ++i) {
            ASSERT_TRUE(!model[i].cached || model[i].frozen) << "block " << i << " step " << step;
          }
        }
        break;
      }
      case 3: {  // a job completes: mostly a live one; now and then any job ever started
        // (one that froze nothing, or completed already: nothing changes)
        if (next_job == 1) break;
        uint64_t job = 1 + rng() % (next_job - 1);
        if (!live.empty() && rng() % 4 != 0) {
          job = *std::next(live.begin(), static_cast<long>(rng() % live.size()));
        }
        cache.release_job(job, 0, UINT64_MAX);
        for (Block& m : model) {
          if (m.frozen && m.job == job) m = {};
        }
        live.erase(job);
        break;
      }
    }
    uint64_t dirty = 0;
    std::optional<uint64_t> oldest;
    for (const Block& m : model) {
      if (!m.cached || m.frozen) continue;
      dirty += kB;
      if (!oldest || m.since < *oldest) oldest = m.since;
    }
    ASSERT_EQ(cache.dirty_bytes(), dirty) << "step " << step;
    ASSERT_EQ(cache.oldest_dirty(), oldest) << "step " << step;
    const uint64_t t = rng() % (step + 2);
    ASSERT_EQ(cache.dirty_before(t), oldest && *oldest <= t) << "t " << t << " step " << step;
    std::vector<Block> seen(kBlocks);
    cache.split(
        0, kBlocks * kB,
        [&](uint64_t start, uint64_t length, const CachedRange& r, uint64_t into) {
          for (uint64_t off = 0; off < length; off += kB) {
            Block& s = seen[(start + off) / kB];
            s = {true, first_byte(r, into + off), r.in_flight, r.job, r.since};
          }
        },
        [](uint64_t, uint64_t) {});
    for (uint64_t i = 0; i < kBlocks; ++i) {
      ASSERT_EQ(seen[i].cached, model[i].cached) << "block " << i << " step " << step;
      if (!model[i].cached) continue;
      ASSERT_EQ(seen[i].tag, model[i].tag) << "block " << i << " step " << step;
      ASSERT_EQ(seen[i].frozen, model[i].frozen) << "block " << i << " step " << step;
      ASSERT_EQ(seen[i].since, model[i].since) << "block " << i << " step " << step;
      if (model[i].frozen) {
        ASSERT_EQ(seen[i].job, model[i].job);
      }
    }
  }
}

}  // namespace
}  // namespace stripefs::fs
