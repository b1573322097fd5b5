#include "journal/bitmap_format.hpp"

#include <gtest/gtest.h>

#include <isa-l/crc.h>
#include "unit/block_test_util.hpp"

#include <bit>
#include <string>
#include <vector>

#include "raid/faulty_member.hpp"
#include "raid/memory_member.hpp"

namespace stripefs {
namespace {

namespace bl = bitmap_layout;
static_assert(bl::kChecksum == test::kBlockChecksum);

using Block = test::Block4K;
using test::crc32c;
using test::Damage;
using test::get;
using test::put;
using test::put_width;
using test::reseal;

constexpr std::string_view kWhere = "/dev/test";
constexpr uint64_t kAreaOffset = 8192;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;

Uuid array_uuid() {
  Uuid uuid;
  for (uint8_t i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(0x10 + i);
  return uuid;
}

// Every field differs from its default, so a field the codec forgets cannot round-trip.
BitmapHeader populated() {
  BitmapHeader h;
  h.array_uuid = array_uuid();
  h.events = 0x0102'0304'0506'0708;
  h.events_cleared = 0x0102'0304'0506'0000;
  h.region_size = 64 * kMiB;
  h.data_size = 10 * kGiB + 12345;  // not a whole number of regions: the last is partial
  h.regions = 161;                  // ceil(data_size / region_size)
  h.flags = BitmapHeader::kFlagStale | 0x8000'0000;  // plus a bit from a future minor
  h.daemon_sleep_ms = 250;
  return h;
}

Block encoded(const BitmapHeader& h) {
  Block block;
  encode_bitmap_header(h, block);
  return block;
}

Error decode_error(const Block& block, const Uuid& expected = array_uuid()) {
  auto h = decode_bitmap_header(block, kWhere, expected);
  EXPECT_FALSE(h.has_value()) << "decode accepted a damaged bitmap header";
  return h ? Error{} : h.error();
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(BitmapHeader, RoundTripsEveryField) {
  const BitmapHeader in = populated();
  auto out = decode_bitmap_header(encoded(in), kWhere, array_uuid());
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->array_uuid, in.array_uuid);
  EXPECT_EQ(out->events, in.events);
  EXPECT_EQ(out->events_cleared, in.events_cleared);
  EXPECT_EQ(out->region_size, in.region_size);
  EXPECT_EQ(out->regions, in.regions);
  EXPECT_EQ(out->data_size, in.data_size);
  EXPECT_EQ(out->flags, in.flags);
  EXPECT_EQ(out->daemon_sleep_ms, in.daemon_sleep_ms);
  EXPECT_EQ(*out, in);
  EXPECT_TRUE(out->stale());
}

TEST(BitmapHeader, PopulatedDiffersFromDefaultInEveryField) {
  const BitmapHeader d;
  const BitmapHeader p = populated();
  EXPECT_NE(p.array_uuid, d.array_uuid);
  EXPECT_NE(p.events, d.events);
  EXPECT_NE(p.events_cleared, d.events_cleared);
  EXPECT_NE(p.region_size, d.region_size);
  EXPECT_NE(p.regions, d.regions);
  EXPECT_NE(p.data_size, d.data_size);
  EXPECT_NE(p.flags, d.flags);
  EXPECT_NE(p.daemon_sleep_ms, d.daemon_sleep_ms);
  EXPECT_EQ(d.daemon_sleep_ms, 5000u);
}

// Pins the on-disk format: fields at their documented offsets, little-endian, reserved bytes
// zero, and a checksum any CRC-32C implementation reproduces.
TEST(BitmapHeader, EncodesDocumentedLayout) {
  const Block block = encoded(populated());
  EXPECT_EQ(block[0], std::byte{0x53});
  EXPECT_EQ(block[1], std::byte{0x54});
  EXPECT_EQ(block[2], std::byte{0x42});
  EXPECT_EQ(block[3], std::byte{0x4D});
  EXPECT_EQ(get<uint16_t>(block, 4), 1);
  EXPECT_EQ(get<uint16_t>(block, 6), 0);
  EXPECT_EQ(block[8], std::byte{0x10});
  EXPECT_EQ(block[23], std::byte{0x1f});
  // events = 0x0102030405060708: least significant byte first.
  EXPECT_EQ(block[24], std::byte{0x08});
  EXPECT_EQ(block[31], std::byte{0x01});
  EXPECT_EQ(get<uint64_t>(block, 24), 0x0102'0304'0506'0708u);
  EXPECT_EQ(get<uint64_t>(block, 32), 0x0102'0304'0506'0000u);
  EXPECT_EQ(get<uint64_t>(block, 40), 64 * kMiB);
  EXPECT_EQ(get<uint64_t>(block, 48), 161u);
  EXPECT_EQ(get<uint64_t>(block, 56), 10 * kGiB + 12345);
  EXPECT_EQ(get<uint32_t>(block, 64), 0x8000'0001u);
  EXPECT_EQ(get<uint32_t>(block, 68), 250u);
  for (size_t at = 72; at < 4092; ++at) {
    ASSERT_EQ(block[at], std::byte{0}) << "reserved byte " << at;
  }
  EXPECT_EQ(get<uint32_t>(block, 4092), crc32c(block));
}

TEST(BitmapHeader, ChecksumIsStandardCrc32c) {
  unsigned char text[] = "123456789";
  EXPECT_EQ(~crc32_iscsi(text, 9, 0xFFFFFFFFu), 0xe3069283u);
}

TEST(BitmapHeader, StaleFlag) {
  BitmapHeader h;
  EXPECT_FALSE(h.stale());
  h.flags = 0x10;
  h.set_stale(true);
  EXPECT_TRUE(h.stale());
  EXPECT_EQ(h.flags, 0x11u);
  h.set_stale(false);
  EXPECT_FALSE(h.stale());
  EXPECT_EQ(h.flags, 0x10u);
}

TEST(BitmapHeader, AcceptsHigherMinorVersion) {
  Block block = encoded(populated());
  put<uint16_t>(block, bl::kVersionMinor, 3);
  block[bl::kReserved + 10] = std::byte{0x5a};  // a field this version does not know
  reseal(block);
  auto out = decode_bitmap_header(block, kWhere, array_uuid());
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, populated());
}

TEST(BitmapHeader, AcceptsMinimalHeader) {
  BitmapHeader h;
  h.region_size = 4096;
  h.data_size = 1;
  h.regions = 1;
  h.daemon_sleep_ms = 1;
  auto out = decode_bitmap_header(encoded(h), kWhere, Uuid{});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, h);
  EXPECT_FALSE(out->stale());
}

class BitmapHeaderDamage : public testing::TestWithParam<Damage> {};

TEST_P(BitmapHeaderDamage, IsRejectedNamingMemberFieldAndValue) {
  const Damage& d = GetParam();
  Block block = encoded(populated());
  ASSERT_TRUE(test::put_width(block, d.offset, d.width, d.value)) << "bad width " << d.width;
  reseal(block);
  const Error error = decode_error(block);
  EXPECT_EQ(error.code, d.code) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("member {}: bitmap ", kWhere))) << error.message;
  EXPECT_TRUE(contains(error.message, d.reason)) << error.message;
  EXPECT_TRUE(contains(error.message, d.shown)) << error.message;
  EXPECT_FALSE(contains(error.message, "\n")) << error.message;
}

// populated(): 64 MiB regions, data_size 10 GiB + 12345, so 161 regions.
const Damage kDamages[] = {
    {"magic", bl::kMagic, 4, 0x12345678, ENODATA, "no stripefs bitmap", "magic 0x12345678"},
    {"zero_magic", bl::kMagic, 4, 0, ENODATA, "no stripefs bitmap", "magic 0x00000000"},
    {"superblock_magic", bl::kMagic, 4, kSuperblockMagic, ENODATA, "no stripefs bitmap",
     "magic 0x53545046"},
    {"major_0", bl::kVersionMajor, 2, 0, EINVAL, "not supported", "version 0.0"},
    {"major_2", bl::kVersionMajor, 2, 2, EINVAL, "not supported", "version 2.0"},
    {"region_size_0", bl::kRegionSize, 8, 0, EINVAL, "power of two >= 4096", "region_size 0"},
    {"region_size_small", bl::kRegionSize, 8, 2048, EINVAL, "power of two >= 4096",
     "region_size 2048"},
    {"region_size_not_pow2", bl::kRegionSize, 8, 3 * 4096, EINVAL, "power of two >= 4096",
     "region_size 12288"},
    {"region_size_top_bits", bl::kRegionSize, 8, (uint64_t{1} << 63) | 4096, EINVAL, "power of two",
     "region_size 9223372036854779904"},
    {"regions_0", bl::kRegions, 8, 0, EINVAL, "zero", "regions 0"},
    {"regions_one_short", bl::kRegions, 8, 160, EINVAL, "expected 161", "regions 160"},
    {"regions_one_over", bl::kRegions, 8, 162, EINVAL, "expected 161", "regions 162"},
    {"regions_huge", bl::kRegions, 8, UINT64_MAX, EINVAL, "expected 161",
     "regions 18446744073709551615"},
    {"data_size_0", bl::kDataSize, 8, 0, EINVAL, "zero", "data_size 0"},
    {"data_size_one_region_more", bl::kDataSize, 8, 161 * 64 * kMiB + 1, EINVAL, "expected 162",
     "regions 161"},
    {"data_size_fewer_regions", bl::kDataSize, 8, 160 * 64 * kMiB, EINVAL, "expected 160",
     "regions 161"},
    {"data_size_huge", bl::kDataSize, 8, UINT64_MAX, EINVAL, "expected 274877906944",
     "regions 161"},
    {"daemon_sleep_ms_0", bl::kDaemonSleepMs, 4, 0, EINVAL, "zero", "daemon_sleep_ms 0"},
    {"array_uuid", bl::kArrayUuid + 15, 1, 0xee, EINVAL, "does not match",
     "array_uuid 10111213-1415-1617-1819-1a1b1c1d1eee"},
};

INSTANTIATE_TEST_SUITE_P(EachField, BitmapHeaderDamage, testing::ValuesIn(kDamages),
                         [](const testing::TestParamInfo<Damage>& info) {
                           return info.param.name;
                         });

// The header is intact but belongs to another array (e.g. a member reused without wiping).
TEST(BitmapHeader, ForeignArrayIsRejectedNamingBothUuids) {
  Uuid other = array_uuid();
  other[0] = 0xaa;
  const Error error = decode_error(encoded(populated()), other);
  EXPECT_EQ(error.code, EINVAL);
  EXPECT_TRUE(contains(error.message, kWhere)) << error.message;
  EXPECT_TRUE(contains(error.message, "bitmap array_uuid " + format_uuid(array_uuid())))
      << error.message;
  EXPECT_TRUE(contains(error.message, format_uuid(other))) << error.message;
}

// Fields are checked before the owner, so a header that is both wrong and foreign reports
// the field.
TEST(BitmapHeader, FieldsAreCheckedBeforeArrayUuid) {
  Block block = encoded(populated());
  put<uint32_t>(block, bl::kDaemonSleepMs, 0);
  reseal(block);
  const Error error = decode_error(block, Uuid{});
  EXPECT_TRUE(contains(error.message, "daemon_sleep_ms")) << error.message;
}

TEST(BitmapHeader, ChecksumMismatchNamesBothValues) {
  Block block = encoded(populated());
  const uint32_t good = get<uint32_t>(block, bl::kChecksum);
  block[bl::kEvents] ^= std::byte{0x01};
  const Error error = decode_error(block);
  EXPECT_EQ(error.code, EUCLEAN);
  EXPECT_TRUE(contains(error.message, fmt::format("member {}: bitmap checksum mismatch", kWhere)))
      << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("stored 0x{:08x}", good))) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("computed 0x{:08x}", crc32c(block))))
      << error.message;
}

// A damaged checksum is reported as such even when a field is bad too: the checksum is
// checked before the fields.
TEST(BitmapHeader, ChecksumIsCheckedBeforeVersionAndFields) {
  Block block = encoded(populated());
  put<uint16_t>(block, bl::kVersionMajor, 9);
  put<uint32_t>(block, bl::kDaemonSleepMs, 0);
  EXPECT_EQ(decode_error(block).code, EUCLEAN);
}

// Damage the checksum cannot miss. A flip inside the magic is reported as "not ours", since
// the magic is checked first.
TEST(BitmapHeader, AnySingleBitFlipIsRejected) {
  const Block good = encoded(populated());
  std::vector<size_t> bits;
  for (size_t bit = 0; bit < bl::kChecksum * 8; bit += 37) bits.push_back(bit);
  for (size_t bit = bl::kChecksum * 8; bit < kBitmapHeaderSize * 8; ++bit) bits.push_back(bit);
  for (size_t bit : bits) {
    Block block = good;
    block[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    auto h = decode_bitmap_header(block, kWhere, array_uuid());
    ASSERT_FALSE(h.has_value()) << "flip of bit " << bit << " went unnoticed";
    const int expected = bit / 8 < bl::kMagic + 4 ? ENODATA : EUCLEAN;
    EXPECT_EQ(h.error().code, expected) << "bit " << bit << ": " << h.error().message;
  }
}

TEST(BitmapBitsBytes, RoundsUpToWholeBlocks) {
  EXPECT_EQ(bitmap_bits_bytes(0), 0u);
  EXPECT_EQ(bitmap_bits_bytes(1), 4096u);
  EXPECT_EQ(bitmap_bits_bytes(8), 4096u);
  EXPECT_EQ(bitmap_bits_bytes(9), 4096u);
  EXPECT_EQ(bitmap_bits_bytes(16384), 4096u);
  EXPECT_EQ(bitmap_bits_bytes(4096 * 8), 4096u);
  EXPECT_EQ(bitmap_bits_bytes(4096 * 8 + 1), 8192u);
  EXPECT_EQ(bitmap_bits_bytes(2 * 4096 * 8), 8192u);
  EXPECT_EQ(bitmap_bits_bytes(2 * 4096 * 8 + 1), 12288u);
  EXPECT_EQ(bitmap_bits_bytes(UINT64_MAX), uint64_t{1} << 61);  // no overflow
}

TEST(DefaultRegionSize, IsTwoMiBForSmallData) {
  EXPECT_EQ(default_region_size(0), 2 * kMiB);
  EXPECT_EQ(default_region_size(1), 2 * kMiB);
  EXPECT_EQ(default_region_size(1 * kMiB), 2 * kMiB);
  EXPECT_EQ(default_region_size(1 * kGiB), 2 * kMiB);
  EXPECT_EQ(default_region_size(16384 * 2 * kMiB), 2 * kMiB);  // exactly 16384 regions
  EXPECT_EQ(default_region_size(16384 * 2 * kMiB + 1), 4 * kMiB);
}

TEST(DefaultRegionSize, IsMdsSixtyFourMiBForOneTiB) {
  EXPECT_EQ(default_region_size(1 * kTiB), 64 * kMiB);
  EXPECT_EQ(default_region_size(1 * kTiB + 1), 128 * kMiB);
}

TEST(DefaultRegionSize, HandlesTheLargestSize) {
  const uint64_t region_size = default_region_size(UINT64_MAX);
  EXPECT_EQ(region_size, uint64_t{1} << 50);
}

// From 1 MiB to 64 TiB, in steps that hit powers of two, their neighbours and odd sizes.
TEST(DefaultRegionSize, IsTheSmallestPowerOfTwoThatKeepsRegionsAtMost16384) {
  for (uint64_t base = kMiB; base <= 64 * kTiB; base *= 2) {
    for (uint64_t data_size : {base - 1, base, base + 1, base + base / 3}) {
      const uint64_t region_size = default_region_size(data_size);
      ASSERT_TRUE(std::has_single_bit(region_size)) << data_size;
      ASSERT_GE(region_size, 2 * kMiB) << data_size;
      const uint64_t regions = (data_size + region_size - 1) / region_size;
      ASSERT_LE(regions, 16384u) << data_size;
      if (region_size > 2 * kMiB) {
        const uint64_t half = region_size / 2;
        ASSERT_GT((data_size + half - 1) / half, 16384u) << data_size << ": not the smallest";
      }
      // The default always yields a header that validates.
      BitmapHeader h = populated();
      h.region_size = region_size;
      h.data_size = data_size;
      h.regions = regions;
      ASSERT_TRUE(decode_bitmap_header(encoded(h), kWhere, array_uuid())) << data_size;
    }
  }
}

TEST(CheckBitmapFits, AcceptsExactFitAndRefusesOneByteShort) {
  const BitmapHeader h = populated();  // 161 regions: one block of bits
  EXPECT_TRUE(check_bitmap_fits(h, 8192, kWhere));
  EXPECT_TRUE(check_bitmap_fits(h, 1 << 20, kWhere));
  auto short_area = check_bitmap_fits(h, 8191, kWhere);
  ASSERT_FALSE(short_area);
  EXPECT_EQ(short_area.error().code, EINVAL);
  const std::string& message = short_area.error().message;
  EXPECT_TRUE(contains(message, fmt::format("member {}: bitmap ", kWhere))) << message;
  EXPECT_TRUE(contains(message, "8192")) << message;
  EXPECT_TRUE(contains(message, "8191")) << message;
  EXPECT_FALSE(check_bitmap_fits(h, 0, kWhere));

  BitmapHeader big = h;
  big.region_size = 4096;
  big.data_size = uint64_t{4096} * 8 * 4096 * 3 + 4096;  // 3 blocks of bits and one bit more
  big.regions = 4096 * 8 * 3 + 1;
  EXPECT_TRUE(check_bitmap_fits(big, 4096 + 4 * 4096, kWhere));
  EXPECT_FALSE(check_bitmap_fits(big, 4096 + 4 * 4096 - 1, kWhere));

  BitmapHeader huge = h;  // (regions + 7) / 8 would overflow
  huge.regions = UINT64_MAX;
  EXPECT_TRUE(check_bitmap_fits(huge, (uint64_t{1} << 61) + 4096, kWhere));
  EXPECT_FALSE(check_bitmap_fits(huge, (uint64_t{1} << 61) + 4095, kWhere));
}

TEST(BitmapHeaderIo, WriteIsOneAlignedFuaRequestAndReadsBack) {
  MemoryMember media("mem0", 1 << 20);
  FaultyMember member(media);
  member.set_logging(true);
  const BitmapHeader h = populated();
  ASSERT_TRUE(write_bitmap_header(member, kAreaOffset, h));
  const auto log = member.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].op, MemberOp::write);
  EXPECT_EQ(log[0].offset, kAreaOffset);
  EXPECT_EQ(log[0].length, kBitmapHeaderSize);
  EXPECT_TRUE(log[0].fua);
  ASSERT_EQ(log[0].iov.size(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(log[0].iov[0].iov_base) % 4096, 0u);

  auto back = read_bitmap_header(member, kAreaOffset, array_uuid());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, h);
  const auto reads = member.take_log();
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].op, MemberOp::read);
  EXPECT_EQ(reads[0].offset, kAreaOffset);
  EXPECT_EQ(reads[0].length, kBitmapHeaderSize);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(reads[0].iov[0].iov_base) % 4096, 0u);

  // It sits at the area offset and nowhere else.
  const auto contents = media.contents();
  EXPECT_EQ(contents[kAreaOffset], std::byte{0x53});
  for (size_t at = 0; at < contents.size(); ++at) {
    if (at >= kAreaOffset && at < kAreaOffset + kBitmapHeaderSize) continue;
    ASSERT_EQ(contents[at], std::byte{0}) << at;
  }
}

TEST(BitmapHeaderIo, ZeroedAreaIsNotABitmap) {
  MemoryMember member("mem0", 1 << 20);
  auto h = read_bitmap_header(member, kAreaOffset, array_uuid());
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code, ENODATA);
  EXPECT_TRUE(contains(h.error().message, "member mem0: bitmap magic")) << h.error().message;
}

TEST(BitmapHeaderIo, DamagedOnMemberIsUnclean) {
  MemoryMember member("mem0", 1 << 20);
  ASSERT_TRUE(write_bitmap_header(member, kAreaOffset, populated()));
  member.contents()[kAreaOffset + bl::kEventsCleared] ^= std::byte{0x80};
  auto h = read_bitmap_header(member, kAreaOffset, array_uuid());
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code, EUCLEAN);
}

TEST(BitmapHeaderIo, ReadRefusesForeignArray) {
  MemoryMember member("mem0", 1 << 20);
  ASSERT_TRUE(write_bitmap_header(member, kAreaOffset, populated()));
  auto h = read_bitmap_header(member, kAreaOffset, Uuid{});
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code, EINVAL);
  EXPECT_TRUE(contains(h.error().message, "array_uuid")) << h.error().message;
}

TEST(BitmapHeaderIo, WriteRefusesWhatReadWouldReject) {
  MemoryMember member("mem0", 1 << 20);
  const BitmapHeader good = populated();

  BitmapHeader bad = good;
  bad.regions += 1;
  auto result = write_bitmap_header(member, kAreaOffset, bad);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, EINVAL);
  EXPECT_TRUE(contains(result.error().message, "member mem0: bitmap regions 162"))
      << result.error().message;

  bad = good;
  bad.region_size = 5000;
  EXPECT_FALSE(write_bitmap_header(member, kAreaOffset, bad));

  bad = good;
  bad.daemon_sleep_ms = 0;
  EXPECT_FALSE(write_bitmap_header(member, kAreaOffset, bad));

  result = write_bitmap_header(member, (1 << 20) - 4096 + 512, good);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, EINVAL);
  EXPECT_TRUE(contains(result.error().message, "past the end")) << result.error().message;
  EXPECT_FALSE(write_bitmap_header(member, UINT64_MAX, good));

  for (std::byte b : member.contents()) ASSERT_EQ(b, std::byte{0}) << "a refused write landed";
}

TEST(BitmapHeaderIo, HeaderAtTheVeryEndOfTheMember) {
  MemoryMember member("mem0", 1 << 20);
  const uint64_t last = (1 << 20) - kBitmapHeaderSize;
  ASSERT_TRUE(write_bitmap_header(member, last, populated()));
  auto back = read_bitmap_header(member, last, array_uuid());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, populated());

  auto past = read_bitmap_header(member, last + 4096, array_uuid());
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, EINVAL);
  EXPECT_TRUE(contains(past.error().message, "mem0")) << past.error().message;
}

TEST(BitmapHeaderIo, ReadAndWriteErrorsArePassedOn) {
  MemoryMember media("mem0", 1 << 20);
  FaultyMember member(media);
  member.fail_range(MemberOp::read, {kAreaOffset, kAreaOffset + 1});
  member.fail_range(MemberOp::write, {kAreaOffset, kAreaOffset + 1});
  auto read = read_bitmap_header(member, kAreaOffset, array_uuid());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, EIO);
  EXPECT_TRUE(contains(read.error().message, "bitmap header")) << read.error().message;
  auto write = write_bitmap_header(member, kAreaOffset, populated());
  ASSERT_FALSE(write);
  EXPECT_EQ(write.error().code, EIO);
  EXPECT_TRUE(contains(write.error().message, "bitmap header")) << write.error().message;
}

}  // namespace
}  // namespace stripefs
