#include "journal/log_format.hpp"

#include <gtest/gtest.h>

#include <isa-l/crc.h>
#include "unit/block_test_util.hpp"

#include <array>
#include <string>
#include <vector>

namespace stripefs {
namespace {

namespace jl = journal_layout;
static_assert(jl::kChecksum == test::kBlockChecksum);
namespace jsb = journal_layout::superblock;
namespace jd = journal_layout::descriptor;
namespace jc = journal_layout::commit;

using Block = test::Block4K;
using test::crc32c;
using test::Damage;
using test::get;
using test::put;
using test::put_width;
using test::reseal;

constexpr std::string_view kWhere = "/dev/test";
constexpr uint64_t kSequence = 0x0102'0304'0506'0708;

Uuid array_uuid() {
  Uuid uuid;
  for (uint8_t i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(0x10 + i);
  return uuid;
}

void flip_bit(Block& block, size_t bit) {
  block[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// ---- superblock ----------------------------------------------------------------------------

// Every field differs from its default, so a field the codec forgets cannot round-trip.
JournalSuperblock populated_superblock() {
  JournalSuperblock sb;
  sb.array_uuid = array_uuid();
  sb.blocks = 0x0001'0000'0000'0123;
  sb.tail = 0x0000'0001'0203'0405;
  sb.tail_sequence = kSequence;
  sb.flags = 0x8000'0001;  // bits of a future minor are preserved
  return sb;
}

Block encoded(const JournalSuperblock& sb) {
  Block block;
  encode_journal_superblock(sb, block);
  return block;
}

Error superblock_error(const Block& block, const Uuid& expected = array_uuid()) {
  auto sb = decode_journal_superblock(block, kWhere, expected);
  EXPECT_FALSE(sb.has_value()) << "decode accepted a damaged journal superblock";
  return sb ? Error{} : sb.error();
}

TEST(JournalSuperblock, RoundTripsEveryField) {
  const JournalSuperblock in = populated_superblock();
  auto out = decode_journal_superblock(encoded(in), kWhere, array_uuid());
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->array_uuid, in.array_uuid);
  EXPECT_EQ(out->blocks, in.blocks);
  EXPECT_EQ(out->tail, in.tail);
  EXPECT_EQ(out->tail_sequence, in.tail_sequence);
  EXPECT_EQ(out->flags, in.flags);
  EXPECT_EQ(*out, in);
}

TEST(JournalSuperblock, PopulatedDiffersFromDefaultInEveryField) {
  const JournalSuperblock d;
  const JournalSuperblock p = populated_superblock();
  EXPECT_NE(p.array_uuid, d.array_uuid);
  EXPECT_NE(p.blocks, d.blocks);
  EXPECT_NE(p.tail, d.tail);
  EXPECT_NE(p.tail_sequence, d.tail_sequence);
  EXPECT_NE(p.flags, d.flags);
  EXPECT_EQ(d.tail, 1u);
  EXPECT_EQ(d.tail_sequence, 1u);
}

// Pins the on-disk format: fields at their documented offsets, little-endian, reserved bytes
// zero, and a checksum any CRC-32C implementation reproduces.
TEST(JournalSuperblock, EncodesDocumentedLayout) {
  const Block block = encoded(populated_superblock());
  EXPECT_EQ(block[0], std::byte{'S'});
  EXPECT_EQ(block[1], std::byte{'T'});
  EXPECT_EQ(block[2], std::byte{'J'});
  EXPECT_EQ(block[3], std::byte{'S'});
  EXPECT_EQ(get<uint16_t>(block, 4), 2);
  EXPECT_EQ(get<uint16_t>(block, 6), 0);
  EXPECT_EQ(block[8], std::byte{0x10});
  EXPECT_EQ(block[23], std::byte{0x1f});
  EXPECT_EQ(get<uint64_t>(block, 24), 0x0001'0000'0000'0123u);
  EXPECT_EQ(get<uint64_t>(block, 32), 0x0000'0001'0203'0405u);
  // tail_sequence = 0x0102030405060708: least significant byte first.
  EXPECT_EQ(block[40], std::byte{0x08});
  EXPECT_EQ(block[47], std::byte{0x01});
  EXPECT_EQ(get<uint32_t>(block, 48), 0x8000'0001u);
  for (size_t at = 52; at < 4092; ++at) ASSERT_EQ(block[at], std::byte{0}) << "reserved " << at;
  EXPECT_EQ(get<uint32_t>(block, 4092), crc32c(block));
}

TEST(JournalSuperblock, ChecksumIsStandardCrc32c) {
  unsigned char text[] = "123456789";
  EXPECT_EQ(~crc32_iscsi(text, 9, 0xFFFFFFFFu), 0xe3069283u);
}

TEST(JournalSuperblock, AcceptsSmallestAreaAndItsLastTail) {
  JournalSuperblock sb;
  sb.blocks = kJournalMinBlocks;
  sb.tail = kJournalMinBlocks - 1;
  auto out = decode_journal_superblock(encoded(sb), kWhere, Uuid{});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, sb);
  EXPECT_EQ(kJournalMinBlocks, 8u);
}

TEST(JournalSuperblock, AcceptsHigherMinorVersion) {
  Block block = encoded(populated_superblock());
  put<uint16_t>(block, jsb::kVersionMinor, 3);
  block[jsb::kReserved + 10] = std::byte{0x5a};  // a field this version does not know
  reseal(block);
  auto out = decode_journal_superblock(block, kWhere, array_uuid());
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, populated_superblock());
}

// Journals written before padding existed (major 1) are read: their commits' padding
// field was reserved and zero.
TEST(JournalSuperblock, AcceptsMajorOneBeforePadding) {
  Block block = encoded(populated_superblock());
  put<uint16_t>(block, jsb::kVersionMajor, 1);
  reseal(block);
  auto out = decode_journal_superblock(block, kWhere, array_uuid());
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, populated_superblock());
}

auto damage_name = [](const testing::TestParamInfo<Damage>& info) { return info.param.name; };

class JournalSuperblockDamage : public testing::TestWithParam<Damage> {};

TEST_P(JournalSuperblockDamage, IsRejectedNamingMemberFieldAndValue) {
  const Damage& d = GetParam();
  JournalSuperblock sb = populated_superblock();
  sb.blocks = 1000;
  sb.tail = 10;
  Block block = encoded(sb);
  put_width(block, d.offset, d.width, d.value);
  reseal(block);
  const Error error = superblock_error(block);
  EXPECT_EQ(error.code, d.code) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("member {}: journal ", kWhere))) << error.message;
  EXPECT_TRUE(contains(error.message, d.reason)) << error.message;
  EXPECT_TRUE(contains(error.message, d.shown)) << error.message;
  EXPECT_FALSE(contains(error.message, "\n")) << error.message;
}

// The damaged superblock has blocks 1000 and tail 10.
const Damage kSuperblockDamages[] = {
    {"magic", jsb::kMagic, 4, 0x12345678, ENODATA, "no stripefs journal", "magic 0x12345678"},
    {"zero_magic", jsb::kMagic, 4, 0, ENODATA, "no stripefs journal", "magic 0x00000000"},
    {"descriptor_magic", jsb::kMagic, 4, kJournalDescriptorMagic, ENODATA, "no stripefs journal",
     "magic 0x444a5453"},
    {"member_superblock_magic", jsb::kMagic, 4, kSuperblockMagic, ENODATA, "no stripefs journal",
     "magic 0x53545046"},
    {"major_0", jsb::kVersionMajor, 2, 0, EINVAL, "not supported", "version 0.0"},
    {"major_3", jsb::kVersionMajor, 2, 3, EINVAL, "not supported", "version 3.0"},
    {"blocks_0", jsb::kBlocks, 8, 0, EINVAL, "less than 8", "blocks 0"},
    {"blocks_7", jsb::kBlocks, 8, 7, EINVAL, "less than 8", "blocks 7"},
    {"blocks_below_tail", jsb::kBlocks, 8, 10, EINVAL, "not in [1, 10)", "tail 10"},
    {"tail_0", jsb::kTail, 8, 0, EINVAL, "not in [1, 1000)", "tail 0"},
    {"tail_blocks", jsb::kTail, 8, 1000, EINVAL, "not in [1, 1000)", "tail 1000"},
    {"tail_huge", jsb::kTail, 8, UINT64_MAX, EINVAL, "not in [1, 1000)",
     "tail 18446744073709551615"},
    {"tail_sequence_0", jsb::kTailSequence, 8, 0, EINVAL, "zero", "tail_sequence 0"},
    {"array_uuid", jsb::kArrayUuid + 15, 1, 0xee, EINVAL, "does not match",
     "array_uuid 10111213-1415-1617-1819-1a1b1c1d1eee"},
};

INSTANTIATE_TEST_SUITE_P(EachField, JournalSuperblockDamage, testing::ValuesIn(kSuperblockDamages),
                         damage_name);

// The superblock is intact but belongs to another array (e.g. a member reused without wiping).
TEST(JournalSuperblock, ForeignArrayIsRejectedNamingBothUuids) {
  Uuid other = array_uuid();
  other[0] = 0xaa;
  const Error error = superblock_error(encoded(populated_superblock()), other);
  EXPECT_EQ(error.code, EINVAL);
  EXPECT_TRUE(contains(error.message, fmt::format("member {}: journal array_uuid {}", kWhere,
                                                  format_uuid(array_uuid()))))
      << error.message;
  EXPECT_TRUE(contains(error.message, format_uuid(other))) << error.message;
}

// Fields are checked before the owner, so a superblock both wrong and foreign reports the field.
TEST(JournalSuperblock, FieldsAreCheckedBeforeArrayUuid) {
  Block block = encoded(populated_superblock());
  put<uint64_t>(block, jsb::kTailSequence, 0);
  reseal(block);
  EXPECT_TRUE(contains(superblock_error(block, Uuid{}).message, "tail_sequence"));
}

TEST(JournalSuperblock, ChecksumMismatchNamesBothValues) {
  Block block = encoded(populated_superblock());
  const uint32_t good = get<uint32_t>(block, jl::kChecksum);
  block[jsb::kTail] ^= std::byte{0x01};
  const Error error = superblock_error(block);
  EXPECT_EQ(error.code, EUCLEAN);
  EXPECT_TRUE(contains(error.message, fmt::format("member {}: journal checksum mismatch", kWhere)))
      << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("stored 0x{:08x}", good))) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("computed 0x{:08x}", crc32c(block))))
      << error.message;
}

// A damaged checksum is reported as such even when a field is bad too.
TEST(JournalSuperblock, ChecksumIsCheckedBeforeVersionAndFields) {
  Block block = encoded(populated_superblock());
  put<uint16_t>(block, jsb::kVersionMajor, 9);
  put<uint64_t>(block, jsb::kBlocks, 0);
  EXPECT_EQ(superblock_error(block).code, EUCLEAN);
}

// Damage the checksum cannot miss. A flip inside the magic is reported as "not ours", since
// the magic is checked first.
TEST(JournalSuperblock, EverySingleBitFlipIsRejected) {
  const Block good = encoded(populated_superblock());
  for (size_t bit = 0; bit < kJournalBlockSize * 8; ++bit) {
    Block block = good;
    flip_bit(block, bit);
    auto sb = decode_journal_superblock(block, kWhere, array_uuid());
    ASSERT_FALSE(sb.has_value()) << "flip of bit " << bit << " went unnoticed";
    const int expected = bit / 8 < jsb::kMagic + 4 ? ENODATA : EUCLEAN;
    ASSERT_EQ(sb.error().code, expected) << "bit " << bit << ": " << sb.error().message;
  }
}

// ---- descriptor ----------------------------------------------------------------------------

TEST(JournalDescriptor, MaxEntriesFillTheBlockUpToTheChecksum) {
  EXPECT_EQ(kMaxDescriptorEntries, 254u);
  EXPECT_LE(jd::kEntries + kMaxDescriptorEntries * jd::kEntrySize, jl::kChecksum);
  EXPECT_GT(jd::kEntries + (kMaxDescriptorEntries + 1) * jd::kEntrySize, jl::kChecksum);
}

// Entries whose fields all differ from each other and from the defaults.
JournalDescriptor populated_descriptor(size_t entries) {
  JournalDescriptor d;
  d.sequence = kSequence;
  for (size_t i = 0; i < entries; ++i) {
    d.entries.push_back({.target = 0x1000'0000'0000'0000 + i * 0x1'0001,
                         .data_checksum = static_cast<uint32_t>(0xc0de'0000 + i),
                         .flags = static_cast<uint32_t>(0x100 + i)});
  }
  return d;
}

Block encoded(const JournalDescriptor& d) {
  Block block;
  encode_journal_descriptor(d, block);
  return block;
}

Error descriptor_error(const Block& block, uint64_t expected_sequence = kSequence) {
  auto d = decode_journal_descriptor(block, expected_sequence);
  EXPECT_FALSE(d.has_value()) << "decode accepted a damaged journal descriptor";
  return d ? Error{} : d.error();
}

TEST(JournalDescriptor, RoundTripsOneEntry) {
  const JournalDescriptor in = populated_descriptor(1);
  auto out = decode_journal_descriptor(encoded(in), kSequence);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->sequence, in.sequence);
  ASSERT_EQ(out->entries.size(), 1u);
  EXPECT_EQ(out->entries[0].target, in.entries[0].target);
  EXPECT_EQ(out->entries[0].data_checksum, in.entries[0].data_checksum);
  EXPECT_EQ(out->entries[0].flags, in.entries[0].flags);
  EXPECT_EQ(*out, in);
}

TEST(JournalDescriptor, RoundTripsMaxEntries) {
  const JournalDescriptor in = populated_descriptor(kMaxDescriptorEntries);
  auto out = decode_journal_descriptor(encoded(in), kSequence);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->entries.size(), kMaxDescriptorEntries);
  EXPECT_EQ(*out, in);
}

TEST(JournalDescriptor, ExpectedSequenceZeroAcceptsAny) {
  const JournalDescriptor in = populated_descriptor(3);
  auto out = decode_journal_descriptor(encoded(in), 0);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, in);
}

TEST(JournalDescriptor, EncodesDocumentedLayout) {
  const Block block = encoded(populated_descriptor(2));
  EXPECT_EQ(block[0], std::byte{'S'});
  EXPECT_EQ(block[1], std::byte{'T'});
  EXPECT_EQ(block[2], std::byte{'J'});
  EXPECT_EQ(block[3], std::byte{'D'});
  EXPECT_EQ(block[4], std::byte{0x08});
  EXPECT_EQ(block[11], std::byte{0x01});
  EXPECT_EQ(get<uint64_t>(block, 4), kSequence);
  EXPECT_EQ(get<uint32_t>(block, 12), 2u);
  EXPECT_EQ(get<uint64_t>(block, 16), 0x1000'0000'0000'0000u);
  EXPECT_EQ(get<uint32_t>(block, 24), 0xc0de'0000u);
  EXPECT_EQ(get<uint32_t>(block, 28), 0x100u);
  EXPECT_EQ(get<uint64_t>(block, 32), 0x1000'0000'0001'0001u);
  EXPECT_EQ(get<uint32_t>(block, 40), 0xc0de'0001u);
  EXPECT_EQ(get<uint32_t>(block, 44), 0x101u);
  for (size_t at = 48; at < 4092; ++at) ASSERT_EQ(block[at], std::byte{0}) << "padding " << at;
  EXPECT_EQ(get<uint32_t>(block, 4092), crc32c(block));
}

TEST(JournalDescriptor, MaxEntriesEndAt4080) {
  const Block block = encoded(populated_descriptor(kMaxDescriptorEntries));
  EXPECT_EQ(get<uint64_t>(block, 4064), 0x1000'0000'0000'0000u + 253 * 0x1'0001);
  EXPECT_EQ(get<uint32_t>(block, 4076), 0x100u + 253);
  for (size_t at = 4080; at < 4092; ++at) ASSERT_EQ(block[at], std::byte{0}) << "padding " << at;
}

// Encoding too many entries is a caller's bug: it stays inside the block and decode refuses it.
TEST(JournalDescriptor, TooManyEntriesAreEncodedInBoundsAndRefused) {
  const JournalDescriptor in = populated_descriptor(kMaxDescriptorEntries + 1);
  const Block block = encoded(in);
  EXPECT_EQ(get<uint32_t>(block, jd::kCount), kMaxDescriptorEntries + 1);
  const Error error = descriptor_error(block);
  EXPECT_EQ(error.code, EINVAL);
  EXPECT_TRUE(contains(error.message, "count 255")) << error.message;
}

TEST(JournalDescriptor, NoEntriesAreRefused) {
  JournalDescriptor in;
  in.sequence = kSequence;
  const Error error = descriptor_error(encoded(in));
  EXPECT_EQ(error.code, EINVAL);
  EXPECT_TRUE(contains(error.message, "journal descriptor: count 0")) << error.message;
}

class JournalDescriptorDamage : public testing::TestWithParam<Damage> {};

TEST_P(JournalDescriptorDamage, IsRejectedNamingFieldAndValue) {
  const Damage& d = GetParam();
  Block block = encoded(populated_descriptor(4));
  put_width(block, d.offset, d.width, d.value);
  reseal(block);
  const Error error = descriptor_error(block);
  EXPECT_EQ(error.code, d.code) << error.message;
  EXPECT_TRUE(contains(error.message, "journal descriptor: ")) << error.message;
  EXPECT_TRUE(contains(error.message, d.reason)) << error.message;
  EXPECT_TRUE(contains(error.message, d.shown)) << error.message;
  EXPECT_FALSE(contains(error.message, "\n")) << error.message;
}

const Damage kDescriptorDamages[] = {
    {"magic", jd::kMagic, 4, 0x12345678, ENODATA, "not a descriptor block", "magic 0x12345678"},
    {"zero_magic", jd::kMagic, 4, 0, ENODATA, "not a descriptor block", "magic 0x00000000"},
    {"commit_magic", jd::kMagic, 4, kJournalCommitMagic, ENODATA, "not a descriptor block",
     "magic 0x434a5453"},
    {"superblock_magic", jd::kMagic, 4, kJournalSuperblockMagic, ENODATA, "not a descriptor block",
     "magic 0x534a5453"},
    {"count_0", jd::kCount, 4, 0, EINVAL, "not in [1, 254]", "count 0"},
    {"count_255", jd::kCount, 4, 255, EINVAL, "not in [1, 254]", "count 255"},
    {"count_huge", jd::kCount, 4, UINT32_MAX, EINVAL, "not in [1, 254]", "count 4294967295"},
    {"sequence_next", jd::kSequence, 8, kSequence + 1, EINVAL, "sequence 72623859790382857",
     "expected 72623859790382856"},
    {"sequence_0", jd::kSequence, 8, 0, EINVAL, "sequence 0,", "expected 72623859790382856"},
};

INSTANTIATE_TEST_SUITE_P(EachField, JournalDescriptorDamage, testing::ValuesIn(kDescriptorDamages),
                         damage_name);

TEST(JournalDescriptor, SequenceMismatchNamesBothNumbers) {
  const Error error = descriptor_error(encoded(populated_descriptor(1)), 41);
  EXPECT_EQ(error.code, EINVAL);
  EXPECT_EQ(error.message, fmt::format("journal descriptor: sequence {}, expected 41", kSequence));
}

TEST(JournalDescriptor, ChecksumMismatchNamesBothValues) {
  Block block = encoded(populated_descriptor(2));
  const uint32_t good = get<uint32_t>(block, jl::kChecksum);
  block[jd::kEntries + jd::kEntrySize + jd::kEntryTarget] ^= std::byte{0x40};
  const Error error = descriptor_error(block);
  EXPECT_EQ(error.code, EUCLEAN);
  EXPECT_TRUE(contains(error.message, "journal descriptor: checksum mismatch")) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("stored 0x{:08x}", good))) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("computed 0x{:08x}", crc32c(block))))
      << error.message;
}

// A torn or stale block is reported as damaged, not as a wrong count or sequence.
TEST(JournalDescriptor, ChecksumIsCheckedBeforeCountAndSequence) {
  Block block = encoded(populated_descriptor(2));
  put<uint32_t>(block, jd::kCount, 0);
  put<uint64_t>(block, jd::kSequence, 5);
  EXPECT_EQ(descriptor_error(block).code, EUCLEAN);
}

TEST(JournalDescriptor, CountIsCheckedBeforeSequence) {
  Block block = encoded(populated_descriptor(2));
  put<uint32_t>(block, jd::kCount, 0);
  put<uint64_t>(block, jd::kSequence, 5);
  reseal(block);
  EXPECT_TRUE(contains(descriptor_error(block).message, "count 0"));
}

TEST(JournalDescriptor, EverySingleBitFlipIsRejected) {
  const Block good = encoded(populated_descriptor(kMaxDescriptorEntries));
  for (size_t bit = 0; bit < kJournalBlockSize * 8; ++bit) {
    Block block = good;
    flip_bit(block, bit);
    auto d = decode_journal_descriptor(block, 0);  // no sequence check: the checksum alone
    ASSERT_FALSE(d.has_value()) << "flip of bit " << bit << " went unnoticed";
    const int expected = bit / 8 < jd::kMagic + 4 ? ENODATA : EUCLEAN;
    ASSERT_EQ(d.error().code, expected) << "bit " << bit << ": " << d.error().message;
  }
}

// ---- commit --------------------------------------------------------------------------------

JournalCommit populated_commit() {
  return {.sequence = kSequence, .count = 17, .descriptor_checksum = 0xfeed'beef, .padding = 45};
}

Block encoded(const JournalCommit& c) {
  Block block;
  encode_journal_commit(c, block);
  return block;
}

Error commit_error(const Block& block, uint64_t expected_sequence = kSequence) {
  auto c = decode_journal_commit(block, expected_sequence);
  EXPECT_FALSE(c.has_value()) << "decode accepted a damaged journal commit";
  return c ? Error{} : c.error();
}

TEST(JournalCommit, RoundTripsEveryField) {
  const JournalCommit in = populated_commit();
  const JournalCommit d;
  EXPECT_NE(in.sequence, d.sequence);
  EXPECT_NE(in.count, d.count);
  EXPECT_NE(in.descriptor_checksum, d.descriptor_checksum);
  EXPECT_NE(in.padding, d.padding);
  auto out = decode_journal_commit(encoded(in), kSequence);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->sequence, in.sequence);
  EXPECT_EQ(out->count, in.count);
  EXPECT_EQ(out->descriptor_checksum, in.descriptor_checksum);
  EXPECT_EQ(out->padding, in.padding);
  EXPECT_EQ(*out, in);
  auto unchecked = decode_journal_commit(encoded(in), 0);
  ASSERT_TRUE(unchecked) << unchecked.error().message;
  EXPECT_EQ(*unchecked, in);
}

TEST(JournalCommit, EncodesDocumentedLayout) {
  const Block block = encoded(populated_commit());
  EXPECT_EQ(block[0], std::byte{'S'});
  EXPECT_EQ(block[1], std::byte{'T'});
  EXPECT_EQ(block[2], std::byte{'J'});
  EXPECT_EQ(block[3], std::byte{'C'});
  EXPECT_EQ(get<uint64_t>(block, 4), kSequence);
  EXPECT_EQ(get<uint32_t>(block, 12), 17u);
  EXPECT_EQ(get<uint32_t>(block, 16), 0xfeed'beefu);
  EXPECT_EQ(get<uint32_t>(block, 20), 45u);
  for (size_t at = 24; at < 4092; ++at) ASSERT_EQ(block[at], std::byte{0}) << "reserved " << at;
  EXPECT_EQ(get<uint32_t>(block, 4092), crc32c(block));
}

class JournalCommitDamage : public testing::TestWithParam<Damage> {};

TEST_P(JournalCommitDamage, IsRejectedNamingFieldAndValue) {
  const Damage& d = GetParam();
  Block block = encoded(populated_commit());
  put_width(block, d.offset, d.width, d.value);
  reseal(block);
  const Error error = commit_error(block);
  EXPECT_EQ(error.code, d.code) << error.message;
  EXPECT_TRUE(contains(error.message, "journal commit: ")) << error.message;
  EXPECT_TRUE(contains(error.message, d.reason)) << error.message;
  EXPECT_TRUE(contains(error.message, d.shown)) << error.message;
  EXPECT_FALSE(contains(error.message, "\n")) << error.message;
}

const Damage kCommitDamages[] = {
    {"magic", jc::kMagic, 4, 0x12345678, ENODATA, "not a commit block", "magic 0x12345678"},
    {"zero_magic", jc::kMagic, 4, 0, ENODATA, "not a commit block", "magic 0x00000000"},
    {"descriptor_magic", jc::kMagic, 4, kJournalDescriptorMagic, ENODATA, "not a commit block",
     "magic 0x444a5453"},
    {"count_0", jc::kCount, 4, 0, EINVAL, "not in [1, 4294967295]", "count 0"},
    {"sequence_prev", jc::kSequence, 8, kSequence - 1, EINVAL, "sequence 72623859790382855",
     "expected 72623859790382856"},
};

INSTANTIATE_TEST_SUITE_P(EachField, JournalCommitDamage, testing::ValuesIn(kCommitDamages),
                         damage_name);

TEST(JournalCommit, SequenceMismatchNamesBothNumbers) {
  const Error error = commit_error(encoded(populated_commit()), 41);
  EXPECT_EQ(error.code, EINVAL);
  EXPECT_EQ(error.message, fmt::format("journal commit: sequence {}, expected 41", kSequence));
}

TEST(JournalCommit, ChecksumMismatchIsUnclean) {
  Block block = encoded(populated_commit());
  const uint32_t good = get<uint32_t>(block, jl::kChecksum);
  block[jc::kDescriptorChecksum] ^= std::byte{0x01};
  const Error error = commit_error(block);
  EXPECT_EQ(error.code, EUCLEAN);
  EXPECT_TRUE(contains(error.message, "journal commit: checksum mismatch")) << error.message;
  EXPECT_TRUE(contains(error.message, fmt::format("stored 0x{:08x}", good))) << error.message;
}

TEST(JournalCommit, EverySingleBitFlipIsRejected) {
  const Block good = encoded(populated_commit());
  for (size_t bit = 0; bit < kJournalBlockSize * 8; ++bit) {
    Block block = good;
    flip_bit(block, bit);
    auto c = decode_journal_commit(block, 0);
    ASSERT_FALSE(c.has_value()) << "flip of bit " << bit << " went unnoticed";
    const int expected = bit / 8 < jc::kMagic + 4 ? ENODATA : EUCLEAN;
    ASSERT_EQ(c.error().code, expected) << "bit " << bit << ": " << c.error().message;
  }
}

// ---- the kinds of block, and how they tie together -----------------------------------------

// Each block kind is refused by the other decoders as "not mine", however intact.
TEST(JournalBlocks, NoKindIsAcceptedAsAnother) {
  const Block descriptor = encoded(populated_descriptor(17));
  const Block commit = encoded(populated_commit());
  const Block superblock = encoded(populated_superblock());

  EXPECT_EQ(commit_error(descriptor).code, ENODATA);
  EXPECT_EQ(commit_error(descriptor, 0).code, ENODATA);
  EXPECT_EQ(commit_error(superblock, 0).code, ENODATA);
  EXPECT_EQ(descriptor_error(commit).code, ENODATA);
  EXPECT_EQ(descriptor_error(commit, 0).code, ENODATA);
  EXPECT_EQ(descriptor_error(superblock, 0).code, ENODATA);
  EXPECT_EQ(superblock_error(descriptor).code, ENODATA);
  EXPECT_EQ(superblock_error(commit).code, ENODATA);

  const Block zero{};  // a log block never written
  EXPECT_EQ(descriptor_error(zero, 0).code, ENODATA);
  EXPECT_EQ(commit_error(zero, 0).code, ENODATA);
  EXPECT_EQ(superblock_error(zero).code, ENODATA);
}

TEST(JournalBlocks, CommitIsTiedToItsDescriptor) {
  const Block descriptor = encoded(populated_descriptor(17));
  const uint32_t tie = descriptor_checksum(descriptor);
  EXPECT_EQ(tie, get<uint32_t>(descriptor, jl::kChecksum));
  EXPECT_EQ(tie, crc32c(descriptor));

  const JournalCommit built{.sequence = kSequence, .count = 17, .descriptor_checksum = tie};
  auto commit = decode_journal_commit(encoded(built), kSequence);
  ASSERT_TRUE(commit) << commit.error().message;
  EXPECT_EQ(commit->descriptor_checksum, descriptor_checksum(descriptor));

  // Another descriptor of the same sequence and count (e.g. a stale one) does not match.
  JournalDescriptor other = populated_descriptor(17);
  other.entries[16].target += 1;
  EXPECT_NE(descriptor_checksum(encoded(other)), commit->descriptor_checksum);
}

TEST(JournalBlocks, DataBlockChecksumIsCrc32cOfTheWholeBlock) {
  Block data;
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte{static_cast<uint8_t>(i * 7 + 3)};
  EXPECT_EQ(data_block_checksum(data), crc32c(data.data(), data.size()));
  const Block zero{};
  EXPECT_EQ(data_block_checksum(zero), crc32c(zero.data(), zero.size()));
  EXPECT_NE(data_block_checksum(zero), data_block_checksum(data));
  const uint32_t before = data_block_checksum(data);
  data[4095] ^= std::byte{0x80};  // the last 4 bytes count too: a data block holds no checksum
  EXPECT_NE(data_block_checksum(data), before);
}

}  // namespace
}  // namespace stripefs
