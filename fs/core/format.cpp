#include "fs/core/format.hpp"

#include <cstring>

#include "raid/ondisk.hpp"

namespace stripefs::fs {

using ondisk::get_le;
using ondisk::put_le;

namespace {

// Superblock field offsets.
constexpr size_t kSbMagic = 0;
constexpr size_t kSbMajor = 8;
constexpr size_t kSbMinor = 10;
constexpr size_t kSbBlockSize = 12;
constexpr size_t kSbTotalBlocks = 16;
constexpr size_t kSbUuid = 24;
constexpr size_t kSbLabel = 40;  // 64 bytes, NUL-padded
constexpr size_t kSbJournalStart = 104;
constexpr size_t kSbJournalBlocks = 112;
constexpr size_t kSbInodeBitmapStart = 120;
constexpr size_t kSbInodeBitmapBlocks = 128;
constexpr size_t kSbBlockBitmapStart = 136;
constexpr size_t kSbBlockBitmapBlocks = 144;
constexpr size_t kSbInodeTableStart = 152;
constexpr size_t kSbInodeCount = 160;
constexpr size_t kSbDataStart = 168;
constexpr size_t kSbStripeBlocks = 176;
constexpr size_t kSbState = 180;
constexpr size_t kSbHashSeed = 184;
constexpr size_t kSbMountCount = 192;
constexpr size_t kSbCreated = 200;
constexpr size_t kSbChecksumStart = 208;  // format 2
constexpr size_t kSbChecksumBlocks = 216;
constexpr size_t kSbOrphanStart = 224;  // minor 1
constexpr size_t kSbOrphanBlocks = 232;
constexpr size_t kSbEnd = 240;
constexpr size_t kSbChecksum = kBlockSize - 4;
static_assert(kSbEnd <= kSbChecksum);
constexpr size_t kLabelBytes = 64;

// Common header.
constexpr size_t kHdrMagic = 0;
constexpr size_t kHdrChecksum = 4;
constexpr size_t kHdrSelf = 8;

// Inode field offsets.
constexpr size_t kInMode = 0;
constexpr size_t kInUid = 4;
constexpr size_t kInGid = 8;
constexpr size_t kInNlink = 12;
constexpr size_t kInSize = 16;
constexpr size_t kInBlocks = 24;
constexpr size_t kInAtime = 32;  // sec i64 + nsec u32, 12 bytes each
constexpr size_t kInMtime = 44;
constexpr size_t kInCtime = 56;
constexpr size_t kInGeneration = 68;
constexpr size_t kInRdev = 72;
constexpr size_t kInParent = 80;
constexpr size_t kInXattr = 88;
constexpr size_t kInTreeDepth = 96;
constexpr size_t kInExtentCount = 100;  // inline extents, or inline symlink length
constexpr size_t kInTreeRoot = 104;
constexpr size_t kInInline = 112;  // kInlineExtents * 24 bytes
constexpr size_t kInInlineEnd = kInInline + kInlineExtents * 24;
constexpr size_t kInFlags = 232;
constexpr size_t kInSymlinkCrc = 236;
constexpr size_t kInXattrBlocks = 240;  // minor 2; zero in inodes written before
constexpr size_t kInChecksum = kInodeSize - 4;
static_assert(kInInlineEnd <= kInFlags && kInFlags + 4 <= kInChecksum);
static_assert(kInlineSymlink < kInlineExtents * 24);
constexpr uint32_t kFlagInlineSymlink = 1;

constexpr size_t kExtentBytes = 24;
static_assert(kHeaderSize + 8 + kLeafExtents * kExtentBytes <= kBlockSize);
static_assert(kHeaderSize + 8 + kIndexEntries * 16 <= kBlockSize);

uint32_t block_checksum(std::span<const std::byte, kBlockSize> block) {
  std::array<std::byte, kBlockSize> copy;
  std::memcpy(copy.data(), block.data(), kBlockSize);
  std::memset(copy.data() + kHdrChecksum, 0, 4);
  return ondisk::crc32c(copy);
}

void put_time(std::span<std::byte> out, size_t at, const Timespec& t) {
  put_le<uint64_t>(out, at, static_cast<uint64_t>(t.sec));
  put_le<uint32_t>(out, at + 8, t.nsec);
}
Timespec get_time(std::span<const std::byte> in, size_t at) {
  return {static_cast<int64_t>(get_le<uint64_t>(in, at)), get_le<uint32_t>(in, at + 8)};
}

void put_extent(std::span<std::byte> out, size_t at, const Extent& e) {
  put_le<uint64_t>(out, at, e.logical);
  put_le<uint64_t>(out, at + 8, e.physical);
  put_le<uint32_t>(out, at + 16, e.length);
  put_le<uint32_t>(out, at + 20, e.unwritten ? 1u : 0u);
}
Extent get_extent(std::span<const std::byte> in, size_t at) {
  return {get_le<uint64_t>(in, at), get_le<uint64_t>(in, at + 8), get_le<uint32_t>(in, at + 16),
          (get_le<uint32_t>(in, at + 20) & 1) != 0};
}

const char* kind_name(BlockKind kind) {
  switch (kind) {
    case BlockKind::dir_header:
      return "directory header";
    case BlockKind::dir_bucket:
      return "directory bucket";
    case BlockKind::extent_leaf:
      return "extent leaf";
    case BlockKind::extent_index:
      return "extent index";
    case BlockKind::xattr:
      return "xattr block";
    case BlockKind::xattr_run:
      return "xattr run block";
    case BlockKind::bitmap:
      return "allocation bitmap";
    case BlockKind::checksums:
      return "checksum table";
  }
  return "block";
}

// Extents must be sorted, non-overlapping and non-empty.
Result<void> check_extents(std::span<const Extent> extents, std::string_view where) {
  uint64_t end = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    const Extent& e = extents[i];
    if (e.length == 0 || e.length > kMaxExtentLength || e.physical == 0) {
      return fail(EUCLEAN, "{}: extent {}: field length/physical is impossible ({} at {})", where,
                  i, e.length, e.physical);
    }
    if (i > 0 && e.logical < end) {
      return fail(EUCLEAN, "{}: extent {}: field logical overlaps the previous extent", where, i);
    }
    end = e.logical_end();
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------- superblock

void encode_fs_superblock(const FsSuperblock& sb, std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  put_le<uint64_t>(out, kSbMagic, kSuperMagic);
  put_le<uint16_t>(out, kSbMajor, sb.major);
  put_le<uint16_t>(out, kSbMinor, sb.minor);
  put_le<uint32_t>(out, kSbBlockSize, kBlockSize);
  put_le<uint64_t>(out, kSbTotalBlocks, sb.total_blocks);
  ondisk::put_uuid(out, kSbUuid, sb.uuid);
  std::memcpy(out.data() + kSbLabel, sb.label.data(), std::min(sb.label.size(), kLabelBytes - 1));
  put_le<uint64_t>(out, kSbJournalStart, sb.journal_start);
  put_le<uint64_t>(out, kSbJournalBlocks, sb.journal_blocks);
  put_le<uint64_t>(out, kSbInodeBitmapStart, sb.inode_bitmap_start);
  put_le<uint64_t>(out, kSbInodeBitmapBlocks, sb.inode_bitmap_blocks);
  put_le<uint64_t>(out, kSbBlockBitmapStart, sb.block_bitmap_start);
  put_le<uint64_t>(out, kSbBlockBitmapBlocks, sb.block_bitmap_blocks);
  put_le<uint64_t>(out, kSbInodeTableStart, sb.inode_table_start);
  put_le<uint64_t>(out, kSbInodeCount, sb.inode_count);
  put_le<uint64_t>(out, kSbDataStart, sb.data_start);
  put_le<uint32_t>(out, kSbStripeBlocks, sb.stripe_blocks);
  put_le<uint32_t>(out, kSbState, static_cast<uint32_t>(sb.state));
  put_le<uint64_t>(out, kSbHashSeed, sb.hash_seed);
  put_le<uint64_t>(out, kSbMountCount, sb.mount_count);
  put_le<uint64_t>(out, kSbCreated, static_cast<uint64_t>(sb.created_sec));
  put_le<uint64_t>(out, kSbChecksumStart, sb.checksum_start);
  put_le<uint64_t>(out, kSbChecksumBlocks, sb.checksum_blocks);
  put_le<uint64_t>(out, kSbOrphanStart, sb.orphan_start);
  put_le<uint64_t>(out, kSbOrphanBlocks, sb.orphan_blocks);
  put_le<uint32_t>(out, kSbChecksum,
                   ondisk::crc32c(std::span<const std::byte>(out.data(), kSbChecksum)));
}

Result<void> check_fits(const FsSuperblock& sb, uint64_t volume_bytes) {
  if (sb.total_blocks * kBlockSize > volume_bytes) {
    return fail(EUCLEAN,
                "filesystem superblock (volume block 0): field total_blocks: {} blocks, but the "
                "volume holds {}",
                sb.total_blocks, volume_bytes / kBlockSize);
  }
  return {};
}

Result<void> check_journal_target(const FsSuperblock& sb, uint64_t target) {
  if (target == 0 || target >= sb.total_blocks ||
      (target >= sb.journal_start && target < sb.journal_start + sb.journal_blocks)) {
    return fail(EUCLEAN, "a record targets block {}, outside metadata", target);
  }
  return {};
}

Result<FsSuperblock> decode_fs_superblock(std::span<const std::byte, kBlockSize> in) {
  constexpr std::string_view where = "filesystem superblock (volume block 0)";
  if (get_le<uint64_t>(in, kSbMagic) != kSuperMagic) {
    return fail(EUCLEAN, "{}: field magic: not a stripefs filesystem", where);
  }
  const uint32_t stored = get_le<uint32_t>(in, kSbChecksum);
  const uint32_t actual = ondisk::crc32c(std::span<const std::byte>(in.data(), kSbChecksum));
  if (stored != actual) {
    return fail(EUCLEAN, "{}: field checksum: stored {:#010x}, computed {:#010x}", where, stored,
                actual);
  }
  FsSuperblock sb;
  sb.major = get_le<uint16_t>(in, kSbMajor);
  sb.minor = get_le<uint16_t>(in, kSbMinor);
  if (sb.major != kFormatMajor && sb.major != kFormatNoChecksums) {
    return fail(EUCLEAN, "{}: field version: format {}.{} is not supported (this is {}.{})", where,
                sb.major, sb.minor, kFormatMajor, kFormatMinor);
  }
  if (get_le<uint32_t>(in, kSbBlockSize) != kBlockSize) {
    return fail(EUCLEAN, "{}: field block_size: {} (must be {})", where,
                get_le<uint32_t>(in, kSbBlockSize), kBlockSize);
  }
  sb.total_blocks = get_le<uint64_t>(in, kSbTotalBlocks);
  sb.uuid = ondisk::get_uuid(in, kSbUuid);
  const char* label = reinterpret_cast<const char*>(in.data() + kSbLabel);
  sb.label.assign(label, strnlen(label, kLabelBytes - 1));
  sb.journal_start = get_le<uint64_t>(in, kSbJournalStart);
  sb.journal_blocks = get_le<uint64_t>(in, kSbJournalBlocks);
  sb.inode_bitmap_start = get_le<uint64_t>(in, kSbInodeBitmapStart);
  sb.inode_bitmap_blocks = get_le<uint64_t>(in, kSbInodeBitmapBlocks);
  sb.block_bitmap_start = get_le<uint64_t>(in, kSbBlockBitmapStart);
  sb.block_bitmap_blocks = get_le<uint64_t>(in, kSbBlockBitmapBlocks);
  sb.inode_table_start = get_le<uint64_t>(in, kSbInodeTableStart);
  sb.inode_count = get_le<uint64_t>(in, kSbInodeCount);
  sb.data_start = get_le<uint64_t>(in, kSbDataStart);
  sb.stripe_blocks = get_le<uint32_t>(in, kSbStripeBlocks);
  sb.state = static_cast<FsState>(get_le<uint32_t>(in, kSbState));
  sb.hash_seed = get_le<uint64_t>(in, kSbHashSeed);
  sb.mount_count = get_le<uint64_t>(in, kSbMountCount);
  sb.created_sec = static_cast<int64_t>(get_le<uint64_t>(in, kSbCreated));
  if (sb.major >= 2) {
    sb.checksum_start = get_le<uint64_t>(in, kSbChecksumStart);
    sb.checksum_blocks = get_le<uint64_t>(in, kSbChecksumBlocks);
  }
  if (sb.minor >= 1) {
    sb.orphan_start = get_le<uint64_t>(in, kSbOrphanStart);
    sb.orphan_blocks = get_le<uint64_t>(in, kSbOrphanBlocks);
  }

  // Regions must be in order, inside the volume, and big enough for what they describe.
  const uint64_t bits = kBitsPerBitmapBlock;
  if (sb.journal_start != 1 || sb.journal_blocks < 16) {
    return fail(EUCLEAN, "{}: field journal_start/journal_blocks: impossible ({}, {})", where,
                sb.journal_start, sb.journal_blocks);
  }
  if (sb.inode_count == 0 || sb.inode_bitmap_start != sb.journal_start + sb.journal_blocks ||
      sb.inode_bitmap_blocks * bits < sb.inode_count) {
    return fail(EUCLEAN, "{}: field inode_bitmap: does not cover {} inodes", where, sb.inode_count);
  }
  if (sb.block_bitmap_start != sb.inode_bitmap_start + sb.inode_bitmap_blocks ||
      sb.block_bitmap_blocks * bits < sb.total_blocks) {
    return fail(EUCLEAN, "{}: field block_bitmap: does not cover {} blocks", where,
                sb.total_blocks);
  }
  if (sb.inode_table_start != sb.block_bitmap_start + sb.block_bitmap_blocks) {
    return fail(EUCLEAN, "{}: field inode_table_start: {} is not after the bitmaps", where,
                sb.inode_table_start);
  }
  const uint64_t table_end = sb.inode_table_start + sb.inode_table_blocks();
  if (sb.major >= 2 && (sb.checksum_start != table_end || sb.checksum_blocks == 0 ||
                        sb.total_blocks < table_end + sb.checksum_blocks ||
                        sb.checksum_blocks * kChecksumsPerBlock <
                            sb.total_blocks - table_end - sb.checksum_blocks)) {
    return fail(EUCLEAN, "{}: field checksum_start/checksum_blocks: impossible ({}, {})", where,
                sb.checksum_start, sb.checksum_blocks);
  }
  const uint64_t metadata_end = table_end + sb.checksum_blocks + sb.orphan_blocks;
  if (sb.orphan_blocks != 0 &&
      (sb.orphan_blocks > sb.total_blocks || sb.orphan_start != table_end + sb.checksum_blocks ||
       sb.orphan_blocks * bits < sb.inode_count)) {
    return fail(EUCLEAN, "{}: field orphan_start/orphan_blocks: impossible ({}, {})", where,
                sb.orphan_start, sb.orphan_blocks);
  }
  if (sb.data_start < metadata_end || sb.data_start >= sb.total_blocks) {
    return fail(EUCLEAN, "{}: field data_start: {} is outside [{}, {})", where, sb.data_start,
                metadata_end, sb.total_blocks);
  }
  if (sb.stripe_blocks == 0) {
    return fail(EUCLEAN, "{}: field stripe_blocks: zero", where);
  }
  if (sb.state != FsState::clean && sb.state != FsState::mounted) {
    return fail(EUCLEAN, "{}: field state: unknown value {}", where,
                static_cast<uint32_t>(sb.state));
  }
  return sb;
}

// ---------------------------------------------------------------- block header

void seal_block(std::span<std::byte, kBlockSize> block, BlockKind kind, uint64_t self) {
  put_le<uint32_t>(block, kHdrMagic, static_cast<uint32_t>(kind));
  put_le<uint64_t>(block, kHdrSelf, self);
  put_le<uint32_t>(block, kHdrChecksum, 0);
  put_le<uint32_t>(block, kHdrChecksum, block_checksum(block));
}

Result<void> verify_block(std::span<const std::byte, kBlockSize> block, BlockKind kind,
                          uint64_t self) {
  if (get_le<uint32_t>(block, kHdrMagic) != static_cast<uint32_t>(kind)) {
    return fail(EUCLEAN, "{} at volume block {}: field magic: {:#010x}, expected {:#010x}",
                kind_name(kind), self, get_le<uint32_t>(block, kHdrMagic),
                static_cast<uint32_t>(kind));
  }
  const uint32_t stored = get_le<uint32_t>(block, kHdrChecksum);
  const uint32_t actual = block_checksum(block);
  if (stored != actual) {
    return fail(EUCLEAN,
                "{} at volume block {}: field checksum: stored {:#010x}, computed {:#010x}",
                kind_name(kind), self, stored, actual);
  }
  if (get_le<uint64_t>(block, kHdrSelf) != self) {
    return fail(EUCLEAN, "{} at volume block {}: field self: says block {} (misdirected write)",
                kind_name(kind), self, get_le<uint64_t>(block, kHdrSelf));
  }
  return {};
}

// ---------------------------------------------------------------- inode

void encode_inode(const DiskInode& n, std::span<std::byte> out) {
  std::memset(out.data(), 0, kInodeSize);
  put_le<uint32_t>(out, kInMode, n.mode);
  put_le<uint32_t>(out, kInUid, n.uid);
  put_le<uint32_t>(out, kInGid, n.gid);
  put_le<uint32_t>(out, kInNlink, n.nlink);
  put_le<uint64_t>(out, kInSize, n.size);
  put_le<uint64_t>(out, kInBlocks, n.blocks);
  put_time(out, kInAtime, n.atime);
  put_time(out, kInMtime, n.mtime);
  put_time(out, kInCtime, n.ctime);
  put_le<uint32_t>(out, kInGeneration, n.generation);
  put_le<uint64_t>(out, kInRdev, n.rdev);
  put_le<uint64_t>(out, kInParent, n.parent);
  put_le<uint64_t>(out, kInXattr, n.xattr_block);
  put_le<uint32_t>(out, kInXattrBlocks, n.xattr_blocks);
  put_le<uint32_t>(out, kInTreeDepth, n.tree_depth);
  put_le<uint64_t>(out, kInTreeRoot, n.tree_root);
  uint32_t flags = 0;
  if (!n.inline_symlink.empty()) {
    flags |= kFlagInlineSymlink;
    put_le<uint32_t>(out, kInExtentCount, static_cast<uint32_t>(n.inline_symlink.size()));
    std::memcpy(out.data() + kInInline, n.inline_symlink.data(), n.inline_symlink.size());
  } else {
    put_le<uint32_t>(out, kInExtentCount, static_cast<uint32_t>(n.inline_extents.size()));
    for (size_t i = 0; i < n.inline_extents.size(); ++i) {
      put_extent(out, kInInline + i * kExtentBytes, n.inline_extents[i]);
    }
  }
  put_le<uint32_t>(out, kInFlags, flags);
  put_le<uint32_t>(out, kInSymlinkCrc, n.symlink_crc);
  put_le<uint32_t>(out, kInChecksum,
                   ondisk::crc32c(std::span<const std::byte>(out.data(), kInChecksum)));
}

uint32_t stored_inode_checksum(std::span<const std::byte> in) {
  return get_le<uint32_t>(in, kInChecksum);
}

Result<DiskInode> decode_inode(std::span<const std::byte> in, uint64_t ino) {
  const uint32_t stored = get_le<uint32_t>(in, kInChecksum);
  const uint32_t actual = ondisk::crc32c(in.first(kInChecksum));
  if (stored != actual) {
    return fail(EUCLEAN, "inode {}: field checksum: stored {:#010x}, computed {:#010x}", ino,
                stored, actual);
  }
  DiskInode n;
  n.mode = get_le<uint32_t>(in, kInMode);
  n.uid = get_le<uint32_t>(in, kInUid);
  n.gid = get_le<uint32_t>(in, kInGid);
  n.nlink = get_le<uint32_t>(in, kInNlink);
  n.size = get_le<uint64_t>(in, kInSize);
  n.blocks = get_le<uint64_t>(in, kInBlocks);
  n.atime = get_time(in, kInAtime);
  n.mtime = get_time(in, kInMtime);
  n.ctime = get_time(in, kInCtime);
  n.generation = get_le<uint32_t>(in, kInGeneration);
  n.rdev = get_le<uint64_t>(in, kInRdev);
  n.parent = get_le<uint64_t>(in, kInParent);
  n.xattr_block = get_le<uint64_t>(in, kInXattr);
  n.xattr_blocks = get_le<uint32_t>(in, kInXattrBlocks);
  n.tree_depth = get_le<uint32_t>(in, kInTreeDepth);
  n.tree_root = get_le<uint64_t>(in, kInTreeRoot);
  const uint32_t count = get_le<uint32_t>(in, kInExtentCount);
  const uint32_t flags = get_le<uint32_t>(in, kInFlags);
  n.symlink_crc = get_le<uint32_t>(in, kInSymlinkCrc);
  if ((flags & kFlagInlineSymlink) != 0) {
    if (count == 0 || count > kInlineSymlink) {
      return fail(EUCLEAN, "inode {}: field symlink length: {}", ino, count);
    }
    n.inline_symlink.assign(reinterpret_cast<const char*>(in.data() + kInInline), count);
  } else {
    if (count > kInlineExtents || (n.tree_depth != 0 && count != 0)) {
      return fail(EUCLEAN, "inode {}: field extent_count: {} with tree depth {}", ino, count,
                  n.tree_depth);
    }
    for (uint32_t i = 0; i < count; ++i) {
      n.inline_extents.push_back(get_extent(in, kInInline + i * kExtentBytes));
    }
    if (auto ok = check_extents(n.inline_extents, fmt::format("inode {}", ino)); !ok) {
      return fail(ok.error());
    }
  }
  if (n.xattr_blocks == 1 || n.xattr_blocks > kMaxXattrBlocks ||
      (n.xattr_blocks != 0 && n.xattr_block == 0)) {
    return fail(EUCLEAN, "inode {}: field xattr_blocks: {} (xattr block {})", ino, n.xattr_blocks,
                n.xattr_block);
  }
  if (n.tree_depth > 4 || (n.tree_depth != 0 && n.tree_root == 0)) {
    return fail(EUCLEAN, "inode {}: field tree_depth: {} (root {})", ino, n.tree_depth,
                n.tree_root);
  }
  return n;
}

// ---------------------------------------------------------------- extent tree

void encode_extent_leaf(std::span<const Extent> extents, uint64_t self,
                        std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  put_le<uint32_t>(out, kHeaderSize, static_cast<uint32_t>(extents.size()));
  for (size_t i = 0; i < extents.size(); ++i) {
    put_extent(out, kHeaderSize + 8 + i * kExtentBytes, extents[i]);
  }
  seal_block(out, BlockKind::extent_leaf, self);
}

Result<std::vector<Extent>> decode_extent_leaf(std::span<const std::byte, kBlockSize> in,
                                               uint64_t self) {
  if (auto ok = verify_block(in, BlockKind::extent_leaf, self); !ok) return fail(ok.error());
  const uint32_t count = get_le<uint32_t>(in, kHeaderSize);
  if (count == 0 || count > kLeafExtents) {
    return fail(EUCLEAN, "extent leaf at volume block {}: field count: {}", self, count);
  }
  std::vector<Extent> extents;
  for (uint32_t i = 0; i < count; ++i) {
    extents.push_back(get_extent(in, kHeaderSize + 8 + i * kExtentBytes));
  }
  if (auto ok = check_extents(extents, fmt::format("extent leaf at volume block {}", self)); !ok) {
    return fail(ok.error());
  }
  return extents;
}

void encode_extent_index(std::span<const IndexEntry> entries, uint32_t level, uint64_t self,
                         std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  put_le<uint32_t>(out, kHeaderSize, static_cast<uint32_t>(entries.size()));
  put_le<uint32_t>(out, kHeaderSize + 4, level);
  for (size_t i = 0; i < entries.size(); ++i) {
    put_le<uint64_t>(out, kHeaderSize + 8 + i * 16, entries[i].first_logical);
    put_le<uint64_t>(out, kHeaderSize + 16 + i * 16, entries[i].block);
  }
  seal_block(out, BlockKind::extent_index, self);
}

Result<std::vector<IndexEntry>> decode_extent_index(std::span<const std::byte, kBlockSize> in,
                                                    uint64_t self, uint32_t* level) {
  if (auto ok = verify_block(in, BlockKind::extent_index, self); !ok) return fail(ok.error());
  const uint32_t count = get_le<uint32_t>(in, kHeaderSize);
  *level = get_le<uint32_t>(in, kHeaderSize + 4);
  if (count == 0 || count > kIndexEntries || *level == 0) {
    return fail(EUCLEAN, "extent index at volume block {}: field count/level: {}/{}", self, count,
                *level);
  }
  std::vector<IndexEntry> entries;
  for (uint32_t i = 0; i < count; ++i) {
    entries.push_back({get_le<uint64_t>(in, kHeaderSize + 8 + i * 16),
                       get_le<uint64_t>(in, kHeaderSize + 16 + i * 16)});
    if (entries.back().block == 0 ||
        (i > 0 && entries[i].first_logical <= entries[i - 1].first_logical)) {
      return fail(EUCLEAN, "extent index at volume block {}: entry {}: field block/first_logical",
                  self, i);
    }
  }
  return entries;
}

// ---------------------------------------------------------------- directories

void encode_dir_header(const DirHeader& h, uint64_t self, std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  put_le<uint32_t>(out, kHeaderSize, h.level);
  put_le<uint64_t>(out, kHeaderSize + 8, h.split);
  put_le<uint64_t>(out, kHeaderSize + 16, h.entries);
  put_le<uint64_t>(out, kHeaderSize + 24, h.next_overflow);
  put_le<uint64_t>(out, kHeaderSize + 32, h.free_overflow);
  seal_block(out, BlockKind::dir_header, self);
}

Result<DirHeader> decode_dir_header(std::span<const std::byte, kBlockSize> in, uint64_t self) {
  if (auto ok = verify_block(in, BlockKind::dir_header, self); !ok) return fail(ok.error());
  DirHeader h;
  h.level = get_le<uint32_t>(in, kHeaderSize);
  h.split = get_le<uint64_t>(in, kHeaderSize + 8);
  h.entries = get_le<uint64_t>(in, kHeaderSize + 16);
  h.next_overflow = get_le<uint64_t>(in, kHeaderSize + 24);
  h.free_overflow = get_le<uint64_t>(in, kHeaderSize + 32);
  if (h.level > 31 || h.split >= (uint64_t{1} << h.level) + (h.level == 0 ? 1 : 0) ||
      h.next_overflow < kOverflowBase) {
    return fail(EUCLEAN, "directory header at volume block {}: field level/split: {}/{}", self,
                h.level, h.split);
  }
  return h;
}

size_t DirBucket::bytes() const {
  size_t total = 0;
  for (const DirEntry& e : entries) total += entry_bytes(e.name.size());
  return total;
}

void encode_dir_bucket(const DirBucket& b, uint64_t self, std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  put_le<uint16_t>(out, kHeaderSize, static_cast<uint16_t>(b.entries.size()));
  put_le<uint64_t>(out, kHeaderSize + 4, b.overflow);
  size_t at = kHeaderSize + 12;
  for (const DirEntry& e : b.entries) {
    put_le<uint64_t>(out, at, e.ino);
    put_le<uint64_t>(out, at + 8, e.key);
    put_le<uint8_t>(out, at + 16, e.type);
    put_le<uint8_t>(out, at + 17, static_cast<uint8_t>(e.name.size()));
    std::memcpy(out.data() + at + 18, e.name.data(), e.name.size());
    at += DirBucket::entry_bytes(e.name.size());
  }
  seal_block(out, BlockKind::dir_bucket, self);
}

Result<DirBucket> decode_dir_bucket(std::span<const std::byte, kBlockSize> in, uint64_t self) {
  if (auto ok = verify_block(in, BlockKind::dir_bucket, self); !ok) return fail(ok.error());
  DirBucket b;
  const uint16_t count = get_le<uint16_t>(in, kHeaderSize);
  b.overflow = get_le<uint64_t>(in, kHeaderSize + 4);
  size_t at = kHeaderSize + 12;
  for (uint16_t i = 0; i < count; ++i) {
    if (at + 18 > kBlockSize) {
      return fail(EUCLEAN, "directory bucket at volume block {}: entry {}: runs past the block",
                  self, i);
    }
    DirEntry e;
    e.ino = get_le<uint64_t>(in, at);
    e.key = get_le<uint64_t>(in, at + 8);
    e.type = get_le<uint8_t>(in, at + 16);
    const size_t length = get_le<uint8_t>(in, at + 17);
    if (length == 0 || at + 18 + length > kBlockSize || e.ino == 0) {
      return fail(EUCLEAN, "directory bucket at volume block {}: entry {}: field name_length/ino",
                  self, i);
    }
    e.name.assign(reinterpret_cast<const char*>(in.data() + at + 18), length);
    at += 18 + length;
    b.entries.push_back(std::move(e));
  }
  return b;
}

Result<std::optional<DirEntry>> find_in_dir_bucket(std::span<const std::byte, kBlockSize> in,
                                                   uint64_t self, uint64_t key,
                                                   std::string_view name, uint64_t* overflow) {
  if (auto ok = verify_block(in, BlockKind::dir_bucket, self); !ok) return fail(ok.error());
  const uint16_t count = get_le<uint16_t>(in, kHeaderSize);
  *overflow = get_le<uint64_t>(in, kHeaderSize + 4);
  size_t at = kHeaderSize + 12;
  for (uint16_t i = 0; i < count; ++i) {
    if (at + 18 > kBlockSize) {
      return fail(EUCLEAN, "directory bucket at volume block {}: entry {}: runs past the block",
                  self, i);
    }
    const size_t length = get_le<uint8_t>(in, at + 17);
    if (length == 0 || at + 18 + length > kBlockSize) {
      return fail(EUCLEAN, "directory bucket at volume block {}: entry {}: field name_length", self,
                  i);
    }
    if (get_le<uint64_t>(in, at + 8) == key && length == name.size() &&
        std::memcmp(in.data() + at + 18, name.data(), length) == 0) {
      DirEntry e;
      e.ino = get_le<uint64_t>(in, at);
      if (e.ino == 0) {
        return fail(EUCLEAN, "directory bucket at volume block {}: entry {}: field ino is 0", self,
                    i);
      }
      e.key = key;
      e.type = get_le<uint8_t>(in, at + 16);
      e.name = std::string(name);
      return std::optional<DirEntry>(std::move(e));
    }
    at += 18 + length;
  }
  return std::optional<DirEntry>();
}

// ---------------------------------------------------------------- symlinks

uint32_t data_checksum(std::span<const std::byte> block) {
  return ondisk::crc32c(block);
}

uint32_t symlink_checksum(std::string_view target) {
  return ondisk::crc32c(std::as_bytes(std::span(target.data(), target.size())));
}

Result<std::string> decode_symlink(std::span<const std::byte, kBlockSize> in, uint64_t ino,
                                   uint64_t length, uint32_t crc) {
  if (length == 0 || length > kMaxSymlinkLength) {
    return fail(EUCLEAN, "inode {}: field size: symlink length {}", ino, length);
  }
  std::string target(reinterpret_cast<const char*>(in.data()), length);
  if (symlink_checksum(target) != crc) {
    return fail(EUCLEAN, "inode {}: symlink target block: field checksum does not match", ino);
  }
  return target;
}

}  // namespace stripefs::fs
