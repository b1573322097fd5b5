// The on-disk header of the write-intent bitmap (md's internal bitmap in spirit). Each member
// holds a bitmap area at the superblock's bitmap_offset, bitmap_size bytes long: a 4 KiB
// header, then the bits. Bit r of the region map is bit (r % 8) of byte (r / 8) of the bits,
// which start at byte kBitmapHeaderSize of the area. A set bit means "region r of the member's
// data may differ from its peers": a write into it may have been in flight.
//
// Header layout (all integers little-endian; "reserved" bytes are written as zero):
//
//   offset  width  field
//   ------  -----  ------------------------------------------------------------------------
//        0      4  magic                0x4D425453 (bytes 53 54 42 4D, "STBM", on disk)
//        4      2  version_major        1; a reader refuses a major it does not know
//        6      2  version_minor        0; a reader accepts any minor (compatible additions)
//        8     16  array_uuid           must equal the member superblock's array_uuid
//       24      8  events               the array's events count when formatted (not
//                                       kept up since)
//       32      8  events_cleared       the array's events count when bits were last cleared
//       40      8  region_size          bytes of member data per bit; a power of two >= 4096
//       48      8  regions              bits in use; ceil(data_size / region_size), > 0
//       56      8  data_size            bytes of member data covered; > 0
//       64      4  flags                bit 0: stale; unknown bits are preserved
//       68      4  daemon_sleep_ms      lazy clearing delay given to add_bitmap (5000
//                                       after a forced rebuild); > 0. Informational:
//                                       load uses the delay given to use_bitmap
//       72   4020  reserved
//     4092      4  checksum             CRC-32C (Castagnoli) of bytes [0, 4092)
//
// The checksum is computed exactly as the superblock's: standard CRC-32C, isa-l's
// crc32_iscsi() with init 0xFFFFFFFF, inverted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "raid/member.hpp"
#include "raid/result.hpp"
#include "raid/superblock.hpp"

namespace stripefs {

constexpr size_t kBitmapHeaderSize = 4096;
constexpr uint32_t kBitmapMagic = 0x4D425453;
constexpr uint16_t kBitmapMajor = 1;
constexpr uint16_t kBitmapMinor = 0;

// Byte offsets of each field inside the 4 KiB header; see the table above.
namespace bitmap_layout {
constexpr size_t kMagic = 0;
constexpr size_t kVersionMajor = 4;
constexpr size_t kVersionMinor = 6;
constexpr size_t kArrayUuid = 8;
constexpr size_t kEvents = 24;
constexpr size_t kEventsCleared = 32;
constexpr size_t kRegionSize = 40;
constexpr size_t kRegions = 48;
constexpr size_t kDataSize = 56;
constexpr size_t kFlags = 64;
constexpr size_t kDaemonSleepMs = 68;
constexpr size_t kReserved = 72;  // zero up to kChecksum
constexpr size_t kChecksum = kBitmapHeaderSize - 4;

static_assert(kReserved <= kChecksum, "bitmap header fields overflow the 4 KiB block");
}  // namespace bitmap_layout

// The decoded header. The version is not kept: encode always writes the version this code
// implements, and zeroes whatever a newer minor version stored in the reserved bytes.
struct BitmapHeader {
  // The whole bitmap is not to be trusted: the member needs a full resync.
  static constexpr uint32_t kFlagStale = 1u << 0;

  Uuid array_uuid{};
  uint64_t events = 0;
  // md compares it with a returning member's events: a member whose events are at least
  // this can be brought up to date by resyncing only the regions whose bits are set.
  uint64_t events_cleared = 0;
  uint64_t region_size = 0;
  uint64_t regions = 0;
  uint64_t data_size = 0;
  uint32_t flags = 0;
  uint32_t daemon_sleep_ms = 5000;

  bool stale() const { return (flags & kFlagStale) != 0; }
  void set_stale(bool stale) { flags = stale ? flags | kFlagStale : flags & ~kFlagStale; }

  bool operator==(const BitmapHeader&) const = default;
};

// Bytes of bits needed for `regions` bits, rounded up to whole 4 KiB blocks (so each block
// of bits can be written on its own with O_DIRECT). 0 for 0 regions; never overflows.
uint64_t bitmap_bits_bytes(uint64_t regions);

// The region size to use by default for `data_size` bytes of data per member: the smallest
// power of two >= 2 MiB for which the bitmap needs at most 16384 regions. 16384 bits are
// 2 KiB, so all the bits fit in one 4 KiB block beside the header: setting a bit costs one
// small write, and the whole map stays cheap to hold in memory and to scan after a crash.
// The price is coarser resync (a dirty bit resyncs its whole region), which is what md
// accepts too: it picks 64 MiB regions for a 1 TB member, as this does for 1 TiB.
uint64_t default_region_size(uint64_t data_size);

// Writes `header` in the on-disk format, checksum included. Does not validate: invalid
// fields are written as they are (decode, and so write_bitmap_header, rejects them).
void encode_bitmap_header(const BitmapHeader& header, std::span<std::byte, kBitmapHeaderSize> out);

// Parses and validates a header. `where` names the member in error messages (e.g. its path);
// `expected_array_uuid` is the array the member's superblock says it belongs to. Errors:
// ENODATA when the magic is wrong (no bitmap was ever written here), EUCLEAN when the
// checksum does not match (damaged), EINVAL for an unknown major version, a field that is
// out of range or inconsistent, or an array_uuid other than expected_array_uuid.
Result<BitmapHeader> decode_bitmap_header(std::span<const std::byte, kBitmapHeaderSize> in,
                                          std::string_view where, const Uuid& expected_array_uuid);

// Checks that the header and the bits of `header` fit an area of `area_size` bytes. EINVAL
// naming the member and the sizes otherwise. Expects a header that decode would accept.
Result<void> check_bitmap_fits(const BitmapHeader& header, uint64_t area_size,
                               std::string_view where);

// Reads and decodes the header at byte `area_offset` of `member` (through an aligned buffer,
// so O_DIRECT members accept it). Errors as decode_bitmap_header, plus EINVAL when the header
// would extend past the end of the member and the member's own error when the read fails.
Result<BitmapHeader> read_bitmap_header(Member& member, uint64_t area_offset,
                                        const Uuid& expected_array_uuid);

// Writes `header` at byte `area_offset` of `member` as one 4 KiB FUA write, so it is durable
// on success. Refuses (EINVAL, nothing written) a header that read_bitmap_header would reject
// or that would extend past the end of the member.
Result<void> write_bitmap_header(Member& member, uint64_t area_offset, const BitmapHeader& header);

}  // namespace stripefs
