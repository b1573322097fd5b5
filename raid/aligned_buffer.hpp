// A buffer aligned for O_DIRECT and SIMD parity (page alignment): from the heap, or, made with
// from_arena(), from the process's DataArena, which io_uring has registered (fixed buffers).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "raid/data_arena.hpp"

namespace stripefs {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size) : size_(size) {
    if (size == 0) return;
    const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  // `size` bytes from the DataArena; an empty buffer (size() == 0) when the arena has no room.
  static AlignedBuffer from_arena(size_t size) {
    AlignedBuffer b;
    b.data_ = size == 0 ? nullptr : DataArena::shared().allocate(size);
    if (b.data_ != nullptr) {
      b.size_ = size;
      b.arena_ = true;
    }
    return b;
  }
  ~AlignedBuffer() {
    if (arena_) {
      DataArena::shared().release(data_);
    } else {
      std::free(data_);
    }
  }
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        arena_(std::exchange(other.arena_, false)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(arena_, other.arena_);
    return *this;
  }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // Changes the visible size; `size` must not exceed what was allocated (pools reuse one
  // allocation for requests of different sizes).
  void set_size(size_t size) { size_ = size; }
  std::span<std::byte> span() const { return {data_, size_}; }
  void zero() { std::memset(data_, 0, size_); }
  bool in_arena() const { return arena_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool arena_ = false;
};

}  // namespace stripefs
