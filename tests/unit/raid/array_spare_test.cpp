// Spares on disk (md's spare superblock): a device recorded as a spare of the array is known
// as one by the next assembly given it, never speaks for the array, and can be rebuilt onto;
// wiped again, it is a blank device.
#include <gtest/gtest.h>

#include "raid/array.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kMemberSize = 4 << 20;

ArrayOptions raid5() {
  ArrayOptions o;
  o.level = RaidLevel::raid5;
  o.chunk_size = 64 * 1024;
  return o;
}

std::vector<Member*> first(const test::MemoryArray& media, size_t count) {
  std::vector<Member*> all = media.members();
  return {all.begin(), all.begin() + static_cast<long>(count)};
}

TEST(ArraySpare, IsKnownAgainAtTheNextOpenAndCanBeRebuiltOnto) {
  test::MemoryArray media(5, kMemberSize);
  ASSERT_TRUE(create_array(first(media, 4), raid5()));
  auto opened = Array::open(first(media, 4));
  ASSERT_TRUE(opened) << opened.error().message;
  const AlignedBuffer data = test::random_buffer((*opened)->volume().size(), 3);
  ASSERT_TRUE((*opened)->volume().write(0, data.span()));
  ASSERT_TRUE((*opened)->record_spare(*media.faulty[4]));
  auto sb = read_superblock(*media.faulty[4]);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_TRUE(sb->spare());
  ASSERT_TRUE((*opened)->close());
  opened->reset();

  // Given first, it still does not speak for the array.
  std::vector<Member*> all = media.members();
  std::rotate(all.begin(), all.begin() + 4, all.end());
  auto again = Array::open(all);
  ASSERT_TRUE(again) << again.error().message;
  Array& array = **again;
  ASSERT_EQ(array.spares().size(), 1u);
  EXPECT_EQ(array.spares()[0], media.faulty[4].get());
  EXPECT_EQ(array.volume().missing_members(), 0u);
  ASSERT_TRUE(array.fail_member(1));
  ASSERT_TRUE(array.rebuild(1, array.spares()[0]));
  const RebuildProgress progress = array.wait_rebuild();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_EQ(array.member_device(1), media.faulty[4].get());
  array.volume().fail_member(0, Error{EIO, "pulled to prove the spare right"});
  AlignedBuffer back(array.volume().size());
  ASSERT_TRUE(array.volume().read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), back.size()), 0);
}

TEST(ArraySpare, SparesAloneOrOfAnotherArrayAreRefused) {
  test::MemoryArray media(5, kMemberSize), other(5, kMemberSize);
  ASSERT_TRUE(create_array(first(media, 4), raid5()));
  ASSERT_TRUE(create_array(first(other, 4), raid5()));
  {
    auto opened = Array::open(first(media, 4));
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->record_spare(*media.faulty[4]));
    auto theirs = Array::open(first(other, 4));
    ASSERT_TRUE(theirs) << theirs.error().message;
    ASSERT_TRUE((*theirs)->record_spare(*other.faulty[4]));
  }
  auto alone = assemble(std::vector<Member*>{media.faulty[4].get()});
  ASSERT_FALSE(alone);
  EXPECT_NE(alone.error().message.find("only spares"), std::string::npos) << alone.error().message;
  std::vector<Member*> mixed = first(media, 4);
  mixed.push_back(other.faulty[4].get());
  auto foreign = assemble(mixed);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("spare"), std::string::npos) << foreign.error().message;
}

TEST(ArraySpare, AWipedSpareIsABlankDeviceAgain) {
  test::MemoryArray media(5, kMemberSize);
  ASSERT_TRUE(create_array(first(media, 4), raid5()));
  auto opened = Array::open(first(media, 4));
  ASSERT_TRUE(opened) << opened.error().message;
  ASSERT_TRUE((*opened)->record_spare(*media.faulty[4]));
  ASSERT_TRUE((*opened)->record_spare(*media.faulty[4], false));
  auto sb = read_superblock(*media.faulty[4]);
  ASSERT_FALSE(sb);
  EXPECT_EQ(sb.error().code, ENODATA) << sb.error().message;
  MemoryMember small_medium{"small", kMemberSize / 4};
  EXPECT_FALSE((*opened)->record_spare(small_medium)) << "too small to be rebuilt onto";
}

}  // namespace
}  // namespace stripefs
