// Page-aligned buffers for file data, recycled: a 1 MiB write or read that allocated fresh
// memory each time would pay for an mmap, 256 page faults and an munmap. New buffers come
// from the DataArena while it has room (raid/data_arena.hpp: memory io_uring has registered,
// so member requests on them are fixed-buffer requests), else from the heap.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include "raid/aligned_buffer.hpp"

namespace stripefs::fs {

class DataBuffers : public std::enable_shared_from_this<DataBuffers> {
 public:
  // Keeps at most `limit` bytes of idle buffers, plus up to kThreadCacheBytes of small ones
  // per thread that has returned some.
  static std::shared_ptr<DataBuffers> create(size_t limit);
  // A buffer of at least `size` bytes (exactly `size` visible through span()); it goes back
  // to the pool when the last reference goes. Its contents are undefined.
  std::shared_ptr<AlignedBuffer> get(size_t size);

  // Small buffers (below 64 KiB: a 4 KiB read takes one per request) are first returned to
  // a cache of the thread that drops them, and taken from the asking thread's cache: a read
  // answered on the thread that asked reuses its buffer without touching the shared lock,
  // which eight FUSE workers would otherwise fight over twice per read. (Inline members:
  // with io_uring members the ring thread drops the buffers, so workers use the pool.)
  static constexpr size_t kThreadCacheBytes = 256 * 1024;

 private:
  explicit DataBuffers(size_t limit) : limit_(limit) {}
  static size_t bucket_of(size_t size);
  void put(AlignedBuffer* buffer, size_t bucket);
  std::mutex mutex_;
  std::map<size_t, std::vector<AlignedBuffer>> idle_;  // by capacity
  size_t idle_bytes_ = 0;
  size_t limit_;
};

}  // namespace stripefs::fs
