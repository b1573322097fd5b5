// Free-space and inode allocation over the on-disk bitmaps.
//
// The allocator keeps an in-memory map of what is in use or promised, and changes the
// on-disk bitmap blocks through the MetaStore, in the running transaction. Freed bits are
// cleared on disk at once but stay busy in memory until a checkpoint covers the freeing
// transaction: until then the journal may still replay old images into those blocks, or a
// crash may bring back the file that owned them.
//
// Not thread-safe: the filesystem uses it under its lock.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>
#include "fs/core/format.hpp"
#include "fs/core/interval_set.hpp"
#include "fs/core/meta_store.hpp"

namespace stripefs::fs {

class BitmapAllocator {
 public:
  // The bitmap of `count` items in `blocks` bitmap blocks from volume block `start`.
  BitmapAllocator(uint64_t start, uint64_t blocks, uint64_t count);
  Result<void> load(MetaStore& meta);  // blocking; verifies every bitmap block

  // A run of up to `want` free items (at least 1), preferring `goal`, then a run aligned to
  // `align`. The items are busy in memory only; mark_used() records them on disk.
  Result<std::pair<uint64_t, uint64_t>> reserve(uint64_t want, uint64_t goal, uint64_t align);
  void mark_used(MetaStore& meta, uint64_t first, uint64_t count);  // reserved → on disk
  void unreserve(uint64_t first, uint64_t count);  // reserved, never recorded: free at once
  // On disk now; reusable after a checkpoint covers `meta.running()`.
  void release(MetaStore& meta, uint64_t first, uint64_t count);
  // A checkpoint covered transactions up to `transaction`.
  void checkpointed(uint64_t transaction);

  // While `sink` is set, every run reserved or released is added to it: a scrub learns
  // which blocks may hold other contents than when it looked. nullptr stops it.
  void watch(IntervalSet* sink) { watch_ = sink; }

  uint64_t free_count() const { return free_; }
  // Freed, but reusable only after the next checkpoint (free space all the same for statfs).
  uint64_t deferred_count() const { return deferred_total_; }
  uint64_t count() const { return count_; }
  bool busy(uint64_t item) const { return test(item); }

 private:
  bool test(uint64_t item) const { return (words_[item / 64] >> (item % 64)) & 1; }
  void set_range(uint64_t first, uint64_t count, bool value);
  uint64_t run_at(uint64_t first, uint64_t want) const;  // free items from `first`, capped
  Result<std::pair<uint64_t, uint64_t>> find_run(uint64_t want, uint64_t goal, uint64_t align);
  void set_disk(MetaStore& meta, uint64_t first, uint64_t count, bool value);

  uint64_t start_, blocks_, count_;
  std::vector<uint64_t> words_;  // 1 = in use, reserved or freed-but-not-yet-reusable
  uint64_t free_ = 0;
  uint64_t cursor_ = 0;  // next-fit: where the last search ended
  struct Deferred {
    uint64_t transaction, first, count;
  };
  std::deque<Deferred> deferred_;
  uint64_t deferred_total_ = 0;
  IntervalSet* watch_ = nullptr;
};

}  // namespace stripefs::fs
