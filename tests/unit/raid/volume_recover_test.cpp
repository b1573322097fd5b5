// Checksum recovery (Volume::recover_block): a block corrupted behind the array's back reads
// without error; the caller's check says it is wrong. The right bytes come back from the
// other copies or from parity (with RAID6 also when P is wrong too), the wrong chunks, and
// only they, are rewritten and counted on their members; when nothing passes the check the
// answer is EIO and nothing is written.
#include <gtest/gtest.h>

#include <cstring>

#include "raid/level.hpp"
#include "raid/volume.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 16384;
constexpr uint64_t kRows = 24;
constexpr uint64_t kDataOffset = 8192;
constexpr uint64_t kBlock = 4096;

struct Case {
  RaidLevel level;
  unsigned members;
};

struct Recovering {
  test::MemoryArray array;
  std::unique_ptr<Volume> volume;
  std::unique_ptr<Level> level;
  AlignedBuffer data;

  explicit Recovering(const Case& c) : array(c.members, kDataOffset + kRows * kChunk) {
    auto geometry = Geometry::create(c.level, c.members, kChunk, kRows * kChunk);
    EXPECT_TRUE(geometry) << geometry.error().message;
    auto created = Volume::create(*geometry, array.members(), kDataOffset);
    EXPECT_TRUE(created) << created.error().message;
    volume = std::move(*created);
    level = Level::create(*geometry);
    data = test::random_buffer(volume->size(), 5);
    EXPECT_TRUE(volume->write(0, data.span()));
  }
  const Geometry& geometry() const { return volume->geometry(); }
  // The volume offset of block `block` (within the chunk) of data chunk `index` of `stripe`.
  uint64_t offset_of(uint64_t stripe, unsigned index, uint64_t block) const {
    return stripe * geometry().stripe_data_size() + index * uint64_t{kChunk} + block * kBlock;
  }
  // Flips bytes of block `block` of slot `slot` of `stripe`'s redundancy set (RAID0: of its
  // chunk `slot`), unseen by the array; returns the member.
  unsigned corrupt(uint64_t stripe, size_t slot, uint64_t block, std::byte with = std::byte{0x5a}) {
    std::vector<ChunkLocation> where = level->redundancy_set(stripe);
    const ChunkLocation at =
        where.empty() ? geometry().locate(stripe, static_cast<unsigned>(slot)) : where[slot];
    std::byte* b =
        array.media[at.member]->contents().data() + kDataOffset + at.member_offset + block * kBlock;
    for (size_t i = 100; i < 300; ++i) b[i] ^= with;
    return at.member;
  }
  // The check a filesystem would make: here, the bytes written.
  Volume::BlockCheck check(uint64_t offset) const {
    return [this, offset](std::span<const std::byte> got) {
      return std::memcmp(got.data(), data.data() + offset, got.size()) == 0;
    };
  }
  std::vector<std::vector<std::byte>> media_now() const {
    std::vector<std::vector<std::byte>> all;
    for (const auto& m : array.media) {
      auto c = m->contents();
      all.emplace_back(c.begin(), c.end());
    }
    return all;
  }
  uint64_t checksum_errors(unsigned member) const {
    return array.faulty[member]->counters().checksum_errors;
  }
};

class VolumeRecover : public testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(, VolumeRecover,
                         testing::Values(Case{RaidLevel::raid1, 2}, Case{RaidLevel::raid1, 3},
                                         Case{RaidLevel::raid10, 4}, Case{RaidLevel::raid5, 4},
                                         Case{RaidLevel::raid6, 5}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(to_string(info.param.level)) + "_" +
                                  std::to_string(info.param.members);
                         });

// Every chunk that holds the block (the data chunk; each mirror copy), in its own stripe: the
// right bytes come back, that member's chunk alone is rewritten and counted, and the members
// hold again what they held before the corruption.
TEST_P(VolumeRecover, AWrongChunkIsRecoveredRewrittenAndCountedOnItsMember) {
  Recovering r(GetParam());
  const auto clean = r.media_now();
  const bool parity = r.geometry().has_parity();
  const size_t holders = parity ? r.geometry().data_chunks() : r.geometry().copies();
  for (size_t slot = 0; slot < holders; ++slot) {
    const uint64_t stripe = 2 * slot + 1;
    const unsigned index = parity ? static_cast<unsigned>(slot) : 0;
    const unsigned member = r.corrupt(stripe, slot, 1);
    const uint64_t offset = r.offset_of(stripe, index, 1);
    const uint64_t before = r.checksum_errors(member);
    AlignedBuffer got(kBlock);
    auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
    ASSERT_TRUE(recovered) << recovered.error().message;
    EXPECT_EQ(std::memcmp(got.data(), r.data.data() + offset, kBlock), 0);
    EXPECT_EQ(recovered->rewritten, std::vector<unsigned>{member});
    EXPECT_EQ(r.checksum_errors(member), before + 1);
  }
  EXPECT_EQ(r.media_now(), clean) << "a chunk was not rewritten, or the wrong one was";
  EXPECT_EQ(r.volume->missing_members(), 0u) << "a member was failed for a checksum error";
}

// A block that is right after all (the first read was wrong, this one is not) costs nothing.
TEST_P(VolumeRecover, ABlockThatReadsRightNowIsLeftAlone) {
  Recovering r(GetParam());
  const auto clean = r.media_now();
  const uint64_t offset = r.offset_of(3, 0, 2);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_TRUE(recovered) << recovered.error().message;
  EXPECT_TRUE(recovered->rewritten.empty());
  EXPECT_EQ(std::memcmp(got.data(), r.data.data() + offset, kBlock), 0);
  EXPECT_EQ(r.media_now(), clean);
}

// More wrong chunks than the level can tell apart: EIO, never wrong bytes, nothing written.
TEST_P(VolumeRecover, NoPassingCopyIsEioAndWritesNothing) {
  const Case c = GetParam();
  Recovering r(c);
  const std::vector<ChunkLocation> set = r.level->redundancy_set(4);
  // Every copy of a mirror; the data chunk and every parity chunk of a parity stripe.
  if (r.geometry().has_parity()) {
    r.corrupt(4, 0, 0);
    for (unsigned p = 0; p < r.geometry().parity_chunks(); ++p) {
      r.corrupt(4, r.geometry().data_chunks() + p, 0, std::byte{static_cast<uint8_t>(0x11 + p)});
    }
  } else {
    for (size_t slot = 0; slot < set.size(); ++slot) {
      r.corrupt(4, slot, 0, std::byte{static_cast<uint8_t>(0x21 + slot)});
    }
  }
  const auto before = r.media_now();
  const uint64_t offset = r.offset_of(4, 0, 0);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_FALSE(recovered);
  EXPECT_EQ(recovered.error().code, EIO);
  EXPECT_NE(recovered.error().message.find("no copy passes its checksum"), std::string::npos)
      << recovered.error().message;
  EXPECT_EQ(r.media_now(), before);
}

// RAID6: the data chunk and P both wrong in the same place. Rebuilding from P alone gives
// wrong bytes; leaving P out as well (Q) gives the right ones, and both chunks are rewritten.
TEST(VolumeRecoverRaid6, ADataChunkAndPWrongTogetherAreRecoveredFromQ) {
  Recovering r({RaidLevel::raid6, 5});
  const auto clean = r.media_now();
  const unsigned k = r.geometry().data_chunks();
  const unsigned data_member = r.corrupt(5, 1, 3);
  const unsigned p_member = r.corrupt(5, k, 3, std::byte{0x33});
  const uint64_t offset = r.offset_of(5, 1, 3);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_TRUE(recovered) << recovered.error().message;
  EXPECT_EQ(std::memcmp(got.data(), r.data.data() + offset, kBlock), 0);
  std::vector<unsigned> rewritten = recovered->rewritten;
  std::sort(rewritten.begin(), rewritten.end());
  std::vector<unsigned> expected{data_member, p_member};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(rewritten, expected);
  EXPECT_EQ(r.media_now(), clean);
}

// Degraded: RAID6 with one member out still recovers a wrong chunk from what is left; RAID5
// with one out has nothing left to tell by, and says EIO without writing.
TEST(VolumeRecoverDegraded, Raid6WithAMemberOutStillRecovers) {
  Recovering r({RaidLevel::raid6, 5});
  const unsigned member = r.corrupt(6, 0, 1);
  const unsigned out = r.level->redundancy_set(6)[2].member;
  r.volume->hold_out(out);
  const uint64_t offset = r.offset_of(6, 0, 1);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_TRUE(recovered) << recovered.error().message;
  EXPECT_EQ(std::memcmp(got.data(), r.data.data() + offset, kBlock), 0);
  EXPECT_EQ(recovered->rewritten, std::vector<unsigned>{member});
}

TEST(VolumeRecoverDegraded, Raid5WithAMemberOutCannotTellAndSaysEio) {
  Recovering r({RaidLevel::raid5, 4});
  r.corrupt(6, 0, 1);
  r.volume->hold_out(r.level->redundancy_set(6)[1].member);
  const auto before = r.media_now();
  const uint64_t offset = r.offset_of(6, 0, 1);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_FALSE(recovered);
  EXPECT_EQ(recovered.error().code, EIO);
  EXPECT_EQ(r.media_now(), before);
}

TEST(VolumeRecoverRaid0, WithoutRedundancyAWrongBlockIsEio) {
  Recovering r({RaidLevel::raid0, 3});
  r.corrupt(2, 1, 0);
  const uint64_t offset = r.offset_of(2, 1, 0);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_FALSE(recovered);
  EXPECT_EQ(recovered.error().code, EIO);
  EXPECT_NE(recovered.error().message.find("no other copy"), std::string::npos);
}

// A device that cannot take the rewrite is failed; the reader still gets the right bytes.
TEST(VolumeRecoverRewrite, AMemberThatRefusesTheRewriteIsFailed) {
  Recovering r({RaidLevel::raid5, 4});
  const unsigned member = r.corrupt(7, 2, 0);
  r.array.faulty[member]->fail_range(MemberOp::write, {0, UINT64_MAX});
  const uint64_t offset = r.offset_of(7, 2, 0);
  AlignedBuffer got(kBlock);
  auto recovered = r.volume->recover_block(offset, got.span(), r.check(offset));
  ASSERT_TRUE(recovered) << recovered.error().message;
  EXPECT_EQ(std::memcmp(got.data(), r.data.data() + offset, kBlock), 0);
  EXPECT_TRUE(recovered->rewritten.empty());
  EXPECT_FALSE(r.volume->active(member));
}

TEST(VolumeRecoverArguments, ARangeAcrossChunksIsRefused) {
  Recovering r({RaidLevel::raid5, 4});
  AlignedBuffer got(2 * kBlock);
  auto recovered = r.volume->recover_block(kChunk - kBlock, got.span(),
                                           [](std::span<const std::byte>) { return true; });
  ASSERT_FALSE(recovered);
  EXPECT_EQ(recovered.error().code, EINVAL);
}

}  // namespace
}  // namespace stripefs
