#include "fs/core/orphan_list.hpp"

#include <algorithm>

namespace stripefs::fs {

Result<void> OrphanList::load(MetaStore& meta) {
  listed_.clear();
  for (uint64_t b = 0; b < blocks_; ++b) {
    const uint64_t self = start_ + b;
    if (auto ok = meta.read_as(self,
                               [self](std::span<const std::byte, kBlockSize> image) {
                                 return verify_block(image, BlockKind::bitmap, self);
                               });
        !ok) {
      return fail(ok.error().code, "orphan list: {}", ok.error().message);
    }
    auto block = meta.read(self);
    if (!block) return fail(block.error());
    // Kept cached: a block changed later is never read back unchecked (modify() reads
    // through on a miss), and listed_ stays what the block holds.
    meta.pin(self);
    const uint64_t first = b * kBitsPerBitmapBlock;
    for (uint64_t i = 0; i < kBitsPerBitmapBlock && first + i < count_; i += 8) {
      const auto byte = std::to_integer<uint8_t>((*block)[kHeaderSize + i / 8]);
      for (unsigned bit = 0; byte != 0 && bit < 8 && first + i + bit < count_; ++bit) {
        if ((byte >> bit) & 1) listed_.insert(first + i + bit + 1);  // bit n: inode n + 1
      }
    }
  }
  return {};
}

void OrphanList::set(MetaStore& meta, uint64_t ino, bool listed) {
  if (ino == 0 || ino > count_ || listed_.contains(ino) == listed) return;
  if (listed) {
    listed_.insert(ino);
  } else {
    listed_.erase(ino);
  }
  const uint64_t item = ino - 1;
  const uint64_t self = start_ + item / kBitsPerBitmapBlock;
  auto block = meta.modify(self);
  const uint64_t bit = item % kBitsPerBitmapBlock;
  std::byte& byte = block[kHeaderSize + bit / 8];
  const std::byte mask{static_cast<uint8_t>(1u << (bit % 8))};
  byte = listed ? (byte | mask) : (byte & ~mask);
  seal_block(block, BlockKind::bitmap, self);
}

std::vector<uint64_t> OrphanList::inodes() const {
  std::vector<uint64_t> out(listed_.begin(), listed_.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace stripefs::fs
