// The member superblock: what each member records about the array it belongs to (md v1.2 in
// spirit). One 4 KiB block at byte 4096 of every member; the data area follows it.
//
// On-disk layout (all integers little-endian; "reserved" bytes are written as zero):
//
//   offset  width  field
//   ------  -----  ------------------------------------------------------------------------
//        0      4  magic                0x53545046 (bytes 46 50 54 53 on disk)
//        4      2  version_major        1; 2 on a replacement (flag bit 2), so readers of
//                                       major 1 alone never take one for a member; a
//                                       reader refuses a major it does not know
//        6      2  version_minor        2; a reader accepts any minor (compatible additions;
//                                       minor 1 added the scrub's fields at 264..335, minor 2
//                                       the replacement flag and `replaces` at 336..351)
//        8     16  array_uuid
//       24     16  member_uuid
//       40     32  label                UTF-8, NUL-padded (no terminator when 32 bytes long)
//       72      8  created              seconds since the epoch
//       80      8  updated              seconds since the epoch
//       88      1  level                RaidLevel value: 0, 1, 5, 6 or 10
//       89      1  layout               ParityLayout value: 0..3 (md's ALGORITHM_*)
//       90      2  member_count         1..64
//       92      2  role                 this member's index, 0..member_count-1; 0xffff
//                                       on a spare (md's spare: no role until a rebuild)
//       94      2  reserved
//       96      4  chunk_size           bytes; a power of two >= 4096
//      100      4  reserved
//      104      8  data_offset          bytes from the member start; 4 KiB multiple >= 8192
//      112      8  data_size            usable bytes per member from data_offset; > 0
//      120      8  events               bumped on every state change; highest wins
//      128      4  flags                bit 0: clean shutdown; bit 1: run since its last
//                                       clean shutdown without logging partial stripes
//                                       (the write hole open); bit 2: a hot replace's new
//                                       device (md's replacement), copying the member of
//                                       `role` whose member_uuid is `replaces`: it holds no
//                                       role yet; unknown bits are preserved
//      132      4  reserved
//      136      8  rebuild_checkpoint   bytes rebuilt so far; UINT64_MAX: not rebuilding.
//                                       On a replacement: the device byte below which its
//                                       copy is complete and durable
//      144      8  bitmap_offset        write-intent bitmap area, bytes from member start
//      152      8  bitmap_size          0: no bitmap
//      160      8  bitmap_chunk         bytes of member data per bitmap bit
//      168      8  journal_offset       journal area, bytes from member start (or from the
//                                      start of the journal device, when one is named)
//      176      8  journal_size         0: no journal on this member
//      184     16  journal_device_uuid  zero unless the journal lives on a separate device
//      200     64  member_states        one MemberState byte per role
//      264      8  scrub_checkpoint     1 + the stripes a scrub cut short by a stop of the
//                                       array (or a crash) had checked: it resumes there;
//                                       0: no scrub to resume (as minor 0 left it)
//      272      4  scrub_flags          bit 0: that scrub repairs
//      276      4  reserved
//      280      8  last_scrub           when the last whole scrub ended (seconds since
//                                       the epoch); 0: none yet
//      288      8  last_scrub_mismatched  its stripes that disagreed, ...
//      296      8  last_scrub_repaired    ... were repaired, ...
//      304      8  last_scrub_unrepairable  ... and could not be
//      312      8  scrub_mismatched     what the scrub to resume had found so far: stripes
//      320      8  scrub_repaired       that disagreed, were repaired, and could not be
//      328      8  scrub_unrepairable   (its counts go on from these)
//      336     16  replaces             on a replacement: the member_uuid of the device it
//                                       copies; zero otherwise
//      352   3740  reserved
//     4092      4  checksum             CRC-32C (Castagnoli) of bytes [0, 4092)
//
// The checksum is the standard CRC-32C (check value 0xe3069283 for "123456789"), so any
// crc32c tool can verify a superblock: isa-l's crc32_iscsi() with init 0xFFFFFFFF, inverted
// (isa-l leaves the final inversion to the caller).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "raid/geometry.hpp"
#include "raid/member.hpp"
#include "raid/result.hpp"
#include "raid/uuid.hpp"

namespace stripefs {

constexpr uint64_t kSuperblockOffset = 4096;
constexpr size_t kSuperblockSize = 4096;
constexpr uint32_t kSuperblockMagic = 0x53545046;
constexpr uint16_t kSuperblockMajor = 1;
constexpr uint16_t kReplacementMajor = 2;  // a replacement's superblock (Superblock::replacement)
constexpr uint16_t kSuperblockMinor = 2;
constexpr size_t kLabelSize = 32;
constexpr uint64_t kNotRebuilding = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kNoScrub = std::numeric_limits<uint64_t>::max();
constexpr uint16_t kSpareRole = 0xffff;

// Byte offsets of each field inside the 4 KiB block; see the table above.
namespace superblock_layout {
constexpr size_t kMagic = 0;
constexpr size_t kVersionMajor = 4;
constexpr size_t kVersionMinor = 6;
constexpr size_t kArrayUuid = 8;
constexpr size_t kMemberUuid = 24;
constexpr size_t kLabel = 40;
constexpr size_t kCreated = 72;
constexpr size_t kUpdated = 80;
constexpr size_t kLevel = 88;
constexpr size_t kLayout = 89;
constexpr size_t kMemberCount = 90;
constexpr size_t kRole = 92;
constexpr size_t kChunkSize = 96;
constexpr size_t kDataOffset = 104;
constexpr size_t kDataSize = 112;
constexpr size_t kEvents = 120;
constexpr size_t kFlags = 128;
constexpr size_t kRebuildCheckpoint = 136;
constexpr size_t kBitmapOffset = 144;
constexpr size_t kBitmapSize = 152;
constexpr size_t kBitmapChunk = 160;
constexpr size_t kJournalOffset = 168;
constexpr size_t kJournalSize = 176;
constexpr size_t kJournalDeviceUuid = 184;
constexpr size_t kMemberStates = 200;
constexpr size_t kScrubCheckpoint = 264;
constexpr size_t kScrubFlags = 272;
constexpr size_t kLastScrub = 280;
constexpr size_t kLastScrubMismatched = 288;
constexpr size_t kLastScrubRepaired = 296;
constexpr size_t kLastScrubUnrepairable = 304;
constexpr size_t kScrubMismatched = 312;
constexpr size_t kScrubRepaired = 320;
constexpr size_t kScrubUnrepairable = 328;
constexpr size_t kReplaces = 336;
constexpr size_t kReserved = 352;  // zero up to kChecksum
static_assert(kMemberStates + Geometry::kMaxMembers <= kScrubCheckpoint);
constexpr size_t kChecksum = kSuperblockSize - 4;

static_assert(kReserved <= kChecksum, "superblock fields overflow the 4 KiB block");
}  // namespace superblock_layout

enum class MemberState : uint8_t { active = 0, faulty = 1, missing = 2, rebuilding = 3 };

// The decoded superblock. The version is not kept: encode always writes the version this
// code implements, and zeroes whatever a newer minor version stored in the reserved bytes.
struct Superblock {
  static constexpr uint32_t kFlagClean = 1u << 0;
  static constexpr uint32_t kFlagUnlogged = 1u << 1;
  static constexpr uint32_t kFlagReplacement = 1u << 2;

  Uuid array_uuid{};
  Uuid member_uuid{};
  std::string label;     // at most kLabelSize bytes; decode strips trailing NULs
  uint64_t created = 0;  // seconds since the epoch
  uint64_t updated = 0;
  RaidLevel level = RaidLevel::raid0;
  ParityLayout layout = ParityLayout::left_symmetric;
  uint16_t member_count = 0;
  uint16_t role = 0;
  uint32_t chunk_size = 0;
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
  uint64_t events = 0;
  uint32_t flags = 0;
  uint64_t rebuild_checkpoint = kNotRebuilding;
  uint64_t bitmap_offset = 0;
  uint64_t bitmap_size = 0;
  uint64_t bitmap_chunk = 0;
  uint64_t journal_offset = 0;
  uint64_t journal_size = 0;
  Uuid journal_device_uuid{};
  std::array<MemberState, Geometry::kMaxMembers> member_states{};  // indexed by role
  static constexpr uint32_t kScrubRepair = 1u << 0;
  uint64_t scrub_checkpoint = kNoScrub;
  uint32_t scrub_flags = 0;
  uint64_t last_scrub = 0;
  uint64_t last_scrub_mismatched = 0, last_scrub_repaired = 0, last_scrub_unrepairable = 0;
  uint64_t scrub_mismatched = 0, scrub_repaired = 0, scrub_unrepairable = 0;  // so far
  Uuid replaces{};  // on a replacement: the member_uuid of the device it copies

  bool clean() const { return (flags & kFlagClean) != 0; }
  void set_clean(bool clean) { flags = clean ? flags | kFlagClean : flags & ~kFlagClean; }
  bool unlogged() const { return (flags & kFlagUnlogged) != 0; }
  void set_unlogged(bool on) { flags = on ? flags | kFlagUnlogged : flags & ~kFlagUnlogged; }
  bool rebuilding() const { return rebuild_checkpoint != kNotRebuilding; }
  // A spare of the array: it holds no role (and none of its data) until a rebuild gives it one.
  bool spare() const { return role == kSpareRole; }
  // A hot replace's new device (md's replacement): copying the member of `role` whose
  // member_uuid is `replaces`, complete below rebuild_checkpoint; it holds no role until the
  // copy completes and it takes the role (with a superblock of its own, flag cleared).
  bool replacement() const { return (flags & kFlagReplacement) != 0; }
  void set_replacement(bool on) {
    flags = on ? flags | kFlagReplacement : flags & ~kFlagReplacement;
  }

  bool operator==(const Superblock&) const = default;
};

// Seconds since the epoch, as `created` and `updated` hold them.
uint64_t superblock_time();

// Writes `sb` in the on-disk format, checksum included. Does not validate: a label longer
// than kLabelSize is truncated and invalid fields are written as they are (decode, and so
// write_superblock, rejects them).
void encode_superblock(const Superblock& sb, std::span<std::byte, kSuperblockSize> out);

// Parses and validates a superblock. `where` names the member in error messages (e.g. its
// path). Errors: ENODATA when the magic is wrong (not a stripefs member), EUCLEAN when the
// checksum does not match (damaged), EINVAL for an unknown major version or a field that is
// out of range or inconsistent.
Result<Superblock> decode_superblock(std::span<const std::byte, kSuperblockSize> in,
                                     std::string_view where);

// Reads and decodes the superblock at kSuperblockOffset; also rejects a data area that
// extends past the end of the member.
Result<Superblock> read_superblock(Member& member);

// Writes `sb` at kSuperblockOffset with FUA, so it is durable on success. Refuses (EINVAL,
// nothing written) a superblock that read_superblock would reject, or a label longer than
// kLabelSize.
Result<void> write_superblock(Member& member, const Superblock& sb);

}  // namespace stripefs
