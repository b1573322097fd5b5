// An inode's extended attributes on disk. Two forms:
//   - one block (BlockKind::xattr): a count, then per attribute a 1-byte name length, a
//     2-byte value length, a pad byte, the name and the value. Every inode whose attributes
//     fit takes this form (and every inode before format minor 2 has it);
//   - a run of N contiguous blocks (DiskInode::xattr_blocks = N, 2 to kMaxXattrBlocks), for
//     what does not fit: values up to 64 KiB (XATTR_SIZE_MAX), and many of them, as Samba's
//     streams_xattr and NT ACLs need. Each block is sealed (BlockKind::xattr_run, its own
//     number); their payloads, concatenated, hold a count, the length of what follows, and
//     per attribute a 1-byte name length, 3 zero bytes, a 4-byte value length, the name and
//     the value.
// Either form is read whole and written whole: attributes change rarely, and an inode's are
// then one unit in the metadata journal.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fs/core/format.hpp"

namespace stripefs::fs {

struct Xattr {
  std::string name;  // with its namespace: "user.foo"
  std::string value;
};
constexpr size_t kXattrCapacity = kBlockSize - kHeaderSize - 4;  // the one-block form
constexpr size_t kXattrRunPayload = kBlockSize - kHeaderSize;    // per block of a run
constexpr size_t kXattrValueMax = 65536;                         // XATTR_SIZE_MAX

// The bytes `attrs` take in the one-block form.
size_t xattr_bytes(std::span<const Xattr> attrs);
// How many blocks `attrs` take: 1 (the one-block form), 2 to kMaxXattrBlocks (a run), or 0
// when they need more.
uint32_t xattr_blocks_for(std::span<const Xattr> attrs);

void encode_xattrs(std::span<const Xattr> attrs, uint64_t self,
                   std::span<std::byte, kBlockSize> out);
Result<std::vector<Xattr>> decode_xattrs(std::span<const std::byte, kBlockSize> in, uint64_t self);

// The run form: `blocks` (xattr_blocks_for(attrs) of them) sealed for volume blocks
// [first, first + blocks), kBlockSize bytes each, in `out`.
void encode_xattr_run(std::span<const Xattr> attrs, uint64_t first, uint32_t blocks,
                      std::span<std::byte> out);
// Checks every block of the run (kind, checksum, self) and the lengths; the error names
// the block or the entry.
Result<std::vector<Xattr>> decode_xattr_run(std::span<const std::byte> in, uint64_t first);
// One block of a run checked alone (kind, checksum, self).
Result<void> verify_xattr_run_block(std::span<const std::byte, kBlockSize> in, uint64_t self);

}  // namespace stripefs::fs
