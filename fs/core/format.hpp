// The filesystem's on-disk format, on the volume, in 4 KiB blocks:
//
//   block 0                      filesystem superblock
//   [journal_start, +blocks)     metadata journal (journal/Journal)
//   [inode_bitmap_start, ...)    one bit per inode
//   [block_bitmap_start, ...)    one bit per volume block
//   [inode_table_start, ...)     kInodeSize-byte inodes, 16 per block
//   [checksum_start, ...)        format 2: a crc32c of every data-area block (file data),
//                                kChecksumsPerBlock per block (absent in format 1)
//   [orphan_start, ...)          minor 1: the orphan list, one bit per inode (orphan_list.hpp)
//   [data_start, total_blocks)   file data, directory and extent-tree blocks; data_start is
//                                stripe-aligned so data runs can be whole stripes
//
// Every metadata block begins with a common header: magic, crc32c of the block (computed
// with this field zero) and the block's own number, so a misdirected write is caught like a
// damaged one. Inodes carry a crc32c each, so one damaged inode costs that file only.
// Every field is little-endian with an explicit width (raid/ondisk.hpp).
//
// Inodes hold 5 extents inline (then an extent tree), symlink targets up to 119 bytes
// inline (else one block, checksummed in the inode), and a parent pointer for directories.
// A directory's file block 0 is its header, bucket i is file block 1 + i, overflow blocks
// start at file block 2^32 (directory_index.hpp). Limits: 16 TiB files, 255-byte names,
// 4095-byte symlinks, 4 GiB per extent.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include "raid/result.hpp"
#include "raid/uuid.hpp"

namespace stripefs::fs {

constexpr uint32_t kBlockSize = 4096;
constexpr uint32_t kInodeSize = 256;
constexpr uint32_t kInodesPerBlock = kBlockSize / kInodeSize;
constexpr uint64_t kRootInode = 1;  // FUSE_ROOT_ID: inode numbers are table index + 1
constexpr uint32_t kMaxNameLength = 255;
constexpr uint32_t kMaxSymlinkLength = 4095;
constexpr uint64_t kMaxFileSize = 1ull << 44;  // 16 TiB, as ext4 with 4 KiB blocks
constexpr uint32_t kMaxXattrBlocks = 64;       // an inode's xattrs: at most ~255 KiB
// Format 2 adds data checksums (and with them copy-on-write overwrites, which a format-1
// program would not make: so it must not mount one); format 1 is still read and written,
// without checksums.
constexpr uint16_t kFormatMajor = 2;  // incompatible changes
// Compatible additions: 1 the orphan list, 2 xattrs in runs of blocks (xattr_format.hpp).
constexpr uint16_t kFormatMinor = 2;
constexpr uint16_t kFormatNoChecksums = 1;  // the major of a filesystem without checksums

// ---- filesystem superblock ----
constexpr uint64_t kSuperMagic = 0x3176534650525453ull;  // "STRPFSv1"
enum class FsState : uint32_t { clean = 1, mounted = 2 };

struct FsSuperblock {
  uint16_t major = kFormatMajor;
  uint16_t minor = kFormatMinor;
  uint64_t total_blocks = 0;
  Uuid uuid{};
  std::string label;  // up to 63 bytes
  uint64_t journal_start = 0, journal_blocks = 0;
  uint64_t inode_bitmap_start = 0, inode_bitmap_blocks = 0;
  uint64_t block_bitmap_start = 0, block_bitmap_blocks = 0;
  uint64_t inode_table_start = 0, inode_count = 0;
  uint64_t checksum_start = 0, checksum_blocks = 0;  // 0 blocks: no data checksums (format 1)
  // The orphan list (minor 1): a bitmap by inode of those a mount after a crash must look at
  // (no links left, or written blocks past their size); 0 blocks: none (minor 0), so that
  // mount scans every inode.
  uint64_t orphan_start = 0, orphan_blocks = 0;
  uint64_t data_start = 0;
  uint32_t stripe_blocks = 1;  // data blocks per full stripe: the allocation alignment
  uint64_t hash_seed = 0;      // directory name hashing
  FsState state = FsState::clean;
  uint64_t mount_count = 0;
  int64_t created_sec = 0;

  uint64_t inode_table_blocks() const {
    return (inode_count + kInodesPerBlock - 1) / kInodesPerBlock;
  }
  bool has_checksums() const { return checksum_blocks > 0; }
  bool has_orphan_list() const { return orphan_blocks > 0; }
};
void encode_fs_superblock(const FsSuperblock& sb, std::span<std::byte, kBlockSize> out);
// Refuses a bad magic, version, checksum or impossible geometry, naming the field.
Result<FsSuperblock> decode_fs_superblock(std::span<const std::byte, kBlockSize> in);
// Refuses (EUCLEAN, naming the field) a filesystem larger than the volume it is on.
Result<void> check_fits(const FsSuperblock& sb, uint64_t volume_bytes);
// Refuses (EUCLEAN) a metadata journal record whose home is not a metadata block this
// journal may write: block 0, past the end, or inside the journal itself.
Result<void> check_journal_target(const FsSuperblock& sb, uint64_t target);

// ---- metadata block header (directory, extent-tree and xattr blocks) ----
enum class BlockKind : uint32_t {
  dir_header = 0x52484453,  // "SDHR"
  dir_bucket = 0x4b424453,  // "SDBK"
  extent_leaf = 0x464c4553,
  extent_index = 0x58494553,
  xattr = 0x41584453,
  xattr_run = 0x52584453,  // "SDXR": one block of an inode's xattrs kept in several
  bitmap = 0x504d4253,
  checksums = 0x4d534353,  // "SCSM"
};
constexpr size_t kHeaderSize = 16;
// Seals a block: writes kind, self and the checksum.
void seal_block(std::span<std::byte, kBlockSize> block, BlockKind kind, uint64_t self);
// Checks kind, checksum and self; the error names the block and the field.
Result<void> verify_block(std::span<const std::byte, kBlockSize> block, BlockKind kind,
                          uint64_t self);

// ---- allocation bitmaps: a header, then bits (1 = in use) ----
constexpr uint64_t kBitsPerBitmapBlock = (kBlockSize - kHeaderSize) * 8;

// ---- data checksums: a header, then a crc32c (4 bytes, little-endian) per data-area block:
// volume block b (>= data_start) at table block (b - data_start) / kChecksumsPerBlock ----
constexpr uint64_t kChecksumsPerBlock = (kBlockSize - kHeaderSize) / 4;
// The checksum of one 4 KiB block of file data.
uint32_t data_checksum(std::span<const std::byte> block);

// ---- inode ----
struct Extent {
  uint64_t logical = 0;    // file block
  uint64_t physical = 0;   // volume block
  uint32_t length = 0;     // blocks
  bool unwritten = false;  // allocated by fallocate, reads as zeros
  uint64_t logical_end() const { return logical + length; }
  bool operator==(const Extent&) const = default;
};
constexpr uint32_t kMaxExtentLength = 1u << 20;  // 4 GiB per extent
constexpr size_t kInlineExtents = 5;
constexpr size_t kInlineSymlink = 5 * 24 - 1;  // a symlink this short lives in the inode

struct Timespec {
  int64_t sec = 0;
  uint32_t nsec = 0;
  bool operator==(const Timespec&) const = default;
};

struct DiskInode {
  uint32_t mode = 0;  // 0: free slot
  uint32_t uid = 0, gid = 0, nlink = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;  // 4 KiB blocks held: data, extent tree, xattr
  Timespec atime, mtime, ctime;
  uint32_t generation = 0;
  uint64_t rdev = 0;
  uint64_t parent = 0;  // directories: the parent's inode (for "..")
  uint64_t xattr_block = 0;
  uint32_t xattr_blocks = 0;  // 0: xattr_block is one block; N >= 2: a run of N (minor 2)
  // Extents: inline when tree_depth == 0 (up to kInlineExtents), else a tree whose root
  // block is tree_root. Symlinks shorter than kInlineSymlink keep their target inline.
  uint32_t tree_depth = 0;
  uint64_t tree_root = 0;
  std::vector<Extent> inline_extents;
  std::string inline_symlink;
  uint32_t symlink_crc = 0;  // a target kept in a block: its checksum
};
void encode_inode(const DiskInode& inode, std::span<std::byte> out);  // kInodeSize bytes
Result<DiskInode> decode_inode(std::span<const std::byte> in, uint64_t ino);
// The checksum field of an encoded inode (kInodeSize bytes), as stored: what tells one
// encoding of a slot from another.
uint32_t stored_inode_checksum(std::span<const std::byte> in);

// ---- extent tree blocks ----
constexpr size_t kLeafExtents = (kBlockSize - kHeaderSize - 8) / 24;
constexpr size_t kIndexEntries = (kBlockSize - kHeaderSize - 8) / 16;
struct IndexEntry {
  uint64_t first_logical;
  uint64_t block;
};
void encode_extent_leaf(std::span<const Extent> extents, uint64_t self,
                        std::span<std::byte, kBlockSize> out);
Result<std::vector<Extent>> decode_extent_leaf(std::span<const std::byte, kBlockSize> in,
                                               uint64_t self);
void encode_extent_index(std::span<const IndexEntry> entries, uint32_t level, uint64_t self,
                         std::span<std::byte, kBlockSize> out);
Result<std::vector<IndexEntry>> decode_extent_index(std::span<const std::byte, kBlockSize> in,
                                                    uint64_t self, uint32_t* level);

// ---- directories: linear hashing over the directory's blocks ----
// File block 0 is the header; bucket i lives at file block 1 + i; overflow blocks from
// kOverflowBase on. Names hash to 62-bit keys; a bucket is chosen by the key's low bits, and
// readdir walks keys in bit-reversed order, in which every bucket is one contiguous range
// that a split only halves: so cookies stay valid across splits.
constexpr uint64_t kOverflowBase = 1ull << 32;
constexpr uint64_t kKeyBits = 62;

struct DirHeader {
  uint32_t level = 0;  // buckets 2^level .. 2^(level+1)
  uint64_t split = 0;  // next bucket to split
  uint64_t entries = 0;
  uint64_t next_overflow = kOverflowBase;  // the next unused overflow file block
  uint64_t free_overflow = 0;              // a chain of released overflow blocks (0: none)
  uint64_t buckets() const { return (uint64_t{1} << level) + split; }
};
void encode_dir_header(const DirHeader& header, uint64_t self,
                       std::span<std::byte, kBlockSize> out);
Result<DirHeader> decode_dir_header(std::span<const std::byte, kBlockSize> in, uint64_t self);

struct DirEntry {
  uint64_t key = 0;
  uint64_t ino = 0;
  uint8_t type = 0;  // DT_* of the target
  std::string name;
};
struct DirBucket {
  uint64_t overflow = 0;  // file block of the next block of this bucket (0: none)
  std::vector<DirEntry> entries;
  size_t bytes() const;  // encoded size
  static size_t entry_bytes(size_t name_length) { return 18 + name_length; }
};
constexpr size_t kBucketCapacity = kBlockSize - kHeaderSize - 12;
void encode_dir_bucket(const DirBucket& bucket, uint64_t self,
                       std::span<std::byte, kBlockSize> out);
Result<DirBucket> decode_dir_bucket(std::span<const std::byte, kBlockSize> in, uint64_t self);
// Looks for `name` (whose key is `key`) in a bucket block without decoding it all: the hot
// path of lookup. Checks the block like decode_dir_bucket; `overflow` gets the next block.
Result<std::optional<DirEntry>> find_in_dir_bucket(std::span<const std::byte, kBlockSize> in,
                                                   uint64_t self, uint64_t key,
                                                   std::string_view name, uint64_t* overflow);

// ---- symlink target block (targets too long for the inode) ----
// The target fills file block 0 as raw bytes (a target may be kMaxSymlinkLength long), and
// the inode keeps its length (size) and checksum (symlink_crc).
uint32_t symlink_checksum(std::string_view target);
Result<std::string> decode_symlink(std::span<const std::byte, kBlockSize> in, uint64_t ino,
                                   uint64_t length, uint32_t crc);

}  // namespace stripefs::fs
