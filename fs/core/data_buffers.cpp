#include "fs/core/data_buffers.hpp"

#include <array>

namespace stripefs::fs {

namespace {
constexpr size_t kStep = 64 * 1024;
constexpr size_t kSmallStep = 4096;

// A thread's small idle buffers, by bucket (4 KiB .. 60 KiB). Plain memory, owned by the
// thread rather than by a pool: any pool may take them, and they are freed at thread exit.
struct ThreadCache {
  std::array<std::vector<AlignedBuffer>, kStep / kSmallStep> idle;
  size_t bytes = 0;
};
thread_local ThreadCache thread_cache;

size_t slot_of(size_t bucket) {
  return bucket / kSmallStep - 1;
}
}  // namespace

std::shared_ptr<DataBuffers> DataBuffers::create(size_t limit) {
  return std::shared_ptr<DataBuffers>(new DataBuffers(limit));
}

// Capacities are 64 KiB multiples, or 4 KiB multiples below 64 KiB: close to what was asked
// (the cache's accounting counts what was asked), and few enough kinds to be reused. Small
// ones are pooled too: a 4 KiB read takes one per request, and page-aligned heap blocks
// are not cheap.
size_t DataBuffers::bucket_of(size_t size) {
  const size_t step = size < kStep ? kSmallStep : kStep;
  return (std::max(size, kSmallStep) + step - 1) / step * step;
}

std::shared_ptr<AlignedBuffer> DataBuffers::get(size_t size) {
  const size_t bucket = bucket_of(size);
  AlignedBuffer buffer;
  if (bucket < kStep) {
    auto& idle = thread_cache.idle[slot_of(bucket)];
    if (!idle.empty()) {
      buffer = std::move(idle.back());
      idle.pop_back();
      thread_cache.bytes -= bucket;
    }
  }
  if (buffer.size() == 0) {
    std::lock_guard lock(mutex_);
    auto it = idle_.find(bucket);
    if (it != idle_.end() && !it->second.empty()) {
      buffer = std::move(it->second.back());
      it->second.pop_back();
      idle_bytes_ -= bucket;
    }
  }
  // New memory from the arena (registered with io_uring) while it has room; else the heap.
  if (buffer.size() == 0) buffer = AlignedBuffer::from_arena(bucket);
  if (buffer.size() == 0) buffer = AlignedBuffer(bucket);
  // The visible size is what was asked for; the capacity goes back with it.
  auto* raw = new AlignedBuffer(std::move(buffer));
  raw->set_size(size);
  std::weak_ptr<DataBuffers> pool = weak_from_this();
  return std::shared_ptr<AlignedBuffer>(raw, [pool, bucket](AlignedBuffer* b) {
    if (auto p = pool.lock()) {
      p->put(b, bucket);
    } else {
      delete b;
    }
  });
}

void DataBuffers::put(AlignedBuffer* buffer, size_t bucket) {
  std::unique_ptr<AlignedBuffer> owned(buffer);
  owned->set_size(bucket);
  if (bucket < kStep && thread_cache.bytes + bucket <= kThreadCacheBytes) {
    thread_cache.idle[slot_of(bucket)].push_back(std::move(*owned));
    thread_cache.bytes += bucket;
    return;
  }
  std::lock_guard lock(mutex_);
  if (idle_bytes_ + bucket > limit_) return;  // freed
  idle_[bucket].push_back(std::move(*owned));
  idle_bytes_ += bucket;
}

}  // namespace stripefs::fs
