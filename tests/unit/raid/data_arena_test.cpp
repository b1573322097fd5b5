// The DataArena: file data's registered memory. Allocations are page-aligned runs inside one
// chunk that never overlap, released runs are reused, and the arena grows a chunk at a time
// only as far as it is allowed. (Its use as fixed buffers: file_member_test.cpp.)
#include "raid/data_arena.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace stripefs {
namespace {

constexpr size_t kChunk = DataArena::kChunkBytes;
constexpr size_t kPage = DataArena::kPageBytes;

struct Taken {
  std::byte* data;
  size_t bytes;
};

TEST(DataArena, AllocationsArePageAlignedRunsInsideOneChunkThatDoNotOverlap) {
  DataArena arena(4);
  arena.allow(4 * kChunk);
  std::mt19937 rng(7);
  std::vector<Taken> taken;
  // Sizes from one page to 1 MiB, not page multiples, until the arena is full.
  for (;;) {
    const size_t bytes = 1 + rng() % (1u << 20);
    std::byte* p = arena.allocate(bytes);
    if (p == nullptr) break;
    taken.push_back({p, bytes});
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % kPage, 0u);
    EXPECT_GE(arena.chunk_of(p, bytes, arena.chunks()), 0) << "inside one chunk";
    std::memset(p, static_cast<int>(taken.size()), bytes);
  }
  EXPECT_EQ(arena.chunks(), 4u);
  ASSERT_GT(taken.size(), 12u);
  // Every byte still holds its owner's mark: nothing overlapped.
  for (size_t i = 0; i < taken.size(); ++i) {
    const auto mark = static_cast<std::byte>(i + 1);
    EXPECT_EQ(std::count(taken[i].data, taken[i].data + taken[i].bytes, mark),
              static_cast<ptrdiff_t>(taken[i].bytes))
        << "allocation " << i;
  }
  auto by_address = taken;
  std::sort(by_address.begin(), by_address.end(),
            [](const Taken& a, const Taken& b) { return a.data < b.data; });
  for (size_t i = 1; i < by_address.size(); ++i) {
    EXPECT_LE(by_address[i - 1].data + by_address[i - 1].bytes, by_address[i].data);
  }
  // Released runs are found again, and the accounting returns to zero.
  for (size_t i = 0; i < taken.size(); i += 2) arena.release(taken[i].data);
  size_t again = 0;
  for (size_t i = 0; i < taken.size(); i += 2) {
    std::byte* p = arena.allocate(taken[i].bytes);
    ASSERT_NE(p, nullptr) << "a released run of the same size must fit again";
    taken[i].data = p;
    ++again;
  }
  EXPECT_EQ(again, (taken.size() + 1) / 2);
  for (const Taken& t : taken) arena.release(t.data);
  EXPECT_EQ(arena.stats().bytes_in_use, 0u);
  std::byte* whole = arena.allocate(kChunk);
  EXPECT_NE(whole, nullptr) << "with everything released, a whole chunk is free again";
  arena.release(whole);
}

TEST(DataArena, GrowsAChunkAtATimeOnlyAsFarAsAllowed) {
  DataArena arena(8);
  EXPECT_EQ(arena.allocate(kPage), nullptr) << "nothing allowed yet";
  arena.allow(kChunk + 1);  // rounds up to two chunks
  std::vector<std::byte*> taken;
  for (int i = 0; i < 8; ++i) {
    taken.push_back(arena.allocate(1u << 20));
    ASSERT_NE(taken.back(), nullptr) << i;
    EXPECT_EQ(arena.chunks(), i < 4 ? 1u : 2u) << "a new chunk only when the last is full";
  }
  EXPECT_EQ(arena.allocate(kPage), nullptr) << "at its limit";
  const DataArenaStats full = arena.stats();
  EXPECT_EQ(full.chunks, 2u);
  EXPECT_EQ(full.bytes_in_use, 8u << 20);
  EXPECT_EQ(full.refused, 2u);
  arena.allow(kChunk);  // lowering is ignored
  arena.allow(3 * kChunk);
  std::byte* more = arena.allocate(kPage);
  EXPECT_NE(more, nullptr);
  EXPECT_EQ(arena.chunks(), 3u);
  arena.release(more);
  for (std::byte* p : taken) arena.release(p);
}

TEST(DataArena, RefusesWhatNoChunkCanHold) {
  DataArena arena(2);
  arena.allow(2 * kChunk);
  EXPECT_EQ(arena.allocate(kChunk + 1), nullptr);
  std::byte* most = arena.allocate(kChunk - kPage);  // in 64 KiB units: the whole chunk
  ASSERT_NE(most, nullptr);
  // Two pages fit neither in what is left of the first chunk nor across chunks: a second one.
  std::byte* two = arena.allocate(2 * kPage);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(arena.chunk_of(two, 2 * kPage, arena.chunks()), 1);
  arena.release(most);
  arena.release(two);
}

// Small buffers (under 64 KiB), which pools keep for long, do not take room in the chunks
// large ones use; a chunk emptied of one kind takes either again.
TEST(DataArena, SmallAndLargeBuffersKeepToTheirOwnChunks) {
  DataArena arena(2);
  arena.allow(2 * kChunk);
  std::byte* small = arena.allocate(kPage);
  std::byte* large = arena.allocate(1u << 20);
  std::byte* small2 = arena.allocate(2 * kPage);
  ASSERT_TRUE(small && large && small2);
  EXPECT_EQ(arena.chunk_of(small, kPage, 2), 0);
  EXPECT_EQ(arena.chunk_of(large, 1u << 20, 2), 1) << "not beside the small ones";
  EXPECT_EQ(arena.chunk_of(small2, 2 * kPage, 2), 0);
  arena.release(small);
  arena.release(small2);
  std::byte* rest = arena.allocate(3u << 20);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(arena.chunk_of(rest, 3u << 20, 2), 1) << "a chunk of its kind first";
  std::byte* whole = arena.allocate(kChunk);
  ASSERT_NE(whole, nullptr) << "the emptied chunk takes a large buffer";
  EXPECT_EQ(arena.chunk_of(whole, kChunk, 2), 0);
  for (std::byte* p : {large, rest, whole}) arena.release(p);
  EXPECT_EQ(arena.stats().bytes_in_use, 0u);
}

// Threads allocating and releasing at once each keep their bytes: every buffer is filled
// with its owner's mark and checked before it goes back.
TEST(DataArena, ThreadsAtOnceNeverShareBytes) {
  DataArena arena(4);
  arena.allow(4 * kChunk);
  std::vector<std::thread> threads;
  std::atomic<int> overlaps{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      std::vector<Taken> held;
      for (int i = 0; i < 3000; ++i) {
        if (held.size() < 8) {
          const size_t bytes = rng() % 2 ? kPage * (1 + rng() % 15) : (64u << 10) * (1 + rng() % 8);
          if (std::byte* p = arena.allocate(bytes)) {
            std::memset(p, t + 1, bytes);
            held.push_back({p, bytes});
          }
          continue;
        }
        const size_t k = rng() % held.size();
        if (std::count(held[k].data, held[k].data + held[k].bytes, std::byte(t + 1)) !=
            static_cast<ptrdiff_t>(held[k].bytes)) {
          ++overlaps;
        }
        arena.release(held[k].data);
        held.erase(held.begin() + static_cast<ptrdiff_t>(k));
      }
      for (const Taken& h : held) arena.release(h.data);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(arena.stats().bytes_in_use, 0u);
}

TEST(DataArena, ChunkOfNamesOnlyRangesInsideOneCountedChunk) {
  DataArena arena(2);
  arena.allow(2 * kChunk);
  std::byte* a = arena.allocate(kChunk);
  std::byte* b = arena.allocate(kPage);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(arena.chunk_of(a, kChunk, 2), 0);
  EXPECT_EQ(arena.chunk_of(b, kPage, 2), 1);
  EXPECT_EQ(arena.chunk_of(b, kPage, 1), -1) << "a chunk the ring has not registered";
  EXPECT_EQ(arena.chunk_of(a + kChunk - kPage, 2 * kPage, 2), -1) << "across two chunks";
  std::vector<std::byte> heap(kPage);
  EXPECT_EQ(arena.chunk_of(heap.data(), kPage, 2), -1);
  EXPECT_EQ(arena.chunk_of(a, 0, 2), -1);
  arena.release(a);
  arena.release(b);
}

}  // namespace
}  // namespace stripefs
