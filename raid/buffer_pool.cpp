#include "raid/buffer_pool.hpp"

namespace stripefs {

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    heap_ = std::move(other.heap_);
  }
  return *this;
}

void PooledBuffer::release() {
  if (pool_ != nullptr && data_ != nullptr) pool_->give_back(*this);
  pool_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

BufferPool::BufferPool(size_t buffer_size, size_t arena_buffers, size_t keep_heap)
    : size_(buffer_size), keep_heap_(keep_heap), arena_(buffer_size * arena_buffers) {
  free_slices_.reserve(arena_buffers);
  // Hand out low addresses first: the arena's hot part stays small.
  for (size_t i = arena_buffers; i-- > 0;) free_slices_.push_back(arena_.data() + i * size_);
}

PooledBuffer BufferPool::take() {
  PooledBuffer out;
  out.pool_ = this;
  out.size_ = size_;
  {
    std::lock_guard lock(mutex_);
    if (!free_slices_.empty()) {
      out.data_ = free_slices_.back();
      free_slices_.pop_back();
      return out;
    }
    if (!free_heap_.empty()) {
      out.heap_ = std::move(free_heap_.back());
      free_heap_.pop_back();
      out.data_ = out.heap_.data();
      return out;
    }
    ++heap_allocations_;
  }
  out.heap_ = AlignedBuffer(size_);
  out.data_ = out.heap_.data();
  return out;
}

void BufferPool::give_back(PooledBuffer& buffer) {
  std::lock_guard lock(mutex_);
  if (buffer.heap_.data() == nullptr) {
    free_slices_.push_back(buffer.data_);
  } else if (free_heap_.size() < keep_heap_) {
    free_heap_.push_back(std::move(buffer.heap_));
  }
}

uint64_t BufferPool::heap_allocations() const {
  std::lock_guard lock(mutex_);
  return heap_allocations_;
}

}  // namespace stripefs
