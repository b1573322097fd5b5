// What a scrub checks a metadata block against: its own checksum. Every metadata block
// carries one (format.hpp), so a scrub can say which copy or which chunk of a stripe holds a
// damaged directory, extent-tree, xattr, bitmap or checksum-table block, or a damaged inode,
// as the data checksums do for file data; redundancy alone says only that a stripe disagrees.
#pragma once
#include <cstdint>
#include <span>

#include "raid/scrub_check.hpp"

namespace stripefs::fs {

// What a block of the volume should hold, as far as the scrub knows.
enum class MetaKind : uint8_t {
  none,         // nothing known: file data (checked by the data checksums), free, journal
  superblock,   // block 0
  bitmap,       // inode and block bitmaps, the orphan list
  checksums,    // the data checksum table
  inode_table,  // 16 inodes, each with its own checksum
  directory,    // a directory header or bucket (judged only when it says it is one)
  extent_tree,  // an extent-tree leaf or index block
  xattr,        // an inode's xattr block, or a block of its run
};

// Whether `bytes` (one 4 KiB block, volume block `block`) is a good block of `kind`. For
// inode_table, bit i of `slots` says that slot i holds an inode in use: only those are
// checked (a free slot may hold anything on a device that held something else before), and
// a block with none is unknown. A bitmap or checksum block that is all zeros is unknown:
// nothing says it was ever written.
ScrubBatch::Verdict metadata_verdict(MetaKind kind, uint64_t block,
                                     std::span<const std::byte> bytes, uint16_t slots,
                                     uint64_t inode_table_start);

}  // namespace stripefs::fs
