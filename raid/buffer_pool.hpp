// Fixed-size, page-aligned buffers recycled through a free list, so the write path never
// pays for allocation (a fresh 128 KiB malloc is an mmap, page faults and an munmap).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "aligned_buffer.hpp"

namespace stripefs {

class BufferPool;

// A buffer on loan from a pool; goes back on destruction.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(BufferPool* pool, AlignedBuffer buffer) : pool_(pool), buffer_(std::move(buffer)) {}
  ~PooledBuffer();
  PooledBuffer(PooledBuffer&&) noexcept = default;
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;

  std::byte* data() const { return buffer_.data(); }
  size_t size() const { return buffer_.size(); }

 private:
  BufferPool* pool_ = nullptr;
  AlignedBuffer buffer_;
};

class BufferPool {
 public:
  // Buffers of `buffer_size` bytes; at most `keep` idle ones are kept for reuse.
  BufferPool(size_t buffer_size, size_t keep) : size_(buffer_size), keep_(keep) {}

  PooledBuffer take();
  size_t buffer_size() const { return size_; }
  uint64_t allocations() const;  // buffers ever allocated: stays flat in a steady state

 private:
  friend class PooledBuffer;
  void give_back(AlignedBuffer buffer);

  size_t size_;
  size_t keep_;
  mutable std::mutex mutex_;
  std::vector<AlignedBuffer> free_;
  uint64_t allocations_ = 0;
};

}  // namespace stripefs
