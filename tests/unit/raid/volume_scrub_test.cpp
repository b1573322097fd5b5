// Scrub at every level with redundancy: a chunk corrupted behind the array's back (as a
// failing disk or a bad cable does) is found; where the level can name it (RAID6, three
// mirror copies) it is the right member's, and repair rewrites it; where it cannot (RAID5,
// two copies) nothing is rewritten on a guess.
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

struct ScrubCase {
  RaidLevel level;
  unsigned members;
  bool names_the_bad_chunk;
};

struct Scrubbed {
  test::MemoryArray array;
  std::unique_ptr<Volume> volume;
  std::unique_ptr<Level> level;
  AlignedBuffer data;

  explicit Scrubbed(const ScrubCase& c) : array(c.members, kDataOffset + kRows * kChunk) {
    auto geometry = Geometry::create(c.level, c.members, kChunk, kRows * kChunk);
    EXPECT_TRUE(geometry) << geometry.error().message;
    auto created = Volume::create(*geometry, array.members(), kDataOffset);
    EXPECT_TRUE(created) << created.error().message;
    volume = std::move(*created);
    level = Level::create(*geometry);
    data = test::random_buffer(volume->size(), 9);
    EXPECT_TRUE(volume->write(0, data.span()));
  }
  // Flips bytes [from, from + 512) of slot `slot` of `stripe`'s set on its member, unseen by
  // the array.
  ChunkLocation corrupt(uint64_t stripe, size_t slot, size_t from = 512) {
    const ChunkLocation at = level->redundancy_set(stripe)[slot];
    std::byte* chunk = array.media[at.member]->contents().data() + kDataOffset + at.member_offset;
    for (size_t i = from; i < from + 512; ++i) chunk[i] ^= std::byte{0xa5};
    return at;
  }
  Volume::ScrubCounts scrub(bool repair) {
    Volume::ScrubCounts counts;
    auto r = volume->scrub_stripes(0, volume->geometry().stripes(), repair, counts);
    EXPECT_TRUE(r) << r.error().message;
    return counts;
  }
  AlignedBuffer members_now() const {
    AlignedBuffer all(array.media.size() * (kDataOffset + kRows * kChunk));
    for (size_t m = 0; m < array.media.size(); ++m) {
      auto contents = array.media[m]->contents();
      std::memcpy(all.data() + m * contents.size(), contents.data(), contents.size());
    }
    return all;
  }
  void expect_data() {
    AlignedBuffer back(volume->size());
    ASSERT_TRUE(volume->read(0, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), back.size()), 0);
  }
};

class VolumeScrub : public testing::TestWithParam<ScrubCase> {};

INSTANTIATE_TEST_SUITE_P(
    , VolumeScrub,
    testing::Values(ScrubCase{RaidLevel::raid1, 2, false}, ScrubCase{RaidLevel::raid1, 3, true},
                    ScrubCase{RaidLevel::raid10, 4, false}, ScrubCase{RaidLevel::raid5, 4, false},
                    ScrubCase{RaidLevel::raid6, 5, true}),
    [](const testing::TestParamInfo<ScrubCase>& info) {
      return std::string(to_string(info.param.level)) + "_" + std::to_string(info.param.members);
    });

TEST_P(VolumeScrub, AConsistentArrayIsFoundSo) {
  Scrubbed s(GetParam());
  const Volume::ScrubCounts counts = s.scrub(true);
  EXPECT_EQ(counts.stripes, s.volume->geometry().stripes());
  EXPECT_EQ(counts.mismatched, 0u);
  EXPECT_EQ(counts.repaired, 0u);
  EXPECT_EQ(counts.unrepairable, 0u);
}

// Every slot of a stripe's set in turn (data, parity, each copy), each in its own stripe:
// found, and named on the right member where the level can tell; repaired then, so that a
// second scrub is clean. Where it cannot, check and repair both leave every byte as it was.
TEST_P(VolumeScrub, ACorruptedChunkIsFoundAndRepairedOnlyWhenItCanBeNamed) {
  const ScrubCase c = GetParam();
  Scrubbed s(c);
  const size_t slots = s.level->redundancy_set(0).size();
  std::vector<uint64_t> expected(c.members, 0);
  for (size_t slot = 0; slot < slots; ++slot) {
    ++expected[s.corrupt(slot * 3 + 1, slot).member];
  }
  const AlignedBuffer before = s.members_now();
  Volume::ScrubCounts check = s.scrub(false);
  EXPECT_EQ(check.mismatched, slots);
  EXPECT_EQ(check.repaired, 0u);
  AlignedBuffer after = s.members_now();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "a check wrote";
  if (!c.names_the_bad_chunk) {
    EXPECT_EQ(check.unrepairable, slots);
    const Volume::ScrubCounts repair = s.scrub(true);
    EXPECT_EQ(repair.unrepairable, slots);
    EXPECT_EQ(repair.repaired, 0u);
    after = s.members_now();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "rewritten on a guess";
    return;
  }
  EXPECT_EQ(check.unrepairable, 0u);
  EXPECT_EQ(check.bad_chunks, expected) << "a chunk was named on the wrong member";
  const Volume::ScrubCounts repair = s.scrub(true);
  EXPECT_EQ(repair.repaired, slots);
  EXPECT_EQ(repair.bad_chunks, expected);
  const Volume::ScrubCounts again = s.scrub(false);
  EXPECT_EQ(again.mismatched, 0u) << "not clean after the repair";
  s.expect_data();
}

// Two bad chunks in one stripe are more than RAID6 can name: found, left as they are. (Two
// errors can also pass for one: a data chunk and P off by the same bytes look like a bad Q.
// Only checksums of the data tell those apart; here the two differ where they are wrong.)
TEST(VolumeScrubRaid6, TwoBadChunksInOneStripeAreNotGuessed) {
  Scrubbed s({RaidLevel::raid6, 5, true});
  s.corrupt(2, 0, 512);
  s.corrupt(2, 3, 4096);
  const AlignedBuffer before = s.members_now();
  const Volume::ScrubCounts counts = s.scrub(true);
  EXPECT_EQ(counts.mismatched, 1u);
  EXPECT_EQ(counts.unrepairable, 1u);
  EXPECT_EQ(counts.repaired, 0u);
  const AlignedBuffer after = s.members_now();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0);
}

}  // namespace
}  // namespace stripefs
