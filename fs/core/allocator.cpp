#include "fs/core/allocator.hpp"

#include "raid/ondisk.hpp"

namespace stripefs::fs {

BitmapAllocator::BitmapAllocator(uint64_t start, uint64_t blocks, uint64_t count)
    : start_(start), blocks_(blocks), count_(count), words_((count + 63) / 64, 0) {}

Result<void> BitmapAllocator::load(MetaStore& meta) {
  free_ = 0;
  for (uint64_t b = 0; b < blocks_; ++b) {
    const uint64_t self = start_ + b;
    if (auto ok = meta.read_as(self,
                               [self](std::span<const std::byte, kBlockSize> image) {
                                 return verify_block(image, BlockKind::bitmap, self);
                               });
        !ok)
      return fail(ok.error());
    auto block = meta.read(self);
    if (!block) return fail(block.error());
    meta.pin(self);
    const uint64_t first = b * kBitsPerBitmapBlock;
    for (uint64_t i = 0; i < kBitsPerBitmapBlock && first + i < count_; ++i) {
      const uint8_t byte = std::to_integer<uint8_t>((*block)[kHeaderSize + i / 8]);
      if ((byte >> (i % 8)) & 1) {
        words_[(first + i) / 64] |= uint64_t{1} << ((first + i) % 64);
      } else {
        ++free_;
      }
    }
  }
  return {};
}

void BitmapAllocator::set_range(uint64_t first, uint64_t count, bool value) {
  for (uint64_t i = first; i < first + count; ++i) {
    const uint64_t bit = uint64_t{1} << (i % 64);
    if (value) {
      words_[i / 64] |= bit;
    } else {
      words_[i / 64] &= ~bit;
    }
  }
  if (value) {
    free_ -= count;
  } else {
    free_ += count;
  }
}

uint64_t BitmapAllocator::run_at(uint64_t first, uint64_t want) const {
  uint64_t n = 0;
  while (n < want && first + n < count_ && !test(first + n)) ++n;
  return n;
}

Result<std::pair<uint64_t, uint64_t>> BitmapAllocator::reserve(uint64_t want, uint64_t goal,
                                                               uint64_t align) {
  auto run = find_run(want, goal, align);
  if (run && watch_ != nullptr) watch_->add(run->first, run->first + run->second);
  return run;
}

Result<std::pair<uint64_t, uint64_t>> BitmapAllocator::find_run(uint64_t want, uint64_t goal,
                                                                uint64_t align) {
  if (free_ == 0) return fail(ENOSPC, "no free space");
  want = std::max<uint64_t>(want, 1);
  align = std::max<uint64_t>(align, 1);
  // 1. Right where the caller wants it (extending a file in place).
  if (goal != 0 && goal < count_) {
    if (const uint64_t n = run_at(goal, want); n > 0) {
      set_range(goal, n, true);
      return std::pair{goal, n};
    }
  }
  // 2. A whole free run of `want` (aligned, for stripe-sized requests); 3. the longest run
  // seen. Next-fit from the cursor, skipping busy words 64 at a time.
  uint64_t best_first = 0, best_length = 0;
  for (uint64_t scanned = 0; scanned < count_;) {
    uint64_t i = (cursor_ + scanned) % count_;
    if (words_[i / 64] == ~uint64_t{0}) {
      const uint64_t skip = 64 - i % 64;
      scanned += skip;
      continue;
    }
    if (test(i)) {
      ++scanned;
      continue;
    }
    const uint64_t aligned = (i + align - 1) / align * align;
    const uint64_t n = run_at(i, want + (aligned - i));
    if (aligned < i + n && i + n - aligned >= want) {
      set_range(aligned, want, true);
      cursor_ = aligned + want;
      return std::pair{aligned, want};
    }
    if (n > best_length) {
      best_first = i;
      best_length = n;
    }
    scanned += std::max<uint64_t>(n, 1);
  }
  if (best_length == 0) return fail(ENOSPC, "no free space");
  best_length = std::min(best_length, want);
  set_range(best_first, best_length, true);
  cursor_ = best_first + best_length;
  return std::pair{best_first, best_length};
}

void BitmapAllocator::set_disk(MetaStore& meta, uint64_t first, uint64_t count, bool value) {
  uint64_t i = first;
  while (i < first + count) {
    const uint64_t b = i / kBitsPerBitmapBlock;
    auto block = meta.modify(start_ + b);
    const uint64_t end = std::min(first + count, (b + 1) * kBitsPerBitmapBlock);
    for (; i < end; ++i) {
      const uint64_t bit = i - b * kBitsPerBitmapBlock;
      std::byte& byte = block[kHeaderSize + bit / 8];
      const std::byte mask{static_cast<uint8_t>(1u << (bit % 8))};
      byte = value ? (byte | mask) : (byte & ~mask);
    }
    seal_block(block, BlockKind::bitmap, start_ + b);
  }
}

void BitmapAllocator::mark_used(MetaStore& meta, uint64_t first, uint64_t count) {
  set_disk(meta, first, count, true);
}

void BitmapAllocator::unreserve(uint64_t first, uint64_t count) {
  set_range(first, count, false);
}

void BitmapAllocator::release(MetaStore& meta, uint64_t first, uint64_t count) {
  if (watch_ != nullptr) watch_->add(first, first + count);
  set_disk(meta, first, count, false);
  deferred_.push_back({meta.running(), first, count});
  deferred_total_ += count;
}

void BitmapAllocator::checkpointed(uint64_t transaction) {
  while (!deferred_.empty() && deferred_.front().transaction <= transaction) {
    set_range(deferred_.front().first, deferred_.front().count, false);
    deferred_total_ -= deferred_.front().count;
    deferred_.pop_front();
  }
}

}  // namespace stripefs::fs
