#include "buffer_pool.hpp"

namespace stripefs {

PooledBuffer::~PooledBuffer() {
  if (pool_ != nullptr && buffer_.data() != nullptr) pool_->give_back(std::move(buffer_));
}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr && buffer_.data() != nullptr) pool_->give_back(std::move(buffer_));
    pool_ = std::exchange(other.pool_, nullptr);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

PooledBuffer BufferPool::take() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      AlignedBuffer buffer = std::move(free_.back());
      free_.pop_back();
      return PooledBuffer(this, std::move(buffer));
    }
    ++allocations_;
  }
  return PooledBuffer(this, AlignedBuffer(size_));
}

void BufferPool::give_back(AlignedBuffer buffer) {
  std::lock_guard lock(mutex_);
  if (free_.size() < keep_) free_.push_back(std::move(buffer));
}

uint64_t BufferPool::allocations() const {
  std::lock_guard lock(mutex_);
  return allocations_;
}

}  // namespace stripefs
