// Random changes to an ExtentMap, of every kind a filesystem makes, for the tests of what
// a commit of part of an extent tree relies on (extent_map_test.cpp, extent_tree_test.cpp).
#pragma once

#include <random>

#include "fs/core/extent_map.hpp"

namespace stripefs::fs {

// File blocks reach past three extents' worth, so runs longer than an extent may be
// (kMaxExtentLength) occur: there, where an extent starts depends on where its run began.
class ExtentMapChanges {
 public:
  explicit ExtentMapChanges(uint64_t seed) : rng_(seed) {}

  // One random change: over a hole, written, unwritten or pending; a removal; a settle or
  // abandon; a copy on write. Volume blocks often follow file blocks, so runs form.
  void step() {
    const uint64_t long_run = (rng_() % 8 == 0) ? kMaxExtentLength : 10;
    const uint64_t a = rng_() % kSpace, b = std::min(kSpace, a + 1 + rng_() % long_run);
    const uint64_t physical = (rng_() % 2) ? kBase + a : next_physical(b - a);
    switch (rng_() % 6) {
      case 0:
      case 1: {
        const ExtentMap::At here = map_.at(a);
        if (here.extent != nullptr) break;
        const uint64_t end = std::min(b, here.next);
        const unsigned kind = rng_() % 3;
        const Extent e{a, physical, static_cast<uint32_t>(end - a), kind == 1};
        if (kind == 2) {
          map_.add(MemExtent{e, true});
        } else {
          map_.insert(e);
        }
        break;
      }
      case 2:
        map_.remove(a, b);
        break;
      case 3:
        map_.settle(a, b, rng_() % 2);
        break;
      case 4:
        map_.abandon(a, b);
        break;
      case 5: {
        const ExtentMap::At here = map_.at(a);
        if (here.extent == nullptr || here.extent->pending || here.extent->extent.unwritten) break;
        const uint64_t end = std::min(b, here.extent->extent.logical_end());
        map_.replace(a, end - a, (rng_() % 2) ? kBase + 3 * kSpace + a : next_physical(end - a));
        break;
      }
    }
  }
  ExtentMap& map() { return map_; }
  uint64_t random() { return rng_(); }
  static constexpr uint64_t kSpace = 3 * kMaxExtentLength + 1000;

 private:
  static constexpr uint64_t kBase = 1'000'000'000;
  uint64_t next_physical(uint64_t n) {
    next_ += n + 1 + rng_() % 3;
    return next_ - n;
  }
  std::mt19937_64 rng_;
  ExtentMap map_;
  uint64_t next_ = 100 * kBase;
};

}  // namespace stripefs::fs
