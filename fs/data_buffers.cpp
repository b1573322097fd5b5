#include "data_buffers.hpp"

namespace stripefs::fs {

namespace {
constexpr size_t kSmallest = 64 * 1024;  // below this, the heap is cheap enough
}

std::shared_ptr<DataBuffers> DataBuffers::create(size_t limit) {
  return std::shared_ptr<DataBuffers>(new DataBuffers(limit));
}

// Capacities are 64 KiB multiples: close to what was asked (the cache's accounting counts
// what was asked), and few enough kinds to be reused.
size_t DataBuffers::bucket_of(size_t size) {
  return (std::max(size, kSmallest) + kSmallest - 1) / kSmallest * kSmallest;
}

std::shared_ptr<AlignedBuffer> DataBuffers::get(size_t size) {
  if (size < kSmallest) return std::make_shared<AlignedBuffer>(size);
  const size_t bucket = bucket_of(size);
  AlignedBuffer buffer;
  {
    std::lock_guard lock(mutex_);
    auto it = idle_.find(bucket);
    if (it != idle_.end() && !it->second.empty()) {
      buffer = std::move(it->second.back());
      it->second.pop_back();
      idle_bytes_ -= bucket;
    }
  }
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
  std::lock_guard lock(mutex_);
  if (idle_bytes_ + bucket > limit_) return;  // freed
  idle_[bucket].push_back(std::move(*owned));
  idle_bytes_ += bucket;
}

}  // namespace stripefs::fs
