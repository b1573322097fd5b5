// Metadata blocks checked by their own checksums, for the scrub (scrub_metadata.hpp).
#include "fs/core/scrub_metadata.hpp"

#include <algorithm>

#include "fs/core/format.hpp"
#include "raid/ondisk.hpp"

namespace stripefs::fs {

namespace {

using Verdict = ScrubBatch::Verdict;

Verdict verdict(bool ok) {
  return ok ? Verdict::good : Verdict::bad;
}

bool sealed_as(std::span<const std::byte, kBlockSize> block, BlockKind kind, uint64_t self) {
  return verify_block(block, kind, self).has_value();
}

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace

Verdict metadata_verdict(MetaKind kind, uint64_t block, std::span<const std::byte> bytes,
                         uint16_t slots, uint64_t inode_table_start) {
  if (bytes.size() != kBlockSize) return Verdict::unknown;
  const std::span<const std::byte, kBlockSize> b(bytes.data(), kBlockSize);
  switch (kind) {
    case MetaKind::none:
      return Verdict::unknown;
    case MetaKind::superblock:
      return verdict(decode_fs_superblock(b).has_value());
    case MetaKind::bitmap:
      if (all_zero(bytes)) return Verdict::unknown;
      return verdict(sealed_as(b, BlockKind::bitmap, block));
    case MetaKind::checksums:
      if (all_zero(bytes)) return Verdict::unknown;
      return verdict(sealed_as(b, BlockKind::checksums, block));
    case MetaKind::inode_table: {
      if (slots == 0) return Verdict::unknown;
      const uint64_t first_ino = (block - inode_table_start) * kInodesPerBlock + 1;
      for (uint32_t slot = 0; slot < kInodesPerBlock; ++slot) {
        if ((slots & (1u << slot)) == 0) continue;
        if (!decode_inode(bytes.subspan(slot * kInodeSize, kInodeSize), first_ino + slot)) {
          return Verdict::bad;
        }
      }
      return Verdict::good;
    }
    case MetaKind::directory: {
      // A directory may keep blocks mapped that it has not used yet (a split cut short by
      // ENOSPC leaves them for the next attempt): only a block that says it is a
      // directory block is judged.
      const uint32_t magic = ondisk::get_le<uint32_t>(bytes, 0);
      if (magic == static_cast<uint32_t>(BlockKind::dir_header)) {
        return verdict(sealed_as(b, BlockKind::dir_header, block));
      }
      if (magic == static_cast<uint32_t>(BlockKind::dir_bucket)) {
        return verdict(sealed_as(b, BlockKind::dir_bucket, block));
      }
      return Verdict::unknown;
    }
    case MetaKind::extent_tree:
      return verdict(sealed_as(b, BlockKind::extent_leaf, block) ||
                     sealed_as(b, BlockKind::extent_index, block));
    case MetaKind::xattr:
      return verdict(sealed_as(b, BlockKind::xattr, block) ||
                     sealed_as(b, BlockKind::xattr_run, block));
  }
  return Verdict::unknown;
}

}  // namespace stripefs::fs
