// Writing a new, empty filesystem onto a volume (the library half of mkfs.stripefs).
#pragma once
#include <string>
#include "fs/core/format.hpp"
#include "raid/volume.hpp"

namespace stripefs::fs {

struct MakeFsOptions {
  std::string label;
  Uuid uuid{};                  // zero: random
  uint64_t journal_blocks = 0;  // 0: 1/64 of the volume, within [4 MiB, 128 MiB]
  uint64_t inode_count = 0;     // 0: one per 16 KiB of volume
  uint32_t root_uid = 0, root_gid = 0;
  bool checksums = true;  // a crc32c of every data block (format 2); false: format 1
};

// The layout a volume of `total_blocks` gets; refuses a volume too small to hold it.
Result<FsSuperblock> plan_layout(uint64_t total_blocks, uint32_t stripe_blocks,
                                 const MakeFsOptions& options);
// Writes the journal, bitmaps, inode table head and root directory, flushes, and writes the
// superblock last: a volume where mkfs stopped halfway has no filesystem to mount.
Result<FsSuperblock> make_filesystem(Volume& volume, const MakeFsOptions& options);

}  // namespace stripefs::fs
