#include "journal/bitmap_format.hpp"

#include <algorithm>
#include <bit>
#include <concepts>
#include <utility>

#include "raid/aligned_buffer.hpp"
#include "raid/ondisk.hpp"

namespace stripefs {

namespace {

namespace bl = bitmap_layout;

using Block = std::span<std::byte, kBitmapHeaderSize>;

constexpr uint64_t kMinRegionSize = 4096;
constexpr uint64_t kDefaultMinRegionSize = uint64_t{2} << 20;
constexpr uint64_t kDefaultMaxRegions = 16384;
constexpr uint64_t kBitsBlock = 4096;

using ondisk::get_le;
using ondisk::put_le;

using ondisk::get_uuid;
using ondisk::put_uuid;

constexpr ondisk::Sealed kSealed{bl::kMagic, kBitmapMagic, bl::kChecksum};

constexpr uint64_t div_ceil(uint64_t a, uint64_t b) {
  return a / b + (a % b != 0);  // no overflow, unlike (a + b - 1) / b
}

// The semantic checks, shared by decode (what we read) and write (what we are about to make
// durable). The array_uuid is checked by decode alone: a writer has nothing to compare with.
Result<void> check_fields(const BitmapHeader& h, std::string_view where) {
  if (h.region_size < kMinRegionSize || !std::has_single_bit(h.region_size)) {
    return fail(EINVAL, "member {}: bitmap region_size {} is not a power of two >= {}", where,
                h.region_size, kMinRegionSize);
  }
  if (h.regions == 0) {
    return fail(EINVAL, "member {}: bitmap regions {} is zero", where, h.regions);
  }
  if (h.data_size == 0) {
    return fail(EINVAL, "member {}: bitmap data_size {} is zero", where, h.data_size);
  }
  if (const uint64_t expected = div_ceil(h.data_size, h.region_size); h.regions != expected) {
    return fail(EINVAL,
                "member {}: bitmap regions {} does not cover data_size {} in regions of {} "
                "(expected {})",
                where, h.regions, h.data_size, h.region_size, expected);
  }
  if (h.daemon_sleep_ms == 0) {
    return fail(EINVAL, "member {}: bitmap daemon_sleep_ms {} is zero", where, h.daemon_sleep_ms);
  }
  return {};
}

Result<void> check_holds_header(const Member& member, uint64_t area_offset) {
  if (area_offset > member.size() || member.size() - area_offset < kBitmapHeaderSize) {
    return fail(EINVAL,
                "member {}: bitmap header at byte {} extends past the end of the member ({} "
                "bytes)",
                member.name(), area_offset, member.size());
  }
  return {};
}

// Header I/O goes through an aligned buffer so O_DIRECT members accept it.
Block block_of(AlignedBuffer& buffer) {
  return Block(buffer.data(), kBitmapHeaderSize);
}

}  // namespace

uint64_t bitmap_bits_bytes(uint64_t regions) {
  // At most 2^61 bytes, so rounding up to a block cannot overflow.
  return div_ceil(div_ceil(regions, 8), kBitsBlock) * kBitsBlock;
}

uint64_t default_region_size(uint64_t data_size) {
  // Terminates by 2^50: ceil((2^64 - 1) / 2^50) == 16384.
  uint64_t region_size = kDefaultMinRegionSize;
  while (div_ceil(data_size, region_size) > kDefaultMaxRegions) region_size <<= 1;
  return region_size;
}

void encode_bitmap_header(const BitmapHeader& header, std::span<std::byte, kBitmapHeaderSize> out) {
  std::ranges::fill(out, std::byte{0});
  put_le(out, bl::kMagic, kBitmapMagic);
  put_le(out, bl::kVersionMajor, kBitmapMajor);
  put_le(out, bl::kVersionMinor, kBitmapMinor);
  put_uuid(out, bl::kArrayUuid, header.array_uuid);
  put_le(out, bl::kEvents, header.events);
  put_le(out, bl::kEventsCleared, header.events_cleared);
  put_le(out, bl::kRegionSize, header.region_size);
  put_le(out, bl::kRegions, header.regions);
  put_le(out, bl::kDataSize, header.data_size);
  put_le(out, bl::kFlags, header.flags);
  put_le(out, bl::kDaemonSleepMs, header.daemon_sleep_ms);
  ondisk::seal(out, bl::kChecksum);
}

Result<BitmapHeader> decode_bitmap_header(std::span<const std::byte, kBitmapHeaderSize> in,
                                          std::string_view where, const Uuid& expected_array_uuid) {
  // Magic first, so an area never written is reported as such, not as damaged.
  if (auto sealed = ondisk::check_sealed(in, kSealed, fmt::format("member {}", where), "bitmap");
      !sealed) {
    return fail(sealed.error());
  }
  const auto major = get_le<uint16_t>(in, bl::kVersionMajor);
  const auto minor = get_le<uint16_t>(in, bl::kVersionMinor);
  if (major != kBitmapMajor) {
    return fail(EINVAL, "member {}: bitmap version {}.{} is not supported (major {} only)", where,
                major, minor, kBitmapMajor);
  }

  BitmapHeader header;
  header.array_uuid = get_uuid(in, bl::kArrayUuid);
  header.events = get_le<uint64_t>(in, bl::kEvents);
  header.events_cleared = get_le<uint64_t>(in, bl::kEventsCleared);
  header.region_size = get_le<uint64_t>(in, bl::kRegionSize);
  header.regions = get_le<uint64_t>(in, bl::kRegions);
  header.data_size = get_le<uint64_t>(in, bl::kDataSize);
  header.flags = get_le<uint32_t>(in, bl::kFlags);
  header.daemon_sleep_ms = get_le<uint32_t>(in, bl::kDaemonSleepMs);
  if (auto ok = check_fields(header, where); !ok) return fail(std::move(ok.error()));
  if (header.array_uuid != expected_array_uuid) {
    return fail(EINVAL, "member {}: bitmap array_uuid {} does not match the array's {}", where,
                format_uuid(header.array_uuid), format_uuid(expected_array_uuid));
  }
  return header;
}

Result<void> check_bitmap_fits(const BitmapHeader& header, uint64_t area_size,
                               std::string_view where) {
  // bitmap_bits_bytes is at most 2^61: the sum cannot overflow.
  const uint64_t bits = bitmap_bits_bytes(header.regions);
  const uint64_t needed = kBitmapHeaderSize + bits;
  if (needed > area_size) {
    return fail(EINVAL,
                "member {}: bitmap of {} regions needs {} bytes ({} header + {} bits) but the "
                "area holds {}",
                where, header.regions, needed, kBitmapHeaderSize, bits, area_size);
  }
  return {};
}

Result<BitmapHeader> read_bitmap_header(Member& member, uint64_t area_offset,
                                        const Uuid& expected_array_uuid) {
  if (auto ok = check_holds_header(member, area_offset); !ok) return fail(std::move(ok.error()));
  AlignedBuffer buffer(kBitmapHeaderSize);
  if (auto ok = member_read(member, area_offset, buffer.span()); !ok) {
    return fail(ok.error().code, "reading the bitmap header: {}", ok.error().message);
  }
  return decode_bitmap_header(block_of(buffer), member.name(), expected_array_uuid);
}

Result<void> write_bitmap_header(Member& member, uint64_t area_offset, const BitmapHeader& header) {
  if (auto ok = check_holds_header(member, area_offset); !ok) return ok;
  if (auto ok = check_fields(header, member.name()); !ok) return ok;
  AlignedBuffer buffer(kBitmapHeaderSize);
  encode_bitmap_header(header, block_of(buffer));
  if (auto ok = member_write(member, area_offset, buffer.span(), /*fua=*/true); !ok) {
    return fail(ok.error().code, "writing the bitmap header: {}", ok.error().message);
  }
  return {};
}

}  // namespace stripefs
