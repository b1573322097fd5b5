// One writeback of one file, planned: the second stage of the write path, between the file
// cache and the Volume.
//
// Planning freezes the dirty ranges of a file range (FileCache::freeze: their buffers are
// handed to the job and never change again), and maps every block to the volume. Blocks in
// holes get their volume blocks now (delayed allocation): next to the previous extent where
// it can be, and aligned to the stripe when the file block is, so that a file written in
// order lands in whole stripes; each allocation is limited to what one commit can record.
// The new extents are pending (left out of commits until the data is written: ordered mode),
// and the file blocks join `inflight`. Ranges whose blocks another job still has in flight
// are left dirty (two jobs for one block could land in either order): the plan says so, and
// the file goes again when that job is done. With copy on write (a filesystem with data
// checksums), written blocks get new volume blocks too (ExtentMap::replace), so data that a
// committed checksum describes never changes in place; unwritten ones are written in place
// (nothing committed describes their contents).
//
// Not thread-safe: under the filesystem lock, like the inode it plans for.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "fs/core/extent_map.hpp"
#include "fs/core/file_cache.hpp"
#include "fs/core/interval_set.hpp"
#include "raid/stripe_io.hpp"

namespace stripefs::fs {

struct WritebackJob {
  uint64_t id = 0;
  uint64_t ino = 0;
  uint64_t begin = 0, end = 0;                        // the file range it covers (bytes)
  std::vector<std::pair<uint64_t, uint64_t>> blocks;  // file blocks [first, end) it writes
  std::vector<std::shared_ptr<AlignedBuffer>> buffers;
  uint64_t bytes = 0;
  std::vector<std::pair<uint64_t, uint64_t>> allocated;  // file blocks given blocks: pending
                                                         // (copy on write: replacing)
  std::vector<std::pair<uint64_t, uint64_t>> converted;  // unwritten extents it writes
  std::vector<VolumePiece> pieces;                       // what goes to the Volume, sorted
};

// What a plan takes from the filesystem.
struct WritebackSpace {
  // A run of up to `want` free volume blocks, preferring `goal`, else aligned to `align`
  // (BitmapAllocator::reserve).
  std::function<Result<std::pair<uint64_t, uint64_t>>(uint64_t want, uint64_t goal, uint64_t align)>
      allocate;
  uint64_t stripe_blocks = 1;     // the volume's stripe, in blocks
  uint64_t max_run = UINT64_MAX;  // the most blocks one allocation may take
  bool copy_on_write = false;     // written blocks get new ones (the old are freed at settle)
  // Once a job replaces this many runs, further ranges wait for the next job: the frees at
  // its completion must fit one transaction (as free_range_in_steps' steps do).
  uint64_t max_replaced = UINT64_MAX;
};

struct WritebackPlan {
  std::shared_ptr<WritebackJob> job;  // null when nothing was frozen
  uint64_t promised_released = 0;     // delalloc promises the allocations used up
  bool deferred = false;              // some ranges wait for another job
  std::optional<Error> failed;        // an allocation failed (the promises said it could not)
};

// Plans the writeback of bytes [offset, end) of a file (`ino`) as job `id`: the cache's dirty
// ranges there are frozen, holes allocated in `extents` (pending), `inflight` and `delalloc`
// updated.
WritebackPlan plan_writeback(uint64_t id, uint64_t ino, uint64_t offset, uint64_t end,
                             FileCache& cache, ExtentMap& extents, IntervalSet& inflight,
                             IntervalSet& delalloc, const WritebackSpace& space);

}  // namespace stripefs::fs
