#include "raid/level.hpp"

#include <gtest/gtest.h>

#include <set>

#include "raid/array.hpp"
#include "raid/parity.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

std::unique_ptr<Level> level(RaidLevel l, unsigned members) {
  return Level::create(*Geometry::create(l, members, 4096, 16 * 4096));
}

Level::Active missing(std::set<unsigned> gone) {
  return [gone](unsigned m) { return !gone.contains(m); };
}

TEST(Level, SurvivesExactlyWhatTheLevelTolerates) {
  EXPECT_TRUE(level(RaidLevel::raid0, 3)->survives(missing({})));
  EXPECT_FALSE(level(RaidLevel::raid0, 3)->survives(missing({2})));
  EXPECT_TRUE(level(RaidLevel::raid1, 3)->survives(missing({0, 1})));
  EXPECT_FALSE(level(RaidLevel::raid1, 3)->survives(missing({0, 1, 2})));
  EXPECT_TRUE(level(RaidLevel::raid5, 4)->survives(missing({3})));
  EXPECT_FALSE(level(RaidLevel::raid5, 4)->survives(missing({1, 3})));
  EXPECT_TRUE(level(RaidLevel::raid6, 5)->survives(missing({0, 4})));
  EXPECT_FALSE(level(RaidLevel::raid6, 5)->survives(missing({0, 2, 4})));
  // RAID10 near-2 on four members: pairs (0,1) and (2,3). One from each pair may go.
  auto r10 = level(RaidLevel::raid10, 4);
  EXPECT_TRUE(r10->survives(missing({0, 2})));
  EXPECT_TRUE(r10->survives(missing({1, 3})));
  EXPECT_FALSE(r10->survives(missing({0, 1})));
  // Three members: every adjacent pair holds some chunk.
  auto r10odd = level(RaidLevel::raid10, 3);
  EXPECT_TRUE(r10odd->survives(missing({1})));
  EXPECT_FALSE(r10odd->survives(missing({0, 2})));
}

TEST(Level, MirrorsSpreadReadsAndWriteEveryLiveCopy) {
  auto r1 = level(RaidLevel::raid1, 3);
  std::set<unsigned> used;
  for (uint64_t spread = 0; spread < 3; ++spread) {
    used.insert(r1->read_from(0, 0, missing({}), spread)->member);
  }
  EXPECT_EQ(used.size(), 3u) << "reads are spread over the copies";
  EXPECT_EQ(r1->read_from(0, 0, missing({0, 1}), 0)->member, 2u);
  EXPECT_FALSE(r1->read_from(0, 0, missing({0, 1, 2}), 0));
  std::vector<ChunkLocation> targets;
  r1->write_targets(0, 0, missing({1}), targets);
  EXPECT_EQ(targets.size(), 2u);
}

TEST(Level, ParityLevelsRebuildWhatTheirDataMemberLost) {
  auto r5 = level(RaidLevel::raid5, 4);
  const Geometry g = *Geometry::create(RaidLevel::raid5, 4, 4096, 16 * 4096);
  const unsigned holder = g.locate(3, 1).member;
  EXPECT_EQ(r5->read_from(3, 1, missing({}), 0)->member, holder);
  EXPECT_FALSE(r5->read_from(3, 1, missing({holder}), 0)) << "rebuilt from parity instead";
  EXPECT_EQ(r5->redundancy_set(3).size(), 4u);
  EXPECT_TRUE(level(RaidLevel::raid0, 2)->redundancy_set(0).empty());
}

TEST(Level, DisagreementsNameTheSlotAndItsCorrectContents) {
  constexpr size_t kChunk = 4096;
  AlignedBuffer chunks = test::random_buffer(5 * kChunk, 1), scratch(2 * kChunk);
  std::vector<std::byte*> slots;
  for (int i = 0; i < 5; ++i) slots.push_back(chunks.data() + i * kChunk);
  auto r6 = level(RaidLevel::raid6, 5);  // 3 data, P, Q
  parity::generate(std::span(slots).first(3), slots[3], slots[4], kChunk);
  EXPECT_TRUE(r6->disagreements(slots, scratch.span(), kChunk).empty());
  slots[4][7] ^= std::byte{1};  // Q damaged
  auto fixes = r6->disagreements(slots, scratch.span(), kChunk);
  ASSERT_EQ(fixes.size(), 1u);
  EXPECT_EQ(fixes[0].first, 4u);
  auto r1 = level(RaidLevel::raid1, 2);
  std::vector<std::byte*> copies{slots[0], slots[1]};
  fixes = r1->disagreements(copies, scratch.span(), kChunk);
  ASSERT_EQ(fixes.size(), 1u);
  EXPECT_EQ(fixes[0].second, slots[0]) << "the first copy is taken as right";
}

}  // namespace
}  // namespace stripefs

namespace stripefs {
namespace {

// One rule for how many members a level needs: Geometry's arithmetic allows more than an
// array may be made of (one RAID0 member), creating an array does not.
TEST(Level, MinMembersIsWhatCreatingAnArrayNeeds) {
  EXPECT_EQ(Level::min_members(RaidLevel::raid0), 2u);
  EXPECT_EQ(Level::min_members(RaidLevel::raid1), 2u);
  EXPECT_EQ(Level::min_members(RaidLevel::raid10), 2u);
  EXPECT_EQ(Level::min_members(RaidLevel::raid5), 3u);
  EXPECT_EQ(Level::min_members(RaidLevel::raid6), 4u);
  for (RaidLevel l : {RaidLevel::raid0, RaidLevel::raid1, RaidLevel::raid10, RaidLevel::raid5,
                      RaidLevel::raid6}) {
    SCOPED_TRACE(to_string(l));
    const unsigned n = Level::min_members(l);
    test::MemoryArray too_few(n - 1, 4 << 20);
    ArrayOptions options;
    options.level = l;
    options.chunk_size = 65536;
    options.assume_clean = true;
    auto refused = create_array(too_few.members(), options);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find(fmt::format("at least {}", n)), std::string::npos)
        << refused.error().message;
    test::MemoryArray enough(n, 4 << 20);
    EXPECT_TRUE(create_array(enough.members(), options));
  }
}

}  // namespace
}  // namespace stripefs
