// A fragmented file's read lookups by index: for each file block, where a read takes it
// from (the volume block, or 0: zeros or the cache), in pages of 512 blocks made on first
// use. A file rewritten at random under copy on write holds an extent per block; finding
// one of 262,144 in the extent B-tree costs a cache miss per level (about 0.6 us of a 2 us
// read, `stripefs-bench read`), and one word of a page costs one.
//
// The index is a cache of ExtentMap::readable_run, owned by the map: it is consulted only
// when the map is large and the file's pages few enough (memory: at most 16 bytes of
// directory per page of file, which is at most 4 per extent, and a 4 KiB page only where
// at least kDenseExtents extents share its 512 blocks, about what the tree spends on
// them), and the map tells it every range whose answers changed, after the change.
//
// Not thread-safe: it lives in an ExtentMap, under the filesystem lock.
#pragma once

#include <absl/functional/function_ref.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace stripefs::fs {

class ReadIndex {
 public:
  static constexpr unsigned kPageShift = 9;
  static constexpr uint64_t kPageBlocks = uint64_t{1} << kPageShift;
  // Below this many extents the tree is shallow and mostly cached: no index.
  static constexpr size_t kMinExtents = 1024;
  // A page is made only where this many extents meet its blocks.
  static constexpr size_t kDenseExtents = 32;

  // Writes the answers for blocks [first, end) to out[0, end - first) and returns how many
  // extents meet the range.
  using Fill = absl::FunctionRef<size_t(uint64_t first, uint64_t end, uint64_t* out)>;

  ReadIndex() = default;
  // A copy starts empty (it is a cache); a move takes the pages.
  ReadIndex(const ReadIndex&) {}
  ReadIndex& operator=(const ReadIndex&) {
    clear();
    return *this;
  }
  ReadIndex(ReadIndex&& other) noexcept { *this = std::move(other); }
  ReadIndex& operator=(ReadIndex&& other) noexcept {
    if (this == &other) return *this;
    slots_ = std::move(other.slots_);
    pages_ = std::exchange(other.pages_, 0);
    other.slots_.clear();
    return *this;
  }

  // The answer for block `b` and how many blocks from it (at least 1, at most `limit`)
  // share it: the same answer 0, or volume blocks following on. nullopt: not indexed
  // (the map is small, the file too sparse, or `b` past its end), ask the map. `extents`
  // and `end_block` are the map's size and end, `fill` its answers for a range.
  std::optional<std::pair<uint64_t, uint64_t>> find(uint64_t b, uint64_t limit, size_t extents,
                                                    uint64_t end_block, Fill fill);
  // The answers of blocks [first, end) changed (the map is changed already, and holds
  // `extents` now): pages that hold them are filled again from `fill`, or dropped when
  // wholly inside; all of them when the map became small.
  void changed(uint64_t first, uint64_t end, size_t extents, Fill fill);
  void clear() {
    slots_.clear();
    pages_ = 0;
  }
  // Pages held (for tests and statistics).
  size_t pages() const { return pages_; }
  // Pages made by every index of the process so far (for tests).
  static uint64_t pages_made() { return made_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::unique_ptr<uint64_t[]> answers;  // kPageBlocks of them, when dense
    bool sparse = false;                  // looked at: too few extents, the map answers
  };
  // Makes the page of slot `p`, or marks it sparse; the answers, or null.
  const uint64_t* make(size_t p, Fill fill);

  std::vector<Slot> slots_;  // by page of file blocks
  size_t pages_ = 0;
  static inline std::atomic<uint64_t> made_{0};
};

}  // namespace stripefs::fs
