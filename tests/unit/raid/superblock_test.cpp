#include "raid/superblock.hpp"

#include <gtest/gtest.h>

#include <isa-l/crc.h>
#include "unit/block_test_util.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "raid/faulty_member.hpp"
#include "raid/memory_member.hpp"

namespace stripefs {
namespace {

namespace sl = superblock_layout;
static_assert(sl::kChecksum == test::kBlockChecksum);

using Block = test::Block4K;
using test::crc32c;
using test::Damage;
using test::get;
using test::put;
using test::put_width;
using test::reseal;

constexpr std::string_view kWhere = "/dev/test";

// Every field differs from its default, so a field the codec forgets cannot round-trip.
Superblock populated() {
  Superblock sb;
  for (uint8_t i = 0; i < 16; ++i) {
    sb.array_uuid[i] = static_cast<uint8_t>(0x10 + i);
    sb.member_uuid[i] = static_cast<uint8_t>(0xa0 + i);
    sb.journal_device_uuid[i] = static_cast<uint8_t>(0xf0 - i);
  }
  sb.label = "archive-\xc3\xa9t\xc3\xa9";  // "archive-été": multi-byte UTF-8
  sb.created = 1'700'000'000;
  sb.updated = 1'700'000'500;
  sb.level = RaidLevel::raid6;
  sb.layout = ParityLayout::right_asymmetric;
  sb.member_count = 6;
  sb.role = 4;
  sb.chunk_size = 128 * 1024;
  sb.data_offset = 1 << 20;
  sb.data_size = uint64_t{1} << 30;
  sb.events = 0x0102'0304'0506'0708;
  sb.flags = Superblock::kFlagClean | 0x8000'0000;  // plus a bit from a future minor
  sb.rebuild_checkpoint = 123 * 4096;
  sb.bitmap_offset = 8192;
  sb.bitmap_size = 64 * 1024;
  sb.bitmap_chunk = 64 * 1024 * 1024;
  sb.journal_offset = 8192 + 64 * 1024;
  sb.journal_size = 512 * 1024;
  sb.member_states[1] = MemberState::faulty;
  sb.member_states[2] = MemberState::missing;
  sb.member_states[4] = MemberState::rebuilding;
  sb.member_states[63] = MemberState::faulty;
  sb.scrub_checkpoint = 77;
  sb.scrub_flags = Superblock::kScrubRepair;
  sb.last_scrub = 1'700'000'900;
  sb.last_scrub_mismatched = 5;
  sb.last_scrub_repaired = 4;
  sb.last_scrub_unrepairable = 1;
  sb.scrub_mismatched = 9;
  sb.scrub_repaired = 8;
  sb.scrub_unrepairable = 7;
  sb.replaces = Uuid{0x51, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0x5f};
  return sb;
}

Block encoded(const Superblock& sb) {
  Block block;
  encode_superblock(sb, block);
  return block;
}

Error decode_error(const Block& block) {
  auto sb = decode_superblock(block, kWhere);
  EXPECT_FALSE(sb.has_value()) << "decode accepted damaged superblock";
  return sb ? Error{} : sb.error();
}

TEST(Superblock, RoundTripsEveryField) {
  const Superblock in = populated();
  auto out = decode_superblock(encoded(in), kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->array_uuid, in.array_uuid);
  EXPECT_EQ(out->member_uuid, in.member_uuid);
  EXPECT_EQ(out->label, in.label);
  EXPECT_EQ(out->created, in.created);
  EXPECT_EQ(out->updated, in.updated);
  EXPECT_EQ(out->level, in.level);
  EXPECT_EQ(out->layout, in.layout);
  EXPECT_EQ(out->member_count, in.member_count);
  EXPECT_EQ(out->role, in.role);
  EXPECT_EQ(out->chunk_size, in.chunk_size);
  EXPECT_EQ(out->data_offset, in.data_offset);
  EXPECT_EQ(out->data_size, in.data_size);
  EXPECT_EQ(out->events, in.events);
  EXPECT_EQ(out->flags, in.flags);
  EXPECT_EQ(out->rebuild_checkpoint, in.rebuild_checkpoint);
  EXPECT_EQ(out->bitmap_offset, in.bitmap_offset);
  EXPECT_EQ(out->bitmap_size, in.bitmap_size);
  EXPECT_EQ(out->bitmap_chunk, in.bitmap_chunk);
  EXPECT_EQ(out->journal_offset, in.journal_offset);
  EXPECT_EQ(out->journal_size, in.journal_size);
  EXPECT_EQ(out->journal_device_uuid, in.journal_device_uuid);
  EXPECT_EQ(out->member_states, in.member_states);
  EXPECT_EQ(out->scrub_checkpoint, in.scrub_checkpoint);
  EXPECT_EQ(out->scrub_flags, in.scrub_flags);
  EXPECT_EQ(out->last_scrub, in.last_scrub);
  EXPECT_EQ(out->last_scrub_mismatched, in.last_scrub_mismatched);
  EXPECT_EQ(out->last_scrub_repaired, in.last_scrub_repaired);
  EXPECT_EQ(out->last_scrub_unrepairable, in.last_scrub_unrepairable);
  EXPECT_EQ(out->scrub_mismatched, in.scrub_mismatched);
  EXPECT_EQ(out->scrub_repaired, in.scrub_repaired);
  EXPECT_EQ(out->scrub_unrepairable, in.scrub_unrepairable);
  EXPECT_EQ(out->replaces, in.replaces);
  EXPECT_EQ(*out, in);
  EXPECT_TRUE(out->clean());
  EXPECT_TRUE(out->rebuilding());
}

TEST(Superblock, PopulatedDiffersFromDefaultInEveryField) {
  const Superblock d;
  const Superblock p = populated();
  EXPECT_NE(p.array_uuid, d.array_uuid);
  EXPECT_NE(p.member_uuid, d.member_uuid);
  EXPECT_NE(p.label, d.label);
  EXPECT_NE(p.created, d.created);
  EXPECT_NE(p.updated, d.updated);
  EXPECT_NE(p.level, d.level);
  EXPECT_NE(p.layout, d.layout);
  EXPECT_NE(p.member_count, d.member_count);
  EXPECT_NE(p.role, d.role);
  EXPECT_NE(p.chunk_size, d.chunk_size);
  EXPECT_NE(p.data_offset, d.data_offset);
  EXPECT_NE(p.data_size, d.data_size);
  EXPECT_NE(p.events, d.events);
  EXPECT_NE(p.flags, d.flags);
  EXPECT_NE(p.rebuild_checkpoint, d.rebuild_checkpoint);
  EXPECT_NE(p.bitmap_offset, d.bitmap_offset);
  EXPECT_NE(p.bitmap_size, d.bitmap_size);
  EXPECT_NE(p.bitmap_chunk, d.bitmap_chunk);
  EXPECT_NE(p.journal_offset, d.journal_offset);
  EXPECT_NE(p.journal_size, d.journal_size);
  EXPECT_NE(p.journal_device_uuid, d.journal_device_uuid);
  EXPECT_NE(p.member_states, d.member_states);
  EXPECT_NE(p.scrub_checkpoint, d.scrub_checkpoint);
  EXPECT_NE(p.scrub_flags, d.scrub_flags);
  EXPECT_NE(p.last_scrub, d.last_scrub);
  EXPECT_NE(p.last_scrub_mismatched, d.last_scrub_mismatched);
  EXPECT_NE(p.last_scrub_repaired, d.last_scrub_repaired);
  EXPECT_NE(p.last_scrub_unrepairable, d.last_scrub_unrepairable);
  EXPECT_NE(p.scrub_mismatched, d.scrub_mismatched);
  EXPECT_NE(p.scrub_repaired, d.scrub_repaired);
  EXPECT_NE(p.scrub_unrepairable, d.scrub_unrepairable);
  EXPECT_NE(p.replaces, d.replaces);
}

// Minor 0 wrote zeros where minor 1 keeps the scrub's fields: no scrub to resume, none
// recorded.
TEST(Superblock, AMinorZeroSuperblockHasNoScrubToResume) {
  Superblock sb = populated();
  sb.scrub_checkpoint = kNoScrub;
  sb.scrub_flags = 0;
  sb.last_scrub = sb.last_scrub_mismatched = sb.last_scrub_repaired = 0;
  sb.last_scrub_unrepairable = 0;
  sb.scrub_mismatched = sb.scrub_repaired = sb.scrub_unrepairable = 0;
  Block block = encoded(sb);
  for (size_t at = sl::kScrubCheckpoint; at < sl::kReplaces; ++at) {
    ASSERT_EQ(block[at], std::byte{0}) << "byte " << at;
  }
  put<uint16_t>(block, sl::kVersionMinor, 0);
  reseal(block);
  auto out = decode_superblock(block, kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->scrub_checkpoint, kNoScrub);
  EXPECT_EQ(out->last_scrub, 0u);
}

// Pins the on-disk format: fields at their documented offsets, little-endian, reserved
// bytes zero, and a checksum any CRC-32C implementation reproduces.
TEST(Superblock, EncodesDocumentedLayout) {
  const Superblock sb = populated();
  const Block block = encoded(sb);
  EXPECT_EQ(block[0], std::byte{0x46});
  EXPECT_EQ(block[1], std::byte{0x50});
  EXPECT_EQ(block[2], std::byte{0x54});
  EXPECT_EQ(block[3], std::byte{0x53});
  EXPECT_EQ(get<uint16_t>(block, sl::kVersionMajor), 1);
  EXPECT_EQ(get<uint16_t>(block, sl::kVersionMinor), 2);
  EXPECT_EQ(block[sl::kArrayUuid], std::byte{0x10});
  EXPECT_EQ(block[sl::kMemberUuid + 15], std::byte{0xaf});
  EXPECT_EQ(std::memcmp(block.data() + sl::kLabel, sb.label.data(), sb.label.size()), 0);
  EXPECT_EQ(block[sl::kLabel + sb.label.size()], std::byte{0});
  EXPECT_EQ(get<uint8_t>(block, sl::kLevel), 6);
  EXPECT_EQ(get<uint8_t>(block, sl::kLayout), 1);
  EXPECT_EQ(get<uint16_t>(block, sl::kMemberCount), 6);
  EXPECT_EQ(get<uint16_t>(block, sl::kRole), 4);
  EXPECT_EQ(get<uint32_t>(block, sl::kChunkSize), 128u * 1024);
  // events = 0x0102030405060708: least significant byte first.
  EXPECT_EQ(block[sl::kEvents], std::byte{0x08});
  EXPECT_EQ(block[sl::kEvents + 7], std::byte{0x01});
  EXPECT_EQ(get<uint64_t>(block, sl::kRebuildCheckpoint), 123u * 4096);
  EXPECT_EQ(block[sl::kMemberStates + 2], std::byte{2});
  EXPECT_EQ(block[sl::kMemberStates + 4], std::byte{3});
  EXPECT_EQ(get<uint64_t>(block, sl::kScrubCheckpoint), 78u) << "1 + the checkpoint";
  EXPECT_EQ(get<uint32_t>(block, sl::kScrubFlags), 1u);
  EXPECT_EQ(get<uint64_t>(block, sl::kLastScrub), 1'700'000'900u);
  EXPECT_EQ(get<uint64_t>(block, sl::kLastScrubUnrepairable), 1u);
  EXPECT_EQ(get<uint64_t>(block, sl::kScrubUnrepairable), 7u);
  EXPECT_EQ(block[sl::kReplaces], std::byte{0x51});
  EXPECT_EQ(block[sl::kReplaces + 15], std::byte{0x5f});
  for (size_t at : {size_t{94}, size_t{95}, size_t{100}, size_t{103}, size_t{132}, size_t{135}}) {
    EXPECT_EQ(block[at], std::byte{0}) << "padding byte " << at;
  }
  for (size_t at = sl::kReserved; at < sl::kChecksum; ++at) {
    ASSERT_EQ(block[at], std::byte{0}) << "reserved byte " << at;
  }
  EXPECT_EQ(get<uint32_t>(block, sl::kChecksum), crc32c(block));
}

TEST(Superblock, ChecksumIsStandardCrc32c) {
  // The documented recipe gives CRC-32C's published check value.
  unsigned char text[] = "123456789";
  EXPECT_EQ(~crc32_iscsi(text, 9, 0xFFFFFFFFu), 0xe3069283u);
}

TEST(Superblock, LabelOfFullWidthRoundTripsAndLongerIsTruncated) {
  Superblock sb = populated();
  sb.label = std::string(kLabelSize, 'x');
  auto out = decode_superblock(encoded(sb), kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->label, sb.label);

  sb.label = std::string(kLabelSize + 5, 'y');
  out = decode_superblock(encoded(sb), kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->label, std::string(kLabelSize, 'y'));

  sb.label.clear();
  out = decode_superblock(encoded(sb), kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->label, "");
}

TEST(Superblock, CleanFlag) {
  Superblock sb;
  EXPECT_FALSE(sb.clean());
  sb.flags = 0x10;
  sb.set_clean(true);
  EXPECT_TRUE(sb.clean());
  EXPECT_EQ(sb.flags, 0x11u);
  sb.set_clean(false);
  EXPECT_FALSE(sb.clean());
  EXPECT_EQ(sb.flags, 0x10u);
}

// A replacement names the role and the member it copies; one that names neither is damaged.
TEST(Superblock, AReplacementMustNameItsRoleAndMember) {
  Superblock sb = populated();
  sb.set_replacement(true);
  Block block = encoded(sb);
  EXPECT_EQ(get<uint16_t>(block, sl::kVersionMajor), 2) << "readers of major 1 must refuse it";
  auto out = decode_superblock(block, kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE(out->replacement());
  put<uint16_t>(block, sl::kVersionMajor, 1);  // a replacement flag under major 1
  reseal(block);
  EXPECT_NE(decode_error(block).message.find("with the replacement flag"), std::string::npos);
  EXPECT_EQ(out->replaces, sb.replaces);
  sb.replaces = Uuid{};
  EXPECT_NE(decode_error(encoded(sb)).message.find("replacement"), std::string::npos);
  sb = populated();
  sb.set_replacement(true);
  sb.role = kSpareRole;
  EXPECT_EQ(decode_error(encoded(sb)).code, EINVAL);
  sb.set_replacement(false);
  EXPECT_FALSE(sb.replacement());
}

TEST(Superblock, AcceptsHigherMinorVersion) {
  Block block = encoded(populated());
  put<uint16_t>(block, sl::kVersionMinor, 7);
  block[sl::kReserved + 10] = std::byte{0x5a};  // a field this version does not know
  reseal(block);
  auto out = decode_superblock(block, kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, populated());
}

TEST(Superblock, AcceptsMinimalSuperblock) {
  Superblock sb;
  sb.member_count = 1;
  sb.chunk_size = 4096;
  sb.data_offset = 8192;
  sb.data_size = 4096;
  auto out = decode_superblock(encoded(sb), kWhere);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, sb);
  EXPECT_FALSE(out->rebuilding());
}

class SuperblockDamage : public testing::TestWithParam<Damage> {};

TEST(Superblock, JournalOnASeparateDeviceIsNotCheckedAgainstTheMember) {
  Superblock sb = populated();
  sb.journal_offset = 0;
  sb.journal_size = 1 << 30;  // would overlap everything if it were on the member
  ASSERT_FALSE(is_zero(sb.journal_device_uuid));
  auto out = decode_superblock(encoded(sb), kWhere);
  EXPECT_TRUE(out) << out.error().message;
}

TEST_P(SuperblockDamage, IsRejectedNamingMemberFieldAndValue) {
  const Damage& d = GetParam();
  Superblock base = populated();
  // The journal area is checked only when the journal lives on this member (no separate
  // journal device named).
  if (d.name.starts_with("journal")) base.journal_device_uuid = {};
  Block block = encoded(base);
  ASSERT_TRUE(test::put_width(block, d.offset, d.width, d.value)) << "bad width " << d.width;
  reseal(block);
  const Error error = decode_error(block);
  EXPECT_EQ(error.code, d.code) << error.message;
  EXPECT_NE(error.message.find(kWhere), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(d.reason), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(d.shown), std::string::npos) << error.message;
  EXPECT_EQ(error.message.find('\n'), std::string::npos) << error.message;
}

// populated(): 6 members, data at 1 MiB, bitmap [8192, +64 KiB), journal [73728, +512 KiB).
const Damage kDamages[] = {
    {"magic", sl::kMagic, 4, 0x12345678, ENODATA, "no stripefs superblock", "magic 0x12345678"},
    {"zero_magic", sl::kMagic, 4, 0, ENODATA, "no stripefs superblock", "magic 0x00000000"},
    {"major_0", sl::kVersionMajor, 2, 0, EINVAL, "not supported", "version 0.2"},
    {"major_2", sl::kVersionMajor, 2, 2, EINVAL, "not supported", "version 2.2"},
    {"level_2", sl::kLevel, 1, 2, EINVAL, "not a RAID level", "level 2"},
    {"level_4", sl::kLevel, 1, 4, EINVAL, "not a RAID level", "level 4"},
    {"level_11", sl::kLevel, 1, 11, EINVAL, "not a RAID level", "level 11"},
    {"level_255", sl::kLevel, 1, 255, EINVAL, "not a RAID level", "level 255"},
    {"layout_4", sl::kLayout, 1, 4, EINVAL, "not a parity layout", "layout 4"},
    {"layout_255", sl::kLayout, 1, 255, EINVAL, "not a parity layout", "layout 255"},
    {"member_count_0", sl::kMemberCount, 2, 0, EINVAL, "out of range", "member_count 0"},
    {"member_count_65", sl::kMemberCount, 2, 65, EINVAL, "out of range", "member_count 65"},
    {"role_at_count", sl::kRole, 2, 6, EINVAL, "member_count 6", "role 6"},
    {"role_huge", sl::kRole, 2, 0xfffe, EINVAL, "member_count 6", "role 65534"},  // 0xffff: a spare
    {"chunk_size_0", sl::kChunkSize, 4, 0, EINVAL, "power of two", "chunk_size 0"},
    {"chunk_size_small", sl::kChunkSize, 4, 2048, EINVAL, "power of two", "chunk_size 2048"},
    {"chunk_size_not_pow2", sl::kChunkSize, 4, 69632, EINVAL, "power of two", "chunk_size 69632"},
    {"data_offset_0", sl::kDataOffset, 8, 0, EINVAL, "multiple of 4096", "data_offset 0"},
    {"data_offset_in_superblock", sl::kDataOffset, 8, 4096, EINVAL, "after 8192",
     "data_offset 4096"},
    {"data_offset_unaligned", sl::kDataOffset, 8, (1 << 20) + 512, EINVAL, "multiple of 4096",
     "data_offset 1049088"},
    {"data_size_0", sl::kDataSize, 8, 0, EINVAL, "zero", "data_size 0"},
    {"data_size_wraps", sl::kDataSize, 8, UINT64_MAX, EINVAL, "2^64",
     "data_size 18446744073709551615"},
    {"member_state_4", sl::kMemberStates + 5, 1, 4, EINVAL, "not a member state",
     "member_states[5] = 4"},
    {"member_state_last", sl::kMemberStates + 63, 1, 200, EINVAL, "not a member state",
     "member_states[63] = 200"},
    {"bitmap_in_superblock", sl::kBitmapOffset, 8, 4096, EINVAL, "overlaps the superblock",
     "bitmap_offset 4096"},
    {"bitmap_straddles_superblock", sl::kBitmapOffset, 8, 0, EINVAL, "overlaps the superblock",
     "bitmap_offset 0"},
    {"bitmap_into_data", sl::kBitmapOffset, 8, (1 << 20) - 4096, EINVAL, "overlaps the data area",
     "bitmap_offset 1044480"},
    {"bitmap_size_wraps", sl::kBitmapSize, 8, UINT64_MAX - 4096, EINVAL, "overlaps the data area",
     "bitmap_size 18446744073709547519"},
    {"bitmap_chunk_0", sl::kBitmapChunk, 8, 0, EINVAL, "bitmap", "bitmap_chunk is 0"},
    {"journal_in_superblock", sl::kJournalOffset, 8, 6144, EINVAL, "overlaps the superblock",
     "journal_offset 6144"},
    {"journal_into_data", sl::kJournalSize, 8, 1 << 20, EINVAL, "overlaps the data area",
     "journal_size 1048576"},
    {"journal_size_wraps", sl::kJournalSize, 8, UINT64_MAX, EINVAL, "overlaps the data area",
     "journal_size 18446744073709551615"},
    {"journal_over_bitmap", sl::kJournalOffset, 8, 8192 + 4096, EINVAL, "overlaps the bitmap area",
     "journal area [12288, "},
};

INSTANTIATE_TEST_SUITE_P(EachField, SuperblockDamage, testing::ValuesIn(kDamages),
                         [](const testing::TestParamInfo<Damage>& info) {
                           return info.param.name;
                         });

TEST(Superblock, ChecksumMismatchNamesBothValues) {
  Block block = encoded(populated());
  const uint32_t good = get<uint32_t>(block, sl::kChecksum);
  block[sl::kEvents] ^= std::byte{0x01};
  const Error error = decode_error(block);
  EXPECT_EQ(error.code, EUCLEAN);
  EXPECT_NE(error.message.find(kWhere), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("checksum mismatch"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(fmt::format("stored 0x{:08x}", good)), std::string::npos)
      << error.message;
  EXPECT_NE(error.message.find(fmt::format("computed 0x{:08x}", crc32c(block))), std::string::npos)
      << error.message;
}

// Damage the checksum cannot miss. A flip inside the magic is reported as "not ours",
// since the magic is checked first.
TEST(Superblock, AnySingleBitFlipIsRejected) {
  const Block good = encoded(populated());
  std::vector<size_t> bits;
  for (size_t bit = 0; bit < sl::kChecksum * 8; bit += 37) bits.push_back(bit);
  for (size_t bit = sl::kChecksum * 8; bit < kSuperblockSize * 8; ++bit) bits.push_back(bit);
  for (size_t bit : bits) {
    Block block = good;
    block[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    auto sb = decode_superblock(block, kWhere);
    ASSERT_FALSE(sb.has_value()) << "flip of bit " << bit << " went unnoticed";
    const int expected = bit / 8 < sl::kMagic + 4 ? ENODATA : EUCLEAN;
    EXPECT_EQ(sb.error().code, expected) << "bit " << bit << ": " << sb.error().message;
  }
}

TEST(SuperblockIo, WritesAndReadsBack) {
  MemoryMember member("mem0", 4 << 20);
  Superblock sb = populated();
  sb.data_size = (4 << 20) - sb.data_offset;
  ASSERT_TRUE(write_superblock(member, sb));
  auto back = read_superblock(member);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, sb);
  // It sits at byte 4096 and nowhere else.
  const auto contents = member.contents();
  EXPECT_EQ(contents[kSuperblockOffset], std::byte{0x46});
  for (size_t at = 0; at < kSuperblockOffset; ++at) {
    ASSERT_EQ(contents[at], std::byte{0}) << at;
  }
  for (size_t at = kSuperblockOffset + kSuperblockSize; at < contents.size(); at += 512) {
    ASSERT_EQ(contents[at], std::byte{0}) << at;
  }
}

TEST(SuperblockIo, ZeroedMemberIsNotOurs) {
  MemoryMember member("mem0", 1 << 20);
  auto sb = read_superblock(member);
  ASSERT_FALSE(sb);
  EXPECT_EQ(sb.error().code, ENODATA);
  EXPECT_NE(sb.error().message.find("mem0"), std::string::npos) << sb.error().message;
}

TEST(SuperblockIo, DamagedOnMemberIsUnclean) {
  MemoryMember member("mem0", 4 << 20);
  Superblock sb = populated();
  sb.data_size = 1 << 20;
  ASSERT_TRUE(write_superblock(member, sb));
  member.contents()[kSuperblockOffset + sl::kCreated] ^= std::byte{0x80};
  auto back = read_superblock(member);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, EUCLEAN);
}

// A single aligned 4 KiB write with FUA: O_DIRECT members accept it, and it survives a
// power cut without a flush.
TEST(SuperblockIo, WriteIsOneAlignedFuaRequestThatSurvivesPowerCut) {
  MemoryMember media("mem0", 4 << 20);
  FaultyMember member(media);
  member.set_logging(true);
  member.set_volatile_cache(true);
  Superblock sb = populated();
  sb.data_size = 1 << 20;
  ASSERT_TRUE(write_superblock(member, sb));
  const auto log = member.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].op, MemberOp::write);
  EXPECT_EQ(log[0].offset, kSuperblockOffset);
  EXPECT_EQ(log[0].length, kSuperblockSize);
  EXPECT_TRUE(log[0].fua);
  ASSERT_EQ(log[0].iov.size(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(log[0].iov[0].iov_base) % 4096, 0u);

  member.power_cut();
  auto back = read_superblock(member);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, sb);
  const auto reads = member.take_log();
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(reads[0].iov[0].iov_base) % 4096, 0u);
}

TEST(SuperblockIo, WriteRefusesWhatReadWouldReject) {
  MemoryMember member("mem0", 4 << 20);
  Superblock sb = populated();
  sb.data_size = 1 << 20;

  Superblock bad = sb;
  bad.role = bad.member_count;
  auto result = write_superblock(member, bad);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, EINVAL);
  EXPECT_NE(result.error().message.find("role"), std::string::npos) << result.error().message;

  bad = sb;
  bad.level = static_cast<RaidLevel>(3);
  EXPECT_FALSE(write_superblock(member, bad));

  bad = sb;
  bad.label = std::string(kLabelSize + 1, 'z');
  result = write_superblock(member, bad);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("label"), std::string::npos) << result.error().message;

  bad = sb;
  bad.data_size = 4 << 20;  // data_offset is 1 MiB: runs past the 4 MiB member
  result = write_superblock(member, bad);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("past the end"), std::string::npos)
      << result.error().message;

  for (std::byte b : member.contents()) ASSERT_EQ(b, std::byte{0}) << "a refused write landed";
}

TEST(SuperblockIo, ReadRejectsDataAreaPastMemberEnd) {
  MemoryMember member("mem0", 4 << 20);
  Superblock sb = populated();
  sb.data_size = 4 << 20;
  Block block = encoded(sb);  // bypasses write_superblock's check
  std::memcpy(member.contents().data() + kSuperblockOffset, block.data(), block.size());
  auto back = read_superblock(member);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, EINVAL);
  EXPECT_NE(back.error().message.find("mem0"), std::string::npos) << back.error().message;
  EXPECT_NE(back.error().message.find("past the end"), std::string::npos) << back.error().message;
}

TEST(SuperblockIo, MemberTooSmallForSuperblock) {
  MemoryMember member("tiny", 6000);
  auto back = read_superblock(member);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, EINVAL);
  EXPECT_NE(back.error().message.find("tiny"), std::string::npos) << back.error().message;
  EXPECT_FALSE(write_superblock(member, populated()));
}

TEST(SuperblockIo, ReadErrorIsPassedOn) {
  MemoryMember media("mem0", 1 << 20);
  FaultyMember member(media);
  member.fail_range(MemberOp::read, {kSuperblockOffset, kSuperblockOffset + 1});
  auto back = read_superblock(member);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, EIO);
  EXPECT_NE(back.error().message.find("superblock"), std::string::npos) << back.error().message;
}

TEST(Uuid, FormatsLowercase8_4_4_4_12) {
  const Uuid uuid = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                     0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65, 0x43, 0x21};
  EXPECT_EQ(format_uuid(uuid), "12345678-9abc-def0-0fed-cba987654321");
  EXPECT_EQ(format_uuid(Uuid{}), "00000000-0000-0000-0000-000000000000");
}

TEST(Uuid, ParsesWhatItFormats) {
  for (int i = 0; i < 100; ++i) {
    const Uuid uuid = generate_uuid();
    auto back = parse_uuid(format_uuid(uuid));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, uuid);
  }
  auto upper = parse_uuid("12345678-9ABC-DEF0-0FED-CBA987654321");
  ASSERT_TRUE(upper) << upper.error().message;
  EXPECT_EQ(format_uuid(*upper), "12345678-9abc-def0-0fed-cba987654321");
}

TEST(Uuid, RejectsBadText) {
  for (std::string_view text : {
           "",
           "12345678-9abc-def0-0fed-cba98765432",    // short
           "12345678-9abc-def0-0fed-cba9876543210",  // long
           "123456789abcdef00fedcba987654321",       // no dashes
           "12345678-9abc-def0-0fed_cba987654321",   // wrong separator
           "1234567-89abc-def0-0fed-cba987654321",   // dash misplaced
           "12345678-9abc-def0-0fed-cba98765432g",   // not hex
           "{2345678-9abc-def0-0fed-cba98765432}",   // braces
           " 2345678-9abc-def0-0fed-cba987654321",   // space
           "12345678-9abc-def0-0fed-cba98765432\n",  // trailing newline
           "+1234567-9abc-def0-0fed-cba987654321",   // sign
       }) {
    auto uuid = parse_uuid(text);
    ASSERT_FALSE(uuid) << "accepted '" << text << "'";
    EXPECT_EQ(uuid.error().code, EINVAL);
    EXPECT_NE(uuid.error().message.find(text), std::string::npos) << uuid.error().message;
  }
}

TEST(Uuid, GeneratedAreVersion4AndDistinct) {
  const Uuid a = generate_uuid();
  const Uuid b = generate_uuid();
  EXPECT_NE(a, b);
  for (const Uuid& u : {a, b}) {
    EXPECT_FALSE(is_zero(u));
    EXPECT_EQ(u[6] >> 4, 4) << format_uuid(u);
    EXPECT_EQ(u[8] >> 6, 2) << format_uuid(u);
    EXPECT_EQ(format_uuid(u)[14], '4');
  }
}

TEST(Uuid, IsZero) {
  EXPECT_TRUE(is_zero(Uuid{}));
  Uuid u{};
  u[15] = 1;
  EXPECT_FALSE(is_zero(u));
}

}  // namespace
}  // namespace stripefs
