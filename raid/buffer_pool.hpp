// Fixed-size, page-aligned buffers recycled through a free list, so the write path never
// pays for allocation (a fresh 128 KiB malloc is an mmap, page faults and an munmap).
//
// The first `arena_buffers` buffers are slices of one arena, which can be registered with
// io_uring as a fixed buffer; beyond that the pool falls back to the heap rather than fail.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "raid/aligned_buffer.hpp"

namespace stripefs {

class BufferPool;

// A buffer on loan from a pool; goes back on destruction.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  ~PooledBuffer() { release(); }
  PooledBuffer(PooledBuffer&& other) noexcept { *this = std::move(other); }
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class BufferPool;
  void release();

  BufferPool* pool_ = nullptr;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  AlignedBuffer heap_;  // owns data_ when it is not an arena slice
};

class BufferPool {
 public:
  // Buffers of `buffer_size` bytes: `arena_buffers` of them in the arena, and at most
  // `keep_heap` idle heap buffers kept for reuse.
  BufferPool(size_t buffer_size, size_t arena_buffers, size_t keep_heap);

  PooledBuffer take();
  size_t buffer_size() const { return size_; }
  // The arena, for IoEngine::register_buffer. Empty when arena_buffers was 0.
  std::span<std::byte> arena() const { return arena_.span(); }
  uint64_t heap_allocations() const;  // stays flat in a steady state

 private:
  friend class PooledBuffer;
  void give_back(PooledBuffer& buffer);

  size_t size_;
  size_t keep_heap_;
  AlignedBuffer arena_;
  mutable std::mutex mutex_;
  std::vector<std::byte*> free_slices_;
  std::vector<AlignedBuffer> free_heap_;
  uint64_t heap_allocations_ = 0;
};

}  // namespace stripefs
