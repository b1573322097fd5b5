// The on-disk blocks of the write-ahead journal (jbd2 in spirit). The journal lives in an
// area of `blocks` blocks of kJournalBlockSize bytes. Block 0 of the area is the journal
// superblock; blocks [1, blocks) are the circular log. A transaction occupies consecutive log
// positions: one descriptor block, then `count` data blocks (the images to write home, as they
// are), then one commit block. Each position after log block blocks-1 is log block 1: a
// transaction may wrap anywhere, even between its descriptor and its first data block.
//
// A transaction larger than 254 blocks chains descriptors, each followed by its blocks, all
// of one sequence, before the one commit. It counts only once its commit block is intact and
// agrees with its descriptors: same sequence, the total count, and descriptor_checksum equal
// to the first descriptor's own stored
// checksum. Each data block must match its entry's data_checksum. Data blocks are not escaped
// (unlike jbd2's): a reader finds each descriptor from the previous transaction's count, never
// by looking for the magic, so a data block that happens to start with a magic is harmless.
// Where the journal lives on a RAID5/6 volume, each group commit is padded so that it ends
// on a stripe boundary: every stripe of the log is then written whole (the full-stripe
// path, which needs no write-hole protection). The padding is the last transaction's: its
// commit block counts the filler blocks that follow it (`padding`), whose contents are
// undefined, and the next transaction starts after them.
// Blocks do not name their journal, only a sequence: a journal (re)formatted over an area that
// held another must not reuse that journal's sequence numbers (or must zero the log).
//
// All integers little-endian; "reserved" and padding bytes are written as zero. Every block
// ends with a checksum: standard CRC-32C (Castagnoli, ondisk::crc32c) of bytes [0, 4092).
//
// Journal superblock (log block 0):
//
//   offset  width  field
//   ------  -----  ------------------------------------------------------------------------
//        0      4  magic                0x534A5453 (bytes 53 54 4A 53, "STJS", on disk)
//        4      2  version_major        2; a reader refuses a major it does not know
//                                       (2: commit blocks carry padding; 1, read too,
//                                       had that field reserved, zero)
//        6      2  version_minor        0; a reader accepts any minor (compatible additions)
//        8     16  array_uuid           must equal the member superblock's array_uuid
//       24      8  blocks               area size in blocks, superblock included; >= 8
//       32      8  tail                 log block of the oldest live transaction's
//                                       descriptor; in [1, blocks)
//       40      8  tail_sequence        that transaction's sequence; >= 1
//       48      4  flags                reserved, 0; unknown bits are preserved
//       52   4040  reserved
//     4092      4  checksum             CRC-32C of bytes [0, 4092)
//
// Descriptor block (first block of a transaction):
//
//   offset  width  field
//   ------  -----  ------------------------------------------------------------------------
//        0      4  magic                0x444A5453 (bytes 53 54 4A 44, "STJD", on disk)
//        4      8  sequence             the transaction's sequence number
//       12      4  count                data blocks that follow; 1..254
//       16   16*n  entries              n = count entries, one per data block, in log order:
//                     +0   8  target         the block's home address (opaque to the journal)
//                     +8   4  data_checksum  CRC-32C of the whole 4096-byte data block
//                    +12   4  flags          reserved, 0; preserved
//  16+16*n      -  padding              zero up to the checksum
//     4092      4  checksum             CRC-32C of bytes [0, 4092)
//
// kMaxDescriptorEntries = (4092 - 16) / 16 = 254 (entries end at byte 4080; 12 bytes of
// padding always remain).
//
// Commit block (last block of a transaction):
//
//   offset  width  field
//   ------  -----  ------------------------------------------------------------------------
//        0      4  magic                0x434A5453 (bytes 53 54 4A 43, "STJC", on disk)
//        4      8  sequence             equals the descriptor's
//       12      4  count                every data block of the transaction (its descriptors
//                                     may chain: at most 254 blocks each); >= 1
//       16      4  descriptor_checksum  the descriptor block's stored checksum
//       20      4  padding              filler blocks after this commit that belong to the
//                                       transaction (alignment); the next one starts after
//       24   4068  reserved
//     4092      4  checksum             CRC-32C of bytes [0, 4092)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "raid/result.hpp"
#include "raid/superblock.hpp"

namespace stripefs {

constexpr size_t kJournalBlockSize = 4096;
constexpr uint64_t kJournalMinBlocks = 8;
constexpr uint32_t kJournalSuperblockMagic = 0x534A5453;
constexpr uint32_t kJournalDescriptorMagic = 0x444A5453;
constexpr uint32_t kJournalCommitMagic = 0x434A5453;
constexpr uint16_t kJournalMajor = 2;
constexpr uint16_t kJournalMinor = 0;

// Byte offsets of each field inside the blocks; see the tables above.
namespace journal_layout {
constexpr size_t kChecksum = kJournalBlockSize - 4;  // the same in every block

namespace superblock {
constexpr size_t kMagic = 0;
constexpr size_t kVersionMajor = 4;
constexpr size_t kVersionMinor = 6;
constexpr size_t kArrayUuid = 8;
constexpr size_t kBlocks = 24;
constexpr size_t kTail = 32;
constexpr size_t kTailSequence = 40;
constexpr size_t kFlags = 48;
constexpr size_t kReserved = 52;  // zero up to kChecksum
static_assert(kReserved <= kChecksum, "journal superblock fields overflow the block");
}  // namespace superblock

namespace descriptor {
constexpr size_t kMagic = 0;
constexpr size_t kSequence = 4;
constexpr size_t kCount = 12;
constexpr size_t kEntries = 16;
constexpr size_t kEntrySize = 16;
// Inside an entry.
constexpr size_t kEntryTarget = 0;
constexpr size_t kEntryDataChecksum = 8;
constexpr size_t kEntryFlags = 12;
static_assert(kEntryFlags + 4 == kEntrySize, "journal descriptor entry fields overflow it");
}  // namespace descriptor

namespace commit {
constexpr size_t kMagic = 0;
constexpr size_t kSequence = 4;
constexpr size_t kCount = 12;
constexpr size_t kDescriptorChecksum = 16;
constexpr size_t kPadding = 20;
constexpr size_t kReserved = 24;  // zero up to kChecksum
static_assert(kReserved <= kChecksum, "journal commit fields overflow the block");
}  // namespace commit
}  // namespace journal_layout

// As many entries as fit between the descriptor's fixed header and its checksum: 254.
constexpr uint32_t kMaxDescriptorEntries =
    (journal_layout::kChecksum - journal_layout::descriptor::kEntries) /
    journal_layout::descriptor::kEntrySize;
static_assert(kMaxDescriptorEntries == 254);
static_assert(journal_layout::descriptor::kEntries +
                  kMaxDescriptorEntries * journal_layout::descriptor::kEntrySize <=
              journal_layout::kChecksum);

// The decoded journal superblock. The version is not kept: encode always writes the version
// this code implements, and zeroes whatever a newer minor version stored in the reserved bytes.
struct JournalSuperblock {
  Uuid array_uuid{};
  uint64_t blocks = 0;
  uint64_t tail = 1;
  uint64_t tail_sequence = 1;
  uint32_t flags = 0;

  bool operator==(const JournalSuperblock&) const = default;
};

// One data block of a transaction, in log order.
struct JournalEntry {
  uint64_t target = 0;
  uint32_t data_checksum = 0;  // data_block_checksum() of the data block
  uint32_t flags = 0;

  bool operator==(const JournalEntry&) const = default;
};

struct JournalDescriptor {
  uint64_t sequence = 0;
  std::vector<JournalEntry> entries;  // 1..kMaxDescriptorEntries

  bool operator==(const JournalDescriptor&) const = default;
};

struct JournalCommit {
  uint64_t sequence = 0;
  uint32_t count = 0;
  uint32_t descriptor_checksum = 0;  // descriptor_checksum() of the encoded descriptor
  uint32_t padding = 0;              // filler blocks after the commit

  bool operator==(const JournalCommit&) const = default;
};

// Writes `sb` in the on-disk format, checksum included. Does not validate: invalid fields are
// written as they are (decode rejects them).
void encode_journal_superblock(const JournalSuperblock& sb,
                               std::span<std::byte, kJournalBlockSize> out);

// Parses and validates a journal superblock. `where` names the member in error messages (e.g.
// its path); `expected_array_uuid` is the array the member's superblock says it belongs to.
// Errors, checked in this order: ENODATA when the magic is wrong (no journal was ever written
// here), EUCLEAN when the checksum does not match (damaged), EINVAL for an unknown major
// version, blocks < kJournalMinBlocks, tail outside [1, blocks), tail_sequence 0, or an
// array_uuid other than expected_array_uuid (naming both).
Result<JournalSuperblock> decode_journal_superblock(
    std::span<const std::byte, kJournalBlockSize> in, std::string_view where,
    const Uuid& expected_array_uuid);

// Writes `descriptor` in the on-disk format, checksum included. Precondition: 1 to
// kMaxDescriptorEntries entries. Not validated, but never written past the block: count is
// stored as given (saturated at UINT32_MAX), at most kMaxDescriptorEntries entries are, and
// decode rejects the count.
void encode_journal_descriptor(const JournalDescriptor& descriptor,
                               std::span<std::byte, kJournalBlockSize> out);

// Parses and validates a descriptor block. Errors, in this order: ENODATA when the block is
// not a descriptor (wrong magic: e.g. the end of the log), EUCLEAN on a checksum mismatch,
// EINVAL for a count of 0 or above kMaxDescriptorEntries and, if `expected_sequence` is not 0,
// EINVAL when the sequence differs ("sequence X, expected Y"). Messages start with
// "journal descriptor: "; the caller adds where the block is.
Result<JournalDescriptor> decode_journal_descriptor(
    std::span<const std::byte, kJournalBlockSize> in, uint64_t expected_sequence);

// Writes `commit` in the on-disk format, checksum included. Does not validate.
void encode_journal_commit(const JournalCommit& commit,
                           std::span<std::byte, kJournalBlockSize> out);

// Parses and validates a commit block, with decode_journal_descriptor's rules and order;
// messages start with "journal commit: ". Does not compare count and descriptor_checksum with
// the descriptor's: that is the caller's, who holds the descriptor.
Result<JournalCommit> decode_journal_commit(std::span<const std::byte, kJournalBlockSize> in,
                                            uint64_t expected_sequence);

// The checksum stored in an encoded descriptor block (its last 4 bytes), as the commit block
// records it. Not verified: decode the descriptor first.
uint32_t descriptor_checksum(std::span<const std::byte, kJournalBlockSize> encoded_descriptor);

// CRC-32C of a whole data block, as a descriptor entry records it.
uint32_t data_block_checksum(std::span<const std::byte, kJournalBlockSize> data);

}  // namespace stripefs
