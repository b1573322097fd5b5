// One file's block map in memory: file blocks to volume blocks, as extents ordered by file
// block. An extent is written, unwritten (preallocated by fallocate: reads as zeros) or
// pending (allocated at writeback for data still in flight: not on disk yet, so a commit
// leaves it out; ordered mode). A pending extent may replace written blocks (copy on write,
// on a filesystem with data checksums: the data a committed checksum describes never
// changes in place): until its data is written, commits keep the blocks it replaces. On disk the
// map is kept inline in the inode or as a tree (file_extents.cpp); this is the map alone, which
// allocates and frees nothing: the calls that change it say which volume blocks changed hands.
//
// Not thread-safe, not even for two readers (readable_run fills its ReadIndex): each
// ExtentMap lives in its inode, under the filesystem lock.
#pragma once

#include <absl/container/btree_map.h>

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "fs/core/format.hpp"
#include "fs/core/read_index.hpp"

namespace stripefs::fs {

struct MemExtent {
  Extent extent;
  bool pending = false;
  uint64_t replaces = 0;  // pending: the written blocks it replaces (0: none, a hole's)

  // Blocks [from, to) of it (file blocks inside it), as an extent of its own.
  MemExtent slice(uint64_t from, uint64_t to) const;
};

// Whether b continues a (file and volume blocks both contiguous, same state, and so are the
// blocks they replace) and the two fit in one extent.
inline bool mergeable(const MemExtent& a, const MemExtent& b) {
  return a.pending == b.pending && a.extent.unwritten == b.extent.unwritten &&
         a.extent.logical_end() == b.extent.logical &&
         a.extent.physical + a.extent.length == b.extent.physical &&
         (a.replaces == 0) == (b.replaces == 0) &&
         (a.replaces == 0 || a.replaces + a.extent.length == b.replaces) &&
         uint64_t{a.extent.length} + b.extent.length <= kMaxExtentLength;
}

// Volume blocks [first, first + count) that left the map.
struct RemovedRun {
  uint64_t physical;
  uint64_t count;
  bool pending;  // never written: its data was still in flight
};

// What settle() changed: volume runs now on disk (the allocator records them), and runs
// replaced by them (freed).
struct Settled {
  std::vector<std::pair<uint64_t, uint64_t>> used;
  std::vector<std::pair<uint64_t, uint64_t>> replaced;
};

class ExtentMap {
 public:
  // By first file block. A B-tree: a file written at random under copy on write holds an
  // extent per block, and a read's lookup in a red-black tree of 100,000 of them is a cache
  // miss per level. (Iterators do not survive an insert or erase.)
  using Map = absl::btree_map<uint64_t, MemExtent>;

  // What is at file block `b`: the extent holding it (null in a hole); the last extent that
  // starts before `b` (null if none; when `extent` is null it ends at or before `b`); and
  // where the next extent after `b` starts (UINT64_MAX if none).
  struct At {
    const MemExtent* extent;
    const MemExtent* previous;
    uint64_t next;
  };
  At at(uint64_t file_block) const;
  // The volume block holding file block `b`, whatever its state; 0 in a hole.
  uint64_t map(uint64_t file_block) const;
  // For reads: the volume block to read file block `b` from (0: it reads as zeros, being a
  // hole, unwritten, or pending, whose data is in the cache) and how many blocks from `b`
  // share that answer (the same 0, or volume blocks following on), no more than `limit`
  // (a fragmented map's ReadIndex may answer fewer: a caller asks again for the rest).
  std::pair<uint64_t, uint64_t> readable_run(uint64_t file_block,
                                             uint64_t limit = UINT64_MAX) const;
  // Calls f(first, end) for each run of unmapped file blocks in [first, end) (pending
  // extents count as mapped: their blocks are allocated).
  template <class F>
  void for_each_hole(uint64_t first, uint64_t end, F&& f) const;

  // Adds an extent that overlaps none, as it is (loading, or a pending one at writeback).
  void add(const MemExtent& extent) {
    map_.emplace(extent.extent.logical, extent);
    touch(extent.extent.logical, extent.extent.logical_end());
    reindex(extent.extent.logical, extent.extent.logical_end());
  }
  // Copy on write: file blocks [first, first + count), inside one written extent, get
  // volume blocks from `physical` on, pending, replacing the ones they had.
  void replace(uint64_t first, uint64_t count, uint64_t physical);
  // Adds a written or unwritten extent in place of whatever starts at its first block,
  // merged with its neighbours where contiguous.
  void insert(Extent extent);
  // Removes the mappings of file blocks [first, end), cutting extents at both ends. A
  // pending extent that replaces blocks gives up both runs.
  std::vector<RemovedRun> remove(uint64_t first, uint64_t end);
  // Splits the extent across `file_block`, if one does.
  void split_at(uint64_t file_block);
  // The data of [first, end) reached the volume: pending extents there are on disk from now
  // on (their volume runs are returned, and the runs they replace), and with `written`
  // unwritten ones become written. Neighbours merge again.
  Settled settle(uint64_t first, uint64_t end, bool written);
  // The writeback of [first, end) failed: its pending extents go (a hole's mapping is
  // removed, a replacement gives the file its written blocks back), and the volume runs
  // they had reserved are returned, to be unreserved.
  std::vector<std::pair<uint64_t, uint64_t>> abandon(uint64_t first, uint64_t end);

  // The extents a commit stores: all but the pending ones, except that one replacing
  // written blocks stores those (merged where contiguous, an extent at most
  // kMaxExtentLength blocks).
  std::vector<Extent> on_disk() const { return on_disk(0, UINT64_MAX); }
  // Those of on_disk() that start in file blocks [from, to), without listing the rest.
  std::vector<Extent> on_disk(uint64_t from, uint64_t to) const;

  // What a commit that writes only the changed leaves of the file's extent tree
  // (extent_tree.hpp) needs: every mutation records the file blocks whose extents it
  // changed, until stored() says the tree holds on_disk() again. changed() gives them as
  // sorted, disjoint ranges, widened so that every extent of on_disk() that differs from
  // the one at the last stored() (or is new, or gone) starts in one of them; nullopt when
  // that is not known (a new map: stored() was never called, or too many ranges to keep).
  std::optional<std::vector<std::pair<uint64_t, uint64_t>>> changed() const;
  void stored() {
    changed_all_ = false;
    changed_.clear();
  }
  // The map was just filled by add() from the `count` extents read from disk: stored()
  // if on_disk() lists them as they are. Older images and fsck's rewrites may hold
  // contiguous extents apart that on_disk() merges; then the first commit lists them all
  // (merging only ever shortens the listing, so the same count means the same list).
  void loaded(size_t count) {
    if (on_disk().size() == count) stored();
  }
  // Where, going back from `stop`, the `count`-th extent that reaches past `first` starts
  // (not before `first`); `first` when fewer reach past it. Frees in steps use it.
  uint64_t start_of_last(uint64_t first, uint64_t stop, uint64_t count) const;
  // The file block after the last extent (0 when empty).
  uint64_t end_block() const;
  // The file block after the last written extent a commit stores (on_disk's; 0: none).
  uint64_t written_end() const;
  bool empty() const { return map_.empty(); }
  size_t size() const { return map_.size(); }
  Map::const_iterator begin() const { return map_.begin(); }
  Map::const_iterator end() const { return map_.end(); }
  // Pages of readable_run's answers kept by index (read_index.hpp).
  size_t indexed_pages() const { return index_.pages(); }

 private:
  // Merges neighbours that became contiguous in [first, end] and around it.
  void merge_around(uint64_t first, uint64_t end);
  // Records that the extents of file blocks [first, end) changed.
  void touch(uint64_t first, uint64_t end);
  // After a change: readable_run's answers for file blocks [first, end) may differ now.
  void reindex(uint64_t first, uint64_t end);
  // readable_run's answers for [first, end), one per block, for the ReadIndex; how many
  // extents meet the range.
  size_t fill_answers(uint64_t first, uint64_t end, uint64_t* out) const;
  // Whether on_disk() lists `b` and the extent before it as one run (but for the length
  // limit): both stored, contiguous in file and volume blocks, in the same state.
  static bool continues(const MemExtent& a, const MemExtent& b);
  // The first entry of the run on_disk() merges `it` into (but for the length limit).
  Map::const_iterator run_start(Map::const_iterator it) const;

  Map map_;
  mutable ReadIndex index_;  // a cache of readable_run: filled by reads, under the fs lock
  // Ranges of file blocks changed since stored() (in the order touched), or all of them.
  std::vector<std::pair<uint64_t, uint64_t>> changed_;
  bool changed_all_ = true;
};

template <class F>
void ExtentMap::for_each_hole(uint64_t first, uint64_t end, F&& f) const {
  uint64_t b = first;
  auto it = map_.upper_bound(b);
  if (it != map_.begin()) --it;
  for (; b < end && it != map_.end(); ++it) {
    const Extent& x = it->second.extent;
    if (x.logical_end() <= b) continue;
    if (x.logical > b) f(b, std::min(end, x.logical));
    b = std::max(b, x.logical_end());
  }
  if (b < end) f(b, end);
}

}  // namespace stripefs::fs
