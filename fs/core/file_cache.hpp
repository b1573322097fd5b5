// The daemon's cache of one file's data, the first stage of the write path: the ranges
// written and not yet on the members.
//
// Stable pages: every range is a slice of an immutable buffer. New data never changes a
// buffer; it goes into a new one that replaces whatever covered its range (the old ranges
// are cut around it). So a range handed to writeback ("frozen", in flight to the members,
// tagged with its job) can be computed over and written while newer writes land beside it.
//
// A range is dirty (written, waiting for writeback) or frozen. Frozen ranges stay until
// their job completes (release_job); anything dropped or replaced meanwhile is only cut out
// of the map, and the job keeps its buffers.
//
// Not thread-safe: each FileCache lives in its inode, under the filesystem lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "raid/aligned_buffer.hpp"

namespace stripefs::fs {

// [offset, offset + length) of the file is buffer[buffer_offset, ...). Offsets and lengths
// are multiples of the filesystem block.
struct CachedRange {
  uint64_t length = 0;
  std::shared_ptr<AlignedBuffer> buffer;
  size_t buffer_offset = 0;
  bool in_flight = false;  // frozen: handed to writeback job `job`, which holds the buffer
  uint64_t job = 0;
  uint64_t since = 0;  // when it became dirty (monotonic ns)
};

// A run of file bytes [first, end).
using ByteRun = std::pair<uint64_t, uint64_t>;

class FileCache {
 public:
  // What freeze() does with one dirty range it is shown.
  enum class Freeze { take, skip, stop };

  // Puts [offset, offset + length) of the file in `buffer` from `buffer_offset`, dirty since
  // `since`, replacing whatever covered it. Returns the dirty runs it replaced.
  std::vector<ByteRun> insert(uint64_t offset, uint64_t length,
                              std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset,
                              uint64_t since);
  // Drops [offset, end) from the cache. Returns the dirty runs dropped (frozen ones were only
  // cut out: their job still writes them).
  std::vector<ByteRun> drop(uint64_t offset, uint64_t end);

  // Splits the range across `at`, if one does, so that a writeback can take exactly the
  // bytes on one side.
  void cut(uint64_t at);
  // Shows each dirty range inside [offset, end) (cut at both ends first) to `decide`, in file
  // order, and freezes for `job` those it takes; stops at the first `stop`. Returns the bytes
  // frozen.
  uint64_t freeze(uint64_t offset, uint64_t end, uint64_t job,
                  const std::function<Freeze(uint64_t start, const CachedRange&)>& decide);
  // Job `job` wrote its ranges: those of [begin, end) still in the map leave it (the kernel
  // caches clean pages). Returns how many left.
  size_t release_job(uint64_t job, uint64_t begin, uint64_t end);

  // The range that holds [offset, offset + size) whole, with its start; nullopt if no single
  // range does.
  std::optional<std::pair<uint64_t, const CachedRange*>> covering(uint64_t offset,
                                                                  uint64_t size) const;
  // Walks [begin, end) in file order: `cached(start, length, range, offset_in_range)` for each
  // part a range holds, `uncached(first, end)` for each gap between them.
  void split(uint64_t begin, uint64_t end,
             const std::function<void(uint64_t start, uint64_t length, const CachedRange& range,
                                      uint64_t into)>& cached,
             const std::function<void(uint64_t first, uint64_t end)>& uncached) const;
  // The first range that ends after `offset` (it may start before it): [start, end).
  std::optional<ByteRun> range_after(uint64_t offset) const;
  // The run of dirty ranges that touch one another around the range that starts at
  // `offset` and ends at `end`: extended to the right as far as it goes, to the left as long
  // as a range starts at most `max_before` bytes before `offset` (a stream's earlier ranges
  // have gone to writeback already). nullopt when no range starts at `offset`.
  std::optional<ByteRun> dirty_run_around(uint64_t offset, uint64_t end, uint64_t max_before) const;
  // When the oldest dirty range became dirty; nullopt when nothing is dirty. Walks every
  // range.
  std::optional<uint64_t> oldest_dirty() const;
  // Whether a dirty range became dirty at or before `t`. What the filesystem's tick asks of
  // every file under its lock, at least every 200 ms and after each batch of work its
  // worker runs (every writeback's completion among them). It walks the ranges
  // (oldest_dirty) only when its bound is at or before `t`: the oldest dirty time its last
  // walk found, or an earlier one inserted since. So a file of many ranges (random writes
  // into a large cache) is typically walked about twice per writeback delay, not at every
  // tick.
  bool dirty_before(uint64_t t);

  bool empty() const { return ranges_.empty(); }
  uint64_t dirty_bytes() const { return dirty_bytes_; }
  // The end of the last range (0 when empty).
  uint64_t end() const;
  size_t ranges() const { return ranges_.size(); }

 private:
  std::map<uint64_t, CachedRange> ranges_;  // by file offset; non-overlapping
  uint64_t dirty_bytes_ = 0;                // in ranges_, not frozen
  uint64_t since_bound_ = UINT64_MAX;       // at or before every dirty range's `since`
};

}  // namespace stripefs::fs
