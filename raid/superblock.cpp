#include "raid/superblock.hpp"

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstring>
#include <ctime>
#include <utility>

#include "raid/aligned_buffer.hpp"
#include "raid/ondisk.hpp"

namespace stripefs {

namespace {

namespace sl = superblock_layout;

using Block = std::span<std::byte, kSuperblockSize>;

using ondisk::get_le;
using ondisk::put_le;

using ondisk::get_uuid;
using ondisk::put_uuid;

constexpr ondisk::Sealed kSealed{sl::kMagic, kSuperblockMagic, sl::kChecksum};

bool valid_level(uint8_t value) {
  return value == 0 || value == 1 || value == 5 || value == 6 || value == 10;
}

// An on-member area (bitmap or journal) must lie between the superblock and the data area.
// Expects sb.data_offset to be validated already (>= the end of the superblock).
Result<void> check_area(std::string_view where, std::string_view name, uint64_t offset,
                        uint64_t size, uint64_t data_offset) {
  if (size == 0) return {};
  if (size > data_offset || offset > data_offset - size) {
    return fail(EINVAL,
                "member {}: superblock {}_offset {} + {}_size {} overlaps the data area at {}",
                where, name, offset, name, size, data_offset);
  }
  constexpr uint64_t kEnd = kSuperblockOffset + kSuperblockSize;
  if (offset < kEnd && offset + size > kSuperblockOffset) {
    return fail(EINVAL,
                "member {}: superblock {}_offset {} + {}_size {} overlaps the superblock at "
                "[{}, {})",
                where, name, offset, name, size, kSuperblockOffset, kEnd);
  }
  return {};
}

// The semantic checks, shared by decode (what we read) and write (what we are about to
// make durable).
Result<void> check_fields(const Superblock& sb, std::string_view where) {
  const auto level = static_cast<uint8_t>(sb.level);
  if (!valid_level(level)) {
    return fail(EINVAL, "member {}: superblock level {} is not a RAID level (0, 1, 5, 6, 10)",
                where, level);
  }
  const auto layout = static_cast<uint8_t>(sb.layout);
  if (layout > static_cast<uint8_t>(ParityLayout::right_symmetric)) {
    return fail(EINVAL, "member {}: superblock layout {} is not a parity layout (0..3)", where,
                layout);
  }
  const unsigned count = sb.member_count;
  if (count == 0 || count > Geometry::kMaxMembers) {
    return fail(EINVAL, "member {}: superblock member_count {} is out of range (1..{})", where,
                count, Geometry::kMaxMembers);
  }
  if (sb.role >= count && sb.role != kSpareRole) {
    return fail(EINVAL, "member {}: superblock role {} is not below member_count {}", where,
                sb.role, count);
  }
  if (sb.replacement() && (sb.spare() || is_zero(sb.replaces))) {
    return fail(EINVAL, "member {}: superblock says a replacement but names no role and member",
                where);
  }
  if (sb.chunk_size < 4096 || !std::has_single_bit(sb.chunk_size)) {
    return fail(EINVAL, "member {}: superblock chunk_size {} is not a power of two >= 4096", where,
                sb.chunk_size);
  }
  constexpr uint64_t kSuperblockEnd = kSuperblockOffset + kSuperblockSize;
  if (sb.data_offset % 4096 != 0 || sb.data_offset < kSuperblockEnd) {
    return fail(EINVAL,
                "member {}: superblock data_offset {} is not a multiple of 4096 at or after {}",
                where, sb.data_offset, kSuperblockEnd);
  }
  if (sb.data_size == 0 || sb.data_size > UINT64_MAX - sb.data_offset) {
    return fail(EINVAL, "member {}: superblock data_size {} is zero or runs past 2^64", where,
                sb.data_size);
  }
  for (size_t role = 0; role < sb.member_states.size(); ++role) {
    const auto state = static_cast<uint8_t>(sb.member_states[role]);
    if (state > static_cast<uint8_t>(MemberState::rebuilding)) {
      return fail(EINVAL, "member {}: superblock member_states[{}] = {} is not a member state",
                  where, role, state);
    }
  }
  if (auto ok = check_area(where, "bitmap", sb.bitmap_offset, sb.bitmap_size, sb.data_offset);
      !ok) {
    return ok;
  }
  if (sb.bitmap_size != 0 && sb.bitmap_chunk == 0) {
    return fail(EINVAL, "member {}: superblock bitmap_chunk is 0 with a {}-byte bitmap", where,
                sb.bitmap_size);
  }
  // A journal on a separate device (journal_device_uuid set) lies on that device, not here.
  const bool journal_here = is_zero(sb.journal_device_uuid);
  if (!journal_here) return {};
  if (auto ok = check_area(where, "journal", sb.journal_offset, sb.journal_size, sb.data_offset);
      !ok) {
    return ok;
  }
  // Both areas end before data_offset (checked above), so these sums cannot overflow.
  if (sb.bitmap_size != 0 && sb.journal_size != 0 &&
      sb.journal_offset < sb.bitmap_offset + sb.bitmap_size &&
      sb.bitmap_offset < sb.journal_offset + sb.journal_size) {
    return fail(EINVAL,
                "member {}: superblock journal area [{}, {}) overlaps the bitmap area [{}, {})",
                where, sb.journal_offset, sb.journal_offset + sb.journal_size, sb.bitmap_offset,
                sb.bitmap_offset + sb.bitmap_size);
  }
  return {};
}

Result<void> check_fits(const Member& member, const Superblock& sb) {
  // check_fields has ruled out overflow of data_offset + data_size.
  if (sb.data_offset + sb.data_size > member.size()) {
    return fail(EINVAL,
                "member {}: superblock data area [{}, {}) extends past the end of the member "
                "({} bytes)",
                member.name(), sb.data_offset, sb.data_offset + sb.data_size, member.size());
  }
  return {};
}

Result<void> check_holds_superblock(const Member& member) {
  if (member.size() < kSuperblockOffset + kSuperblockSize) {
    return fail(EINVAL, "member {}: too small to hold a superblock ({} bytes)", member.name(),
                member.size());
  }
  return {};
}

// Superblock I/O goes through an aligned buffer so O_DIRECT members accept it.
Block block_of(AlignedBuffer& buffer) {
  return Block(buffer.data(), kSuperblockSize);
}

}  // namespace

void encode_superblock(const Superblock& sb, std::span<std::byte, kSuperblockSize> out) {
  std::ranges::fill(out, std::byte{0});
  put_le(out, sl::kMagic, kSuperblockMagic);
  put_le(out, sl::kVersionMajor, sb.replacement() ? kReplacementMajor : kSuperblockMajor);
  put_le(out, sl::kVersionMinor, kSuperblockMinor);
  put_uuid(out, sl::kArrayUuid, sb.array_uuid);
  put_uuid(out, sl::kMemberUuid, sb.member_uuid);
  const size_t label_size = std::min(sb.label.size(), kLabelSize);
  std::memcpy(out.data() + sl::kLabel, sb.label.data(), label_size);
  put_le(out, sl::kCreated, sb.created);
  put_le(out, sl::kUpdated, sb.updated);
  put_le(out, sl::kLevel, static_cast<uint8_t>(sb.level));
  put_le(out, sl::kLayout, static_cast<uint8_t>(sb.layout));
  put_le(out, sl::kMemberCount, sb.member_count);
  put_le(out, sl::kRole, sb.role);
  put_le(out, sl::kChunkSize, sb.chunk_size);
  put_le(out, sl::kDataOffset, sb.data_offset);
  put_le(out, sl::kDataSize, sb.data_size);
  put_le(out, sl::kEvents, sb.events);
  put_le(out, sl::kFlags, sb.flags);
  put_le(out, sl::kRebuildCheckpoint, sb.rebuild_checkpoint);
  put_le(out, sl::kBitmapOffset, sb.bitmap_offset);
  put_le(out, sl::kBitmapSize, sb.bitmap_size);
  put_le(out, sl::kBitmapChunk, sb.bitmap_chunk);
  put_le(out, sl::kJournalOffset, sb.journal_offset);
  put_le(out, sl::kJournalSize, sb.journal_size);
  put_uuid(out, sl::kJournalDeviceUuid, sb.journal_device_uuid);
  for (size_t role = 0; role < sb.member_states.size(); ++role) {
    put_le(out, sl::kMemberStates + role, static_cast<uint8_t>(sb.member_states[role]));
  }
  put_le(out, sl::kScrubCheckpoint,
         sb.scrub_checkpoint == kNoScrub ? uint64_t{0} : sb.scrub_checkpoint + 1);
  put_le(out, sl::kScrubFlags, sb.scrub_flags);
  put_le(out, sl::kLastScrub, sb.last_scrub);
  put_le(out, sl::kLastScrubMismatched, sb.last_scrub_mismatched);
  put_le(out, sl::kLastScrubRepaired, sb.last_scrub_repaired);
  put_le(out, sl::kLastScrubUnrepairable, sb.last_scrub_unrepairable);
  put_le(out, sl::kScrubMismatched, sb.scrub_mismatched);
  put_le(out, sl::kScrubRepaired, sb.scrub_repaired);
  put_le(out, sl::kScrubUnrepairable, sb.scrub_unrepairable);
  put_uuid(out, sl::kReplaces, sb.replaces);
  ondisk::seal(out, sl::kChecksum);
}

uint64_t superblock_time() {
  return static_cast<uint64_t>(std::time(nullptr));
}

Result<Superblock> decode_superblock(std::span<const std::byte, kSuperblockSize> in,
                                     std::string_view where) {
  // Magic first, so a device that was never ours is reported as such, not as damaged.
  if (auto sealed =
          ondisk::check_sealed(in, kSealed, fmt::format("member {}", where), "superblock");
      !sealed) {
    return fail(sealed.error());
  }
  const auto major = get_le<uint16_t>(in, sl::kVersionMajor);
  const auto minor = get_le<uint16_t>(in, sl::kVersionMinor);
  if (major != kSuperblockMajor && major != kReplacementMajor) {
    return fail(EINVAL,
                "member {}: superblock version {}.{} is not supported (major {}, or {} for a "
                "replacement)",
                where, major, minor, kSuperblockMajor, kReplacementMajor);
  }
  const bool replacement = (get_le<uint32_t>(in, sl::kFlags) & Superblock::kFlagReplacement) != 0;
  if (replacement != (major == kReplacementMajor)) {
    return fail(EINVAL,
                "member {}: superblock version {}.{} is not supported {} the replacement flag",
                where, major, minor, replacement ? "with" : "without");
  }

  Superblock sb;
  sb.array_uuid = get_uuid(in, sl::kArrayUuid);
  sb.member_uuid = get_uuid(in, sl::kMemberUuid);
  sb.label.assign(reinterpret_cast<const char*>(in.data() + sl::kLabel), kLabelSize);
  sb.label.erase(sb.label.find_last_not_of('\0') + 1);  // npos + 1 == 0: all NULs
  sb.created = get_le<uint64_t>(in, sl::kCreated);
  sb.updated = get_le<uint64_t>(in, sl::kUpdated);
  // Enums have a fixed uint8_t underlying type, so any byte converts; check_fields rejects
  // values that name no enumerator.
  sb.level = static_cast<RaidLevel>(get_le<uint8_t>(in, sl::kLevel));
  sb.layout = static_cast<ParityLayout>(get_le<uint8_t>(in, sl::kLayout));
  sb.member_count = get_le<uint16_t>(in, sl::kMemberCount);
  sb.role = get_le<uint16_t>(in, sl::kRole);
  sb.chunk_size = get_le<uint32_t>(in, sl::kChunkSize);
  sb.data_offset = get_le<uint64_t>(in, sl::kDataOffset);
  sb.data_size = get_le<uint64_t>(in, sl::kDataSize);
  sb.events = get_le<uint64_t>(in, sl::kEvents);
  sb.flags = get_le<uint32_t>(in, sl::kFlags);
  sb.rebuild_checkpoint = get_le<uint64_t>(in, sl::kRebuildCheckpoint);
  sb.bitmap_offset = get_le<uint64_t>(in, sl::kBitmapOffset);
  sb.bitmap_size = get_le<uint64_t>(in, sl::kBitmapSize);
  sb.bitmap_chunk = get_le<uint64_t>(in, sl::kBitmapChunk);
  sb.journal_offset = get_le<uint64_t>(in, sl::kJournalOffset);
  sb.journal_size = get_le<uint64_t>(in, sl::kJournalSize);
  sb.journal_device_uuid = get_uuid(in, sl::kJournalDeviceUuid);
  for (size_t role = 0; role < sb.member_states.size(); ++role) {
    sb.member_states[role] =
        static_cast<MemberState>(get_le<uint8_t>(in, sl::kMemberStates + role));
  }
  const auto scrub = get_le<uint64_t>(in, sl::kScrubCheckpoint);
  sb.scrub_checkpoint = scrub == 0 ? kNoScrub : scrub - 1;
  sb.scrub_flags = get_le<uint32_t>(in, sl::kScrubFlags);
  sb.last_scrub = get_le<uint64_t>(in, sl::kLastScrub);
  sb.last_scrub_mismatched = get_le<uint64_t>(in, sl::kLastScrubMismatched);
  sb.last_scrub_repaired = get_le<uint64_t>(in, sl::kLastScrubRepaired);
  sb.last_scrub_unrepairable = get_le<uint64_t>(in, sl::kLastScrubUnrepairable);
  sb.scrub_mismatched = get_le<uint64_t>(in, sl::kScrubMismatched);
  sb.scrub_repaired = get_le<uint64_t>(in, sl::kScrubRepaired);
  sb.scrub_unrepairable = get_le<uint64_t>(in, sl::kScrubUnrepairable);
  sb.replaces = get_uuid(in, sl::kReplaces);
  if (auto ok = check_fields(sb, where); !ok) return fail(std::move(ok.error()));
  return sb;
}

Result<Superblock> read_superblock(Member& member) {
  if (auto ok = check_holds_superblock(member); !ok) return fail(std::move(ok.error()));
  AlignedBuffer buffer(kSuperblockSize);
  if (auto ok = member_read(member, kSuperblockOffset, buffer.span()); !ok) {
    return fail(ok.error().code, "reading the superblock: {}", ok.error().message);
  }
  auto sb = decode_superblock(block_of(buffer), member.name());
  if (!sb) return sb;
  if (auto ok = check_fits(member, *sb); !ok) return fail(std::move(ok.error()));
  return sb;
}

Result<void> write_superblock(Member& member, const Superblock& sb) {
  if (auto ok = check_holds_superblock(member); !ok) return ok;
  if (sb.label.size() > kLabelSize) {
    return fail(EINVAL, "member {}: superblock label '{}' is longer than {} bytes", member.name(),
                sb.label, kLabelSize);
  }
  if (auto ok = check_fields(sb, member.name()); !ok) return ok;
  if (auto ok = check_fits(member, sb); !ok) return ok;
  AlignedBuffer buffer(kSuperblockSize);
  encode_superblock(sb, block_of(buffer));
  if (auto ok = member_write(member, kSuperblockOffset, buffer.span(), /*fua=*/true); !ok) {
    return fail(ok.error().code, "writing the superblock: {}", ok.error().message);
  }
  return {};
}

}  // namespace stripefs
