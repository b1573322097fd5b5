// An array that crashed and came back with a member missing: what redundancy is left is
// resynced (RAID6 with one member out, a mirror with two copies left), and a mirror starts
// without force (a missing copy cannot be torn). Found by tests/check 022 (a power cut, then a
// member lost): RAID6 kept a wrong Q through the rebuild, RAID1/10 refused to mount.
#include <gtest/gtest.h>

#include "raid/array.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kMemberSize = 8 << 20;

ArrayOptions options(RaidLevel level) {
  ArrayOptions o;
  o.level = level;
  o.chunk_size = 64 * 1024;
  o.label = "test";
  return o;
}

// Writes data, closes, then makes every superblock say the array crashed.
Superblock written_then_crashed(test::MemoryArray& array, RaidLevel level) {
  EXPECT_TRUE(create_array(array.members(), options(level)));
  {
    auto opened = Array::open(array.members());
    EXPECT_TRUE(opened);
    AlignedBuffer data = test::random_buffer(1 << 20, 5);
    EXPECT_TRUE((*opened)->volume().write(0, data.span()));
    EXPECT_TRUE((*opened)->close());
  }
  for (auto& m : array.faulty) {
    auto sb = read_superblock(*m);
    sb->set_clean(false);
    ++sb->events;
    EXPECT_TRUE(write_superblock(*m, *sb));
  }
  return *read_superblock(*array.faulty[0]);
}

std::vector<Member*> without(const test::MemoryArray& array, unsigned missing) {
  std::vector<Member*> out;
  for (unsigned i = 0; i < array.faulty.size(); ++i) {
    if (i != missing) out.push_back(array.faulty[i].get());
  }
  return out;
}

TEST(DegradedResync, Raid6WithAMemberOutRewritesTheParityThatDisagrees) {
  test::MemoryArray array(5, kMemberSize);
  const Superblock sb = written_then_crashed(array, RaidLevel::raid6);
  auto geometry = Geometry::create(sb.level, 5, sb.chunk_size, sb.data_size);
  const unsigned p = geometry->p_member(0), q = geometry->q_member(0);
  unsigned data_member = 0;
  while (data_member == p || data_member == q) ++data_member;
  // A torn write: stripe 0's Q never made it.
  array.media[q]->contents()[sb.data_offset + 10] ^= std::byte{0xff};
  OpenOptions forced;  // no stripe log in this array: a dirty degraded parity array needs it
  forced.force = true;
  auto opened = Array::open(without(array, data_member), forced);
  ASSERT_TRUE(opened) << opened.error().message;
  const ResyncProgress resync = (*opened)->wait_resync();
  EXPECT_TRUE(resync.finished);
  EXPECT_FALSE(resync.error.has_value());
  EXPECT_EQ(resync.repaired, 1u);
  auto bad = (*opened)->volume().count_inconsistent_stripes(0, geometry->stripes());
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_EQ(*bad, 0u) << "degraded: Q agrees with the data P gives the missing chunk";
  // Data read through the missing member is what was written.
  AlignedBuffer back(1 << 20), data = test::random_buffer(1 << 20, 5);
  ASSERT_TRUE((*opened)->volume().read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), 1 << 20), 0);
}

TEST(DegradedResync, Raid5WithAMemberOutHasNothingLeftToCheck) {
  test::MemoryArray array(4, kMemberSize);
  const Superblock sb = written_then_crashed(array, RaidLevel::raid5);
  OpenOptions forced;
  forced.force = true;
  auto opened = Array::open(without(array, 1), forced);
  ASSERT_TRUE(opened) << opened.error().message;
  const ResyncProgress resync = (*opened)->wait_resync();
  EXPECT_FALSE(resync.error.has_value());
  EXPECT_EQ(resync.repaired, 0u);
  auto bad = (*opened)->volume().count_inconsistent_stripes(0, 8);
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_EQ(*bad, 0u);
}

TEST(DegradedResync, AMirrorStartsDirtyAndDegradedAndItsCopiesLeftAreResynced) {
  test::MemoryArray array(3, kMemberSize);
  const Superblock sb = written_then_crashed(array, RaidLevel::raid1);
  // The crash left copy 1 behind copy 0 in stripe 0; copy 2 is gone.
  array.media[1]->contents()[sb.data_offset + 10] ^= std::byte{0xff};
  auto opened = Array::open(without(array, 2));  // not forced
  ASSERT_TRUE(opened) << opened.error().message;
  const ResyncProgress resync = (*opened)->wait_resync();
  EXPECT_FALSE(resync.error.has_value());
  EXPECT_EQ(resync.repaired, 1u);
  auto bad = (*opened)->volume().count_inconsistent_stripes(0, 64);
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_EQ(*bad, 0u);
}

TEST(DegradedResync, Raid10StartsDirtyAndDegradedWithoutForce) {
  test::MemoryArray array(4, kMemberSize);
  written_then_crashed(array, RaidLevel::raid10);
  auto opened = Array::open(without(array, 3));
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_FALSE((*opened)->wait_resync().error.has_value());
}

}  // namespace
}  // namespace stripefs
