#include "fs/core/make_fs.hpp"

#include <sys/stat.h>

#include <cstring>
#include <ctime>
#include <random>

#include "fs/core/volume_device.hpp"
#include "journal/journal.hpp"
#include "raid/aligned_buffer.hpp"

namespace stripefs::fs {

Result<FsSuperblock> plan_layout(uint64_t total_blocks, uint32_t stripe_blocks,
                                 const MakeFsOptions& options) {
  FsSuperblock sb;
  sb.total_blocks = total_blocks;
  sb.stripe_blocks = std::max<uint32_t>(stripe_blocks, 1);
  sb.uuid = options.uuid;
  if (sb.uuid == Uuid{}) sb.uuid = generate_uuid();
  if (options.label.size() > 63) return fail(EINVAL, "label longer than 63 bytes");
  sb.label = options.label;
  sb.journal_start = 1;
  sb.journal_blocks = options.journal_blocks != 0
                          ? options.journal_blocks
                          : std::clamp<uint64_t>(total_blocks / 64, 1024, 32768);
  if (sb.journal_blocks < 256) return fail(EINVAL, "journal smaller than 1 MiB");
  sb.inode_count = options.inode_count != 0
                       ? options.inode_count
                       : std::clamp<uint64_t>(total_blocks / 4, 1024, 1ull << 32);
  sb.inode_bitmap_start = sb.journal_start + sb.journal_blocks;
  sb.inode_bitmap_blocks = (sb.inode_count + kBitsPerBitmapBlock - 1) / kBitsPerBitmapBlock;
  sb.block_bitmap_start = sb.inode_bitmap_start + sb.inode_bitmap_blocks;
  sb.block_bitmap_blocks = (total_blocks + kBitsPerBitmapBlock - 1) / kBitsPerBitmapBlock;
  sb.inode_table_start = sb.block_bitmap_start + sb.block_bitmap_blocks;
  const uint64_t table_end = sb.inode_table_start + sb.inode_table_blocks();
  if (!options.checksums) {
    sb.major = kFormatNoChecksums;
  } else if (table_end < total_blocks) {
    sb.checksum_start = table_end;
    sb.checksum_blocks = (total_blocks - table_end + kChecksumsPerBlock - 1) / kChecksumsPerBlock;
  }
  sb.orphan_start = table_end + sb.checksum_blocks;
  sb.orphan_blocks = sb.inode_bitmap_blocks;
  const uint64_t metadata_end = sb.orphan_start + sb.orphan_blocks;
  sb.data_start = (metadata_end + sb.stripe_blocks - 1) / sb.stripe_blocks * sb.stripe_blocks;
  // Room for the root directory and a few stripes of data at least.
  if (sb.data_start + 2 + 4 * uint64_t{sb.stripe_blocks} > total_blocks) {
    return fail(ENOSPC,
                "volume of {} blocks is too small: metadata alone takes {} blocks (try a "
                "smaller --journal-size or fewer inodes)",
                total_blocks, sb.data_start);
  }
  std::random_device random;
  sb.hash_seed = (uint64_t{random()} << 32) | random();
  sb.created_sec = time(nullptr);
  sb.state = FsState::clean;
  return sb;
}

namespace {

// One bitmap block with items [0, used) of its range marked in use.
void encode_bitmap(uint64_t index, uint64_t used, uint64_t self,
                   std::span<std::byte, kBlockSize> out) {
  std::memset(out.data(), 0, kBlockSize);
  const uint64_t first = index * kBitsPerBitmapBlock;
  for (uint64_t i = first; i < std::min(used, first + kBitsPerBitmapBlock); ++i) {
    const uint64_t bit = i - first;
    out[kHeaderSize + bit / 8] |= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
  }
  seal_block(out, BlockKind::bitmap, self);
}

}  // namespace

Result<FsSuperblock> make_filesystem(Volume& volume, const MakeFsOptions& options) {
  const uint32_t stripe_blocks = static_cast<uint32_t>(
      std::max<uint64_t>(volume.geometry().stripe_data_size() / kBlockSize, 1));
  auto planned = plan_layout(volume.size() / kBlockSize, stripe_blocks, options);
  if (!planned) return planned;
  FsSuperblock sb = *planned;

  VolumeDevice journal_area(volume, 0, (sb.journal_start + sb.journal_blocks) * kBlockSize);
  if (auto r =
          Journal::format(journal_area, sb.journal_start * kBlockSize, sb.journal_blocks, sb.uuid);
      !r)
    return fail(r.error());

  AlignedBuffer block(kBlockSize);
  auto span = std::span<std::byte, kBlockSize>(block.data(), kBlockSize);
  // The root directory takes the first two data blocks: its header and bucket 0.
  const uint64_t root_header = sb.data_start, root_bucket = sb.data_start + 1;
  for (uint64_t b = 0; b < sb.inode_bitmap_blocks; ++b) {
    encode_bitmap(b, 1, sb.inode_bitmap_start + b, span);
    if (auto r = volume.write((sb.inode_bitmap_start + b) * kBlockSize, block.span()); !r)
      return fail(r.error());
  }
  for (uint64_t b = 0; b < sb.orphan_blocks; ++b) {  // no inode listed
    encode_bitmap(b, 0, sb.orphan_start + b, span);
    if (auto r = volume.write((sb.orphan_start + b) * kBlockSize, block.span()); !r)
      return fail(r.error());
  }
  for (uint64_t b = 0; b < sb.block_bitmap_blocks; ++b) {
    encode_bitmap(b, sb.data_start + 2, sb.block_bitmap_start + b, span);
    // Blocks past the end of the volume are marked used, so they are never handed out.
    const uint64_t first = b * kBitsPerBitmapBlock;
    for (uint64_t i = std::max(first, sb.total_blocks); i < first + kBitsPerBitmapBlock; ++i) {
      const uint64_t bit = i - first;
      block.data()[kHeaderSize + bit / 8] |= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    }
    seal_block(span, BlockKind::bitmap, sb.block_bitmap_start + b);
    if (auto r = volume.write((sb.block_bitmap_start + b) * kBlockSize, block.span()); !r)
      return fail(r.error());
  }

  // The inode table's first block: the root, then empty slots with valid checksums.
  block.zero();
  const timespec now{time(nullptr), 0};
  for (uint32_t slot = 0; slot < kInodesPerBlock; ++slot) {
    DiskInode inode;
    if (slot == 0) {
      inode.mode = S_IFDIR | 0755;
      inode.uid = options.root_uid;
      inode.gid = options.root_gid;
      inode.nlink = 2;
      inode.size = 2 * kBlockSize;
      inode.blocks = 2;
      inode.atime = inode.mtime = inode.ctime = {now.tv_sec, 0};
      inode.generation = 1;
      inode.parent = kRootInode;
      inode.inline_extents.push_back({0, root_header, 2, false});
    }
    encode_inode(inode, block.span().subspan(slot * kInodeSize, kInodeSize));
  }
  if (auto r = volume.write(sb.inode_table_start * kBlockSize, block.span()); !r)
    return fail(r.error());

  // The checksum table, every block sealed (all zero: no data written yet), so that a
  // table block that fails its check later is damage, never a block not yet used. Written
  // a stripe's worth at a time.
  if (sb.has_checksums()) {
    const uint64_t batch = std::max<uint64_t>(stripe_blocks, 64);
    AlignedBuffer blocks(batch * kBlockSize);
    for (uint64_t b = 0; b < sb.checksum_blocks; b += batch) {
      const uint64_t n = std::min(batch, sb.checksum_blocks - b);
      blocks.zero();
      for (uint64_t i = 0; i < n; ++i) {
        seal_block(std::span<std::byte, kBlockSize>(blocks.data() + i * kBlockSize, kBlockSize),
                   BlockKind::checksums, sb.checksum_start + b + i);
      }
      if (auto r = volume.write((sb.checksum_start + b) * kBlockSize,
                                blocks.span().subspan(0, n * kBlockSize));
          !r)
        return fail(r.error());
    }
  }

  encode_dir_header(DirHeader{}, root_header, span);
  if (auto r = volume.write(root_header * kBlockSize, block.span()); !r) return fail(r.error());
  encode_dir_bucket(DirBucket{}, root_bucket, span);
  if (auto r = volume.write(root_bucket * kBlockSize, block.span()); !r) return fail(r.error());
  if (auto r = volume.flush(); !r) return fail(r.error());

  encode_fs_superblock(sb, span);
  if (auto r = volume.write(0, block.span()); !r) return fail(r.error());
  if (auto r = volume.flush(); !r) return fail(r.error());
  return sb;
}

}  // namespace stripefs::fs
