#include "fs/core/extent_map.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "unit/fs/core/extent_map_changes.hpp"

namespace stripefs::fs {
namespace {

TEST(ExtentMap, InsertMergesContiguousNeighbours) {
  ExtentMap map;
  map.insert(Extent{0, 100, 4, false});
  map.insert(Extent{8, 108, 4, false});
  EXPECT_EQ(map.size(), 2u);
  map.insert(Extent{4, 104, 4, false});
  ASSERT_EQ(map.size(), 1u) << "the middle joins both";
  EXPECT_EQ(map.begin()->second.extent, (Extent{0, 100, 12, false}));
  map.insert(Extent{12, 200, 4, false});  // not contiguous on the volume
  map.insert(Extent{16, 204, 4, true});   // unwritten: another state
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.map(13), 201u);
  EXPECT_EQ(map.map(20), 0u);
  EXPECT_EQ(map.end_block(), 20u);
}

TEST(ExtentMap, RemoveCutsAtBothEndsAndReportsTheFreedRuns) {
  ExtentMap map;
  map.insert(Extent{0, 100, 10, false});
  map.add(MemExtent{Extent{10, 500, 10, false}, true});
  auto removed = map.remove(5, 15);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].physical, 105u);
  EXPECT_EQ(removed[0].count, 5u);
  EXPECT_FALSE(removed[0].pending);
  EXPECT_EQ(removed[1].physical, 500u);
  EXPECT_EQ(removed[1].count, 5u);
  EXPECT_TRUE(removed[1].pending);
  EXPECT_EQ(map.map(4), 104u);
  EXPECT_EQ(map.map(5), 0u);
  EXPECT_EQ(map.map(15), 505u);
}

// Reads see zeros where nothing is on disk yet: holes, unwritten and pending extents.
TEST(ExtentMap, ReadableRunsAndHoles) {
  ExtentMap map;
  map.insert(Extent{2, 100, 2, false});
  map.insert(Extent{4, 300, 2, true});
  map.add(MemExtent{Extent{6, 400, 2, false}, true});
  EXPECT_EQ(map.readable_run(0), (std::pair<uint64_t, uint64_t>{0, 2}));
  EXPECT_EQ(map.readable_run(3), (std::pair<uint64_t, uint64_t>{101, 1}));
  EXPECT_EQ(map.readable_run(4), (std::pair<uint64_t, uint64_t>{0, 2}));
  EXPECT_EQ(map.readable_run(6), (std::pair<uint64_t, uint64_t>{0, 2}));
  EXPECT_EQ(map.readable_run(9).first, 0u);
  EXPECT_EQ(map.readable_run(9).second, UINT64_MAX);
  std::vector<std::pair<uint64_t, uint64_t>> holes;
  map.for_each_hole(0, 12, [&](uint64_t a, uint64_t b) { holes.emplace_back(a, b); });
  EXPECT_EQ(holes, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 2}, {8, 12}}))
      << "pending and unwritten extents are allocated";
  EXPECT_EQ(map.on_disk().size(), 2u) << "pending extents are left out of commits";
}

TEST(ExtentMap, AtSaysWhatSurroundsABlock) {
  ExtentMap map;
  map.insert(Extent{2, 100, 2, false});
  map.insert(Extent{10, 200, 2, false});
  auto in_hole = map.at(6);
  EXPECT_EQ(in_hole.extent, nullptr);
  ASSERT_NE(in_hole.previous, nullptr);
  EXPECT_EQ(in_hole.previous->extent.logical, 2u);
  EXPECT_EQ(in_hole.next, 10u);
  auto inside = map.at(11);
  ASSERT_NE(inside.extent, nullptr);
  EXPECT_EQ(inside.extent->extent.logical, 10u);
  ASSERT_NE(inside.previous, nullptr);
  EXPECT_EQ(inside.previous->extent.logical, 2u);
  EXPECT_EQ(inside.next, UINT64_MAX);
  auto before_all = map.at(0);
  EXPECT_EQ(before_all.previous, nullptr);
  EXPECT_EQ(before_all.next, 2u);
}

// Writeback completes: pending extents go on disk (their runs returned for the allocator),
// unwritten ones become written, and the pieces merge again.
TEST(ExtentMap, SettleRecordsPendingRunsAndMerges) {
  ExtentMap map;
  map.insert(Extent{0, 100, 4, false});
  map.add(MemExtent{Extent{4, 104, 4, false}, true});
  map.insert(Extent{8, 108, 4, true});
  auto settled = map.settle(4, 10, true);
  EXPECT_EQ(settled.used, (std::vector<std::pair<uint64_t, uint64_t>>{{104, 4}}));
  EXPECT_TRUE(settled.replaced.empty());
  ASSERT_EQ(map.size(), 2u) << "[0,10) written in one extent, [10,12) still unwritten";
  EXPECT_EQ(map.begin()->second.extent, (Extent{0, 100, 10, false}));
  EXPECT_TRUE(std::next(map.begin())->second.extent.unwritten);
}

// Copy on write: blocks of a written extent get new volume blocks, pending; commits keep the
// old ones until the data is written, then the old run is given back and the new one kept.
TEST(ExtentMap, AReplacementKeepsTheOldBlocksOnDiskUntilSettled) {
  ExtentMap map;
  map.insert(Extent{0, 100, 10, false});
  map.replace(3, 4, 500);
  EXPECT_EQ(map.map(3), 500u);
  EXPECT_EQ(map.readable_run(3).first, 0u) << "in flight: its data is in the cache";
  EXPECT_EQ(map.on_disk(), (std::vector<Extent>{{0, 100, 10, false}}))
      << "a commit now stores the old blocks, as one extent";
  const Settled settled = map.settle(0, 10, true);
  EXPECT_EQ(settled.used, (std::vector<std::pair<uint64_t, uint64_t>>{{500, 4}}));
  EXPECT_EQ(settled.replaced, (std::vector<std::pair<uint64_t, uint64_t>>{{103, 4}}));
  EXPECT_EQ(map.on_disk(),
            (std::vector<Extent>{{0, 100, 3, false}, {3, 500, 4, false}, {7, 107, 3, false}}));
}

TEST(ExtentMap, RemovingAReplacementGivesUpBothRuns) {
  ExtentMap map;
  map.insert(Extent{0, 100, 10, false});
  map.replace(2, 6, 500);
  const std::vector<RemovedRun> removed = map.remove(4, 12);
  ASSERT_EQ(removed.size(), 3u);
  EXPECT_EQ(removed[0].physical, 502u);
  EXPECT_EQ(removed[0].count, 4u);
  EXPECT_TRUE(removed[0].pending);
  EXPECT_EQ(removed[1].physical, 104u) << "the blocks it replaced";
  EXPECT_EQ(removed[1].count, 4u);
  EXPECT_FALSE(removed[1].pending);
  EXPECT_EQ(removed[2].physical, 108u);
  EXPECT_EQ(removed[2].count, 2u);
  EXPECT_EQ(map.on_disk(), (std::vector<Extent>{{0, 100, 4, false}}));
}

// A failed writeback: a hole's pending extent goes, a replacement gives the written blocks
// back, and both new runs are returned to be unreserved.
TEST(ExtentMap, AbandoningAFailedWritebackRestoresWhatWasOnDisk) {
  ExtentMap map;
  map.insert(Extent{0, 100, 10, false});
  map.replace(2, 4, 500);
  map.add(MemExtent{Extent{20, 600, 3, false}, true});
  const auto reserved = map.abandon(0, 30);
  EXPECT_EQ(reserved, (std::vector<std::pair<uint64_t, uint64_t>>{{500, 4}, {600, 3}}));
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map.begin()->second.extent, (Extent{0, 100, 10, false})) << "merged back whole";
  EXPECT_FALSE(map.begin()->second.pending);
  EXPECT_EQ(map.readable_run(3).first, 103u);
}

TEST(ExtentMap, StartOfLastCountsExtentsBackFromTheStop) {
  ExtentMap map;
  for (uint64_t i = 0; i < 6; ++i) map.insert(Extent{i * 10, 1000 + i * 100, 5, false});
  EXPECT_EQ(map.start_of_last(0, 60, 2), 40u);
  EXPECT_EQ(map.start_of_last(42, 60, 2), 42u) << "not before first";
  EXPECT_EQ(map.start_of_last(0, 60, 10), 0u) << "fewer than asked: first";
}

// Against a per-block model: random inserts, removes and settles.
// A model of every block, changed as the map is. `blocks` blocks; with `fragmented`, each
// starts as an extent of its own (so the map is large enough for its ReadIndex: reads
// through it are checked against the model after every change near them, every block
// every `full_every` steps; blocks allocated then stay an extent each). `indexed_steps`:
// the steps after which the index held pages.
void check_against_block_model(uint64_t blocks, bool fragmented, int steps, int full_every,
                               uint64_t seed, int& indexed_steps) {
  struct Block {
    uint64_t physical = 0;  // 0: hole
    bool unwritten = false;
    bool pending = false;
    uint64_t replaces = 0;  // pending: the written block it replaces
  };
  std::mt19937_64 rng(seed);
  ExtentMap map;
  std::vector<Block> model(blocks);
  uint64_t next_physical = 1000;
  if (fragmented) {
    for (uint64_t i = 0; i < blocks; ++i) {
      model[i].physical = 10 * blocks + 2 * i;
      map.insert(Extent{i, model[i].physical, 1, false});
    }
    next_physical = 20 * blocks;
  }
  const auto answer = [&](uint64_t i) {
    const Block& m = model[i];
    return m.physical != 0 && !m.unwritten && !m.pending ? m.physical : 0;
  };
  // One read's lookup at `b` (wanting `limit` blocks): the answer and a run that holds.
  const auto check_read = [&](uint64_t b, uint64_t limit, int step) {
    const auto [v, run] = map.readable_run(b, limit);
    ASSERT_EQ(v, answer(b)) << "block " << b << " step " << step;
    ASSERT_GE(run, 1u) << "block " << b << " step " << step;
    ASSERT_LE(run, limit) << "block " << b << " step " << step;
    for (uint64_t k = 1; k < run && b + k < blocks; ++k) {
      ASSERT_EQ(answer(b + k), v == 0 ? 0 : v + k) << "run from " << b << " step " << step;
    }
  };
  indexed_steps = 0;
  for (int step = 0; step < steps; ++step) {
    // Now and then a change far longer than a page, else a few blocks.
    const uint64_t n = (rng() % 50 == 0) ? 1 + rng() % 1200 : 1 + rng() % 10;
    const uint64_t a = rng() % blocks, b = std::min(blocks, a + n);
    switch (rng() % 7) {
      case 0:
      case 1: {  // allocate over a hole: written, unwritten or pending (or loaded: added)
        uint64_t end = a;
        while (end < b && model[end].physical == 0) ++end;
        if (end == a) break;
        const uint64_t physical = (rng() % 2) ? next_physical : next_physical + 7;
        next_physical += 20 + 2 * n;
        const unsigned kind = rng() % 4;
        const bool scattered = fragmented && rng() % 8 != 0;  // else one extent, as written
        const uint64_t piece = scattered ? 1 : end - a, stride = scattered ? 2 : 1;
        for (uint64_t i = a; i < end; i += piece) {
          const Extent e{i, physical + stride * (i - a), static_cast<uint32_t>(piece), kind == 1};
          if (kind >= 2) {
            map.add(MemExtent{e, kind == 2});
          } else {
            map.insert(e);
          }
        }
        for (uint64_t i = a; i < end; ++i) {
          model[i] = {physical + stride * (i - a), kind == 1, kind == 2};
        }
        break;
      }
      case 2: {  // now and then everything from `a` on (a truncate)
        const bool to_the_end = rng() % 100 == 0;
        uint64_t freed = 0;
        for (const RemovedRun& r : map.remove(a, to_the_end ? UINT64_MAX : b)) freed += r.count;
        uint64_t expected = 0;
        for (uint64_t i = a; i < (to_the_end ? blocks : b); ++i) {
          expected += (model[i].physical != 0) + (model[i].replaces != 0);
          model[i] = {};
        }
        EXPECT_EQ(freed, expected) << "step " << step;
        break;
      }
      case 3: {
        const bool written = rng() % 2;
        uint64_t recorded = 0, replaced = 0;
        const Settled settled = map.settle(a, b, written);
        for (auto [physical, length] : settled.used) recorded += length;
        for (auto [physical, length] : settled.replaced) replaced += length;
        uint64_t expected = 0, expected_replaced = 0;
        for (uint64_t i = a; i < b; ++i) {
          if (model[i].physical == 0) continue;
          expected += model[i].pending;
          expected_replaced += model[i].replaces != 0;
          model[i].pending = false;
          model[i].replaces = 0;
          if (written) model[i].unwritten = false;
        }
        EXPECT_EQ(recorded, expected) << "step " << step;
        EXPECT_EQ(replaced, expected_replaced) << "step " << step;
        break;
      }
      case 5: {  // a failed writeback: what it replaced is back, holes again where none
        map.abandon(a, b);
        for (uint64_t i = a; i < b; ++i) {
          if (!model[i].pending) continue;
          model[i] = model[i].replaces != 0 ? Block{model[i].replaces} : Block{};
        }
        break;
      }
      case 6: {  // a shorter extent in place of one starting there: the rest is a hole
        const ExtentMap::At here = map.at(a);
        if (here.extent == nullptr || here.extent->pending || here.extent->extent.logical != a) {
          break;
        }
        const uint64_t old_end = here.extent->extent.logical_end();
        const uint64_t end = std::min(b, old_end - (old_end - a > 1));
        const uint64_t physical = next_physical;
        next_physical += 20 + 2 * n;
        map.insert(Extent{a, physical, static_cast<uint32_t>(end - a), false});
        for (uint64_t i = a; i < old_end; ++i) {
          model[i] = i < end ? Block{physical + (i - a)} : Block{};
        }
        break;
      }
      case 4: {  // copy on write over part of one written extent
        const ExtentMap::At here = map.at(a);
        if (here.extent == nullptr || here.extent->pending || here.extent->extent.unwritten) break;
        const uint64_t end = std::min(b, here.extent->extent.logical_end());
        const uint64_t physical = next_physical;
        next_physical += 20 + 2 * n;
        map.replace(a, end - a, physical);
        for (uint64_t i = a; i < end; ++i) {
          model[i].replaces = model[i].physical;
          model[i].physical = physical + (i - a);
          model[i].pending = true;
        }
        break;
      }
    }
    // Reads where it changed (and just around), and a few anywhere.
    for (uint64_t i = a >= 2 ? a - 2 : 0; i < std::min(blocks, b + 2); ++i) {
      check_read(i, 1 + rng() % 64, step);
    }
    for (int r = 0; r < 16; ++r) check_read(rng() % blocks, 1 + rng() % 600, step);
    indexed_steps += map.indexed_pages() > 0;
    if (::testing::Test::HasFailure()) return;
    if (step % full_every != 0) continue;
    for (uint64_t i = 0; i < blocks; ++i) {
      ASSERT_EQ(map.map(i), model[i].physical) << "block " << i << " step " << step;
      check_read(i, rng() % 2 ? UINT64_MAX : 1 + rng() % 600, step);
      if (::testing::Test::HasFatalFailure()) return;
    }
    // What a commit stores: written and unwritten blocks, replaced ones as they were.
    std::vector<uint64_t> stored(blocks, 0);
    for (const Extent& e : map.on_disk()) {
      for (uint64_t i = e.logical; i < e.logical_end(); ++i)
        stored[i] = e.physical + (i - e.logical);
    }
    for (uint64_t i = 0; i < blocks; ++i) {
      const uint64_t expected = model[i].pending ? model[i].replaces : model[i].physical;
      EXPECT_EQ(stored[i], expected) << "on disk, block " << i << " step " << step;
    }
    uint64_t previous_end = 0;
    for (const auto& [first, m] : map) {
      EXPECT_EQ(first, m.extent.logical);
      EXPECT_GE(first, previous_end) << "extents overlap, step " << step;
      EXPECT_GT(m.extent.length, 0u);
      previous_end = m.extent.logical_end();
    }
  }
}

TEST(ExtentMap, MatchesABlockModel) {
  int indexed = 0;
  check_against_block_model(96, false, 4000, 1, 7, indexed);
  EXPECT_EQ(indexed, 0) << "too small for an index";
}

// A file rewritten at random: reads answer from the ReadIndex, which every change keeps
// true (pages refilled where changed, dropped when wholly changed, all when the map shrinks).
TEST(ExtentMap, AFragmentedMapsReadIndexMatchesABlockModel) {
  int indexed = 0;
  check_against_block_model(8 * ReadIndex::kPageBlocks, true, 3000, 50, 11, indexed);
  EXPECT_GE(indexed, 2900) << "the reads went to the index";
}

// The index is a cache: a copy starts without one and answers the same; a move takes it.
TEST(ExtentMap, ACopiedMapAnswersTheSameAndAMovedOneKeepsItsIndex) {
  constexpr uint64_t kBlocks = 4 * ReadIndex::kPageBlocks;
  ExtentMap map;
  for (uint64_t i = 0; i < kBlocks; ++i) map.insert(Extent{i, 1000 + 2 * i, 1, false});
  for (uint64_t i = 0; i < kBlocks; ++i) ASSERT_EQ(map.readable_run(i, 1).first, 1000 + 2 * i);
  ASSERT_EQ(map.indexed_pages(), 4u);
  ExtentMap copy = map;
  EXPECT_EQ(copy.indexed_pages(), 0u);
  copy.remove(0, 8);
  for (uint64_t i = 0; i < kBlocks; ++i) {
    ASSERT_EQ(map.readable_run(i, 1).first, 1000 + 2 * i) << "the copy's change reached it";
    ASSERT_EQ(copy.readable_run(i, 1).first, i < 8 ? 0 : 1000 + 2 * i);
  }
  const ExtentMap moved = std::move(map);
  EXPECT_EQ(moved.indexed_pages(), 4u);
  for (uint64_t i = 0; i < kBlocks; ++i) ASSERT_EQ(moved.readable_run(i, 1).first, 1000 + 2 * i);
}

// A map that shrinks below the size worth an index lets its pages go; grown fragmented
// again (past where it ended: a longer file), it builds them anew, and answers right.
TEST(ExtentMap, AShrunkMapDropsItsIndexAndAGrownOneBuildsItAgain) {
  constexpr uint64_t kBlocks = 4 * ReadIndex::kPageBlocks;
  ExtentMap map;
  for (uint64_t i = 0; i < kBlocks; ++i) map.insert(Extent{i, 1000 + 2 * i, 1, false});
  for (uint64_t i = 0; i < kBlocks; i += 7) map.readable_run(i, 1);
  ASSERT_EQ(map.indexed_pages(), 4u);
  map.remove(100, UINT64_MAX);
  EXPECT_EQ(map.indexed_pages(), 0u) << "100 extents keep no index";
  for (uint64_t i = 100; i < 3 * kBlocks; ++i) map.insert(Extent{i, 50'000 + 2 * i, 1, false});
  for (uint64_t i = 0; i < 3 * kBlocks; ++i) {
    const uint64_t expected = i < 100 ? 1000 + 2 * i : 50'000 + 2 * i;
    ASSERT_EQ(map.readable_run(i, 1 + i % 5), (std::pair<uint64_t, uint64_t>{expected, 1}));
  }
  EXPECT_EQ(map.indexed_pages(), 12u);
}

// A run on disk longer than an extent may be, through copies on write still in flight (a
// commit stores the blocks they replace): removing its first blocks moves where every later
// extent of the run starts, far from the removal.
TEST(ExtentMap, ChangingARunsStartMovesEveryExtentOfTheRun) {
  constexpr uint64_t cap = kMaxExtentLength, x = 1'000'000;
  ExtentMap map;
  map.insert({0, x, static_cast<uint32_t>(cap), false});
  map.insert({cap, x + cap, 20, false});  // contiguous, but one extent cannot hold both
  map.replace(10, 1, 50'000'000);
  map.replace(cap + 5, 1, 60'000'000);
  ASSERT_EQ(map.on_disk(), (std::vector<Extent>{{0, x, static_cast<uint32_t>(cap), false},
                                                {cap, x + cap, 20, false}}));
  map.stored();
  map.remove(0, 5);
  const std::vector<Extent> after = map.on_disk();
  ASSERT_EQ(after, (std::vector<Extent>{{5, x + 5, static_cast<uint32_t>(cap), false},
                                        {cap + 5, x + cap + 5, 15, false}}));
  const auto changed = map.changed();
  ASSERT_TRUE(changed);
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ(changed->front().first, 0u);
  EXPECT_GT(changed->front().second, cap + 5) << "the extent at " << cap + 5 << " is new";
  EXPECT_EQ(map.on_disk(cap, cap + 10), (std::vector<Extent>{after[1]}));
  EXPECT_EQ(map.on_disk(6, cap + 5), std::vector<Extent>{});
}

// The listings a commit of part of a tree relies on: on_disk(from, to) is the full listing's
// part that starts in [from, to), and every extent that changed since stored() starts in a
// range changed() gives.
std::vector<Extent> starting_in(const std::vector<Extent>& all, uint64_t from, uint64_t to) {
  std::vector<Extent> part;
  for (const Extent& e : all) {
    if (e.logical >= from && e.logical < to) part.push_back(e);
  }
  return part;
}

TEST(ExtentMap, ARangedListingIsTheFullListingsPart) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ExtentMapChanges changes(seed);
    for (int step = 0; step < 300; ++step) changes.step();
    const std::vector<Extent> all = changes.map().on_disk();
    for (int probe = 0; probe < 200; ++probe) {
      uint64_t from = changes.random() % ExtentMapChanges::kSpace;
      uint64_t to = from + changes.random() % (probe % 2 ? 50 : 3 * kMaxExtentLength);
      if (probe % 7 == 0 && !all.empty()) {  // exactly at an extent's edges
        const Extent& e = all[changes.random() % all.size()];
        from = e.logical;
        to = e.logical_end();
      }
      ASSERT_EQ(changes.map().on_disk(from, to), starting_in(all, from, to))
          << "seed " << seed << " [" << from << ", " << to << ")";
    }
  }
}

TEST(ExtentMap, EveryChangedExtentStartsInAChangedRange) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    ExtentMapChanges changes(seed);
    ExtentMap& map = changes.map();
    EXPECT_FALSE(map.changed()) << "a new map's changes are not known";
    map.stored();
    std::vector<Extent> before = map.on_disk();
    for (int round = 0; round < 200; ++round) {
      const int steps = 1 + static_cast<int>(changes.random() % 4);
      for (int i = 0; i < steps; ++i) changes.step();
      const std::vector<Extent> after = map.on_disk();
      const auto changed = map.changed();
      ASSERT_TRUE(changed) << "seed " << seed;
      for (size_t i = 1; i < changed->size(); ++i) {
        ASSERT_LT((*changed)[i - 1].second, (*changed)[i].first) << "sorted and disjoint";
      }
      const auto inside = [&](uint64_t b) {
        for (const auto& [from, to] : *changed) {
          if (b >= from && b < to) return true;
        }
        return false;
      };
      for (const bool old_side : {true, false}) {
        const std::vector<Extent>& side = old_side ? before : after;
        const std::vector<Extent>& other = old_side ? after : before;
        for (const Extent& e : side) {
          if (std::find(other.begin(), other.end(), e) == other.end()) {
            ASSERT_TRUE(inside(e.logical))
                << "seed " << seed << " round " << round << ": extent at " << e.logical
                << " changed outside every range";
          }
        }
      }
      map.stored();
      ASSERT_TRUE(map.changed() && map.changed()->empty());
      before = after;
    }
  }
}

}  // namespace
}  // namespace stripefs::fs
