#include "raid/array.hpp"

#include <gtest/gtest.h>

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

std::vector<Member*> pick(const test::MemoryArray& array, std::initializer_list<unsigned> which) {
  std::vector<Member*> out;
  for (unsigned i : which) out.push_back(array.faulty[i].get());
  return out;
}

bool superblock_area_is_zero(MemoryMember& m) {
  auto bytes = m.contents().subspan(kSuperblockOffset, kSuperblockSize);
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

std::string error_of(const auto& result) {
  return result ? std::string("(succeeded)") : result.error().message;
}

TEST(Array, CreateThenAssembleHealthy) {
  test::MemoryArray array(4, kMemberSize);
  auto created = create_array(array.members(), options(RaidLevel::raid5));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_TRUE(created->clean());
  EXPECT_EQ(created->member_count, 4);
  // Members may be given in any order: roles come from the superblocks.
  auto assembly = assemble(pick(array, {2, 0, 3, 1}));
  ASSERT_TRUE(assembly) << assembly.error().message;
  EXPECT_TRUE(assembly->notes.empty());
  for (unsigned role = 0; role < 4; ++role) {
    EXPECT_EQ(assembly->by_role[role], array.faulty[role].get());
  }
}

TEST(Array, DataSurvivesCloseAndReopen) {
  test::MemoryArray array(5, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid6)));
  AlignedBuffer data = test::random_buffer(1 << 20, 11);
  {
    auto opened = Array::open(array.members());
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->volume().write(12288, data.span()));
    ASSERT_TRUE((*opened)->close());
    EXPECT_TRUE((*opened)->superblock().clean());
  }
  auto reopened = Array::open(array.members());
  ASSERT_TRUE(reopened);
  AlignedBuffer back(data.size());
  ASSERT_TRUE((*reopened)->volume().read(12288, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  EXPECT_FALSE((*reopened)->superblock().clean()) << "a running array is recorded dirty";
}

TEST(Array, DegradedAssemblyNamesTheMissingRole) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  auto opened = Array::open(pick(array, {0, 1, 3}));
  ASSERT_TRUE(opened) << opened.error().message;
  ASSERT_EQ((*opened)->notes().size(), 1u);
  EXPECT_NE((*opened)->notes()[0].find("role 2"), std::string::npos) << (*opened)->notes()[0];
  EXPECT_FALSE((*opened)->volume().active(2));
  EXPECT_EQ((*opened)->superblock().member_states[2], MemberState::missing);
}

TEST(Array, StaleMemberIsNamedAndKeptOut) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  AlignedBuffer data = test::random_buffer(1 << 20, 3);
  {
    auto opened = Array::open(array.members());
    ASSERT_TRUE(opened);
    array.faulty[2]->fail_range(MemberOp::write, {0, ~0ull});
    ASSERT_TRUE((*opened)->volume().write(0, data.span()));  // member 2 fails underneath
    EXPECT_FALSE((*opened)->volume().active(2));
    ASSERT_TRUE((*opened)->close());
  }
  array.faulty[2]->heal();
  // The survivors recorded the failure durably.
  auto survivor = read_superblock(*array.faulty[0]);
  ASSERT_TRUE(survivor);
  EXPECT_EQ(survivor->member_states[2], MemberState::faulty);
  auto stale = read_superblock(*array.faulty[2]);
  ASSERT_TRUE(stale);
  EXPECT_LT(stale->events, survivor->events);

  auto reopened = Array::open(array.members());
  ASSERT_TRUE(reopened) << reopened.error().message;
  ASSERT_EQ((*reopened)->notes().size(), 1u);
  EXPECT_NE((*reopened)->notes()[0].find("mem2"), std::string::npos);
  EXPECT_NE((*reopened)->notes()[0].find("recorded as failed"), std::string::npos)
      << (*reopened)->notes()[0];
  EXPECT_FALSE((*reopened)->volume().active(2));
  AlignedBuffer back(data.size());
  ASSERT_TRUE((*reopened)->volume().read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

// Superblocks are written one member after another: a power cut between two of those writes
// leaves members one event apart, which must not cost the array a member. Two apart is stale.
TEST(Array, OneEventBehindIsCurrentTwoIsStale) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  {
    auto opened = Array::open(array.members());
    ASSERT_TRUE(opened);
    ASSERT_TRUE((*opened)->close());
  }
  auto behind = [&](unsigned member, uint64_t by) {
    auto sb = read_superblock(*array.faulty[member]);
    sb->events -= by;
    sb->set_clean(false);  // it missed the clean-shutdown record
    ASSERT_TRUE(write_superblock(*array.faulty[member], *sb));
  };
  behind(1, 1);
  {
    auto opened = Array::open(array.members());
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_TRUE((*opened)->notes().empty());
    EXPECT_EQ((*opened)->volume().missing_members(), 0u);
    ASSERT_TRUE((*opened)->close());
  }
  behind(2, 2);
  auto opened = Array::open(array.members());
  ASSERT_TRUE(opened) << opened.error().message;
  ASSERT_EQ((*opened)->notes().size(), 1u);
  EXPECT_NE((*opened)->notes()[0].find("stale"), std::string::npos) << (*opened)->notes()[0];
  EXPECT_FALSE((*opened)->volume().active(2));
}

TEST(Array, RefusesTooManyMissing) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  auto refused = Array::open(pick(array, {0, 3}));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("2 of 4 members missing"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("role 1"), std::string::npos) << refused.error().message;
}

TEST(Array, RefusesMembersOfDifferentArrays) {
  test::MemoryArray a(3, kMemberSize), b(3, kMemberSize);
  ASSERT_TRUE(create_array(a.members(), options(RaidLevel::raid5)));
  ASSERT_TRUE(create_array(b.members(), options(RaidLevel::raid5)));
  auto mixed =
      assemble(std::vector<Member*>{a.faulty[0].get(), a.faulty[1].get(), b.faulty[2].get()});
  ASSERT_FALSE(mixed);
  EXPECT_NE(mixed.error().message.find("array_uuid"), std::string::npos) << error_of(mixed);
}

TEST(Array, RefusesGeometryMismatchNamingTheField) {
  test::MemoryArray array(3, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  auto sb = read_superblock(*array.faulty[1]);
  ASSERT_TRUE(sb);
  sb->chunk_size = 128 * 1024;
  ASSERT_TRUE(write_superblock(*array.faulty[1], *sb));
  auto refused = assemble(array.members());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("chunk_size"), std::string::npos) << error_of(refused);
  EXPECT_NE(refused.error().message.find("mem1"), std::string::npos) << error_of(refused);
}

TEST(Array, RefusesADeviceThatIsNotAMember) {
  test::MemoryArray array(3, kMemberSize);
  ASSERT_TRUE(create_array(pick(array, {0, 1}), [] {
    auto o = options(RaidLevel::raid1);
    return o;
  }()));
  auto refused = assemble(array.members());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ENODATA);
  EXPECT_NE(refused.error().message.find("mem2"), std::string::npos) << error_of(refused);
  EXPECT_NE(refused.error().message.find("force starts the array without it"), std::string::npos)
      << error_of(refused);
}

// A member whose superblock was wiped: forced, the array starts degraded without it, and
// says so; too many such members still stop it.
TEST(Array, AWipedSuperblockIsKeptOutWhenForced) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  std::fill_n(array.media[1]->contents().begin() + kSuperblockOffset, kSuperblockSize,
              std::byte{0});
  OpenOptions forced;
  forced.force = true;
  auto opened = Array::open(array.members(), forced);
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_FALSE((*opened)->volume().active(1));
  EXPECT_TRUE((*opened)->volume().active(0));
  ASSERT_FALSE((*opened)->notes().empty());
  EXPECT_NE((*opened)->notes()[0].find("mem1"), std::string::npos) << (*opened)->notes()[0];
  EXPECT_NE((*opened)->notes()[0].find("kept out"), std::string::npos) << (*opened)->notes()[0];
  ASSERT_TRUE((*opened)->close());
  opened->reset();
  std::fill_n(array.media[2]->contents().begin() + kSuperblockOffset, kSuperblockSize,
              std::byte{0});
  EXPECT_FALSE(Array::open(array.members(), forced)) << "two members missing: RAID5 cannot run";
}

// A copy of a member given with it (or a superblock that names another's role): neither
// is chosen silently, whichever order they come in.
TEST(Array, RefusesTwoDevicesWithOneRole) {
  test::MemoryArray array(5, kMemberSize);
  ASSERT_TRUE(create_array(pick(array, {0, 1, 2, 3}), options(RaidLevel::raid5)));
  auto copy = array.media[3]->contents();
  std::copy(copy.begin(), copy.end(), array.media[4]->contents().begin());
  for (auto order : {std::vector<unsigned>{0, 1, 2, 3, 4}, std::vector<unsigned>{0, 1, 2, 4, 3}}) {
    std::vector<Member*> given;
    for (unsigned i : order) given.push_back(array.faulty[i].get());
    auto refused = assemble(given);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("both claim role 3"), std::string::npos)
        << error_of(refused);
  }
  auto sb = read_superblock(*array.faulty[1]);
  ASSERT_TRUE(sb);
  sb->role = 0;
  ASSERT_TRUE(write_superblock(*array.faulty[1], *sb));
  auto refused = assemble(pick(array, {0, 1, 2, 3}));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("both claim role 0"), std::string::npos)
      << error_of(refused);
}

TEST(Array, DamagedSuperblockKeepsThatMemberOut) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  array.media[3]->contents()[kSuperblockOffset + 100] ^= std::byte{1};
  auto opened = Array::open(array.members());
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_FALSE((*opened)->volume().active(3));
  ASSERT_FALSE((*opened)->notes().empty());
  EXPECT_NE((*opened)->notes()[0].find("checksum"), std::string::npos) << (*opened)->notes()[0];
}

TEST(Array, UncleanShutdownIsResynced) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  {
    auto opened = Array::open(array.members());
    AlignedBuffer data = test::random_buffer(1 << 20, 5);
    ASSERT_TRUE((*opened)->volume().write(0, data.span()));
    ASSERT_TRUE((*opened)->close());
  }
  // A crash: superblocks still say dirty, and a stripe's parity never made it to disk.
  for (auto& m : array.faulty) {
    auto sb = read_superblock(*m);
    sb->set_clean(false);
    ++sb->events;
    ASSERT_TRUE(write_superblock(*m, *sb));
  }
  auto sb = read_superblock(*array.faulty[0]);
  auto geometry = Geometry::create(sb->level, 4, sb->chunk_size, sb->data_size);
  const unsigned pm = geometry->p_member(0);
  array.media[pm]->contents()[sb->data_offset + 10] ^= std::byte{0xff};
  auto opened = Array::open(array.members());
  ASSERT_TRUE(opened) << opened.error().message;
  const ResyncProgress resync = (*opened)->wait_resync();
  EXPECT_TRUE(resync.finished);
  EXPECT_EQ(resync.total, geometry->stripes()) << "no bitmap: every stripe";
  EXPECT_EQ(resync.repaired, 1u);
  auto bad = (*opened)->volume().count_inconsistent_stripes(0, geometry->stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
}

TEST(Array, DirtyAndDegradedIsRefusedUnlessForced) {
  test::MemoryArray array(4, kMemberSize);
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  for (auto& m : array.faulty) {
    auto sb = read_superblock(*m);
    sb->set_clean(false);
    ASSERT_TRUE(write_superblock(*m, *sb));
  }
  auto refused = Array::open(pick(array, {0, 1, 2}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, EUCLEAN);
  EXPECT_NE(refused.error().message.find("not shut down cleanly"), std::string::npos);
  OpenOptions forced;
  forced.force = true;
  EXPECT_TRUE(Array::open(pick(array, {0, 1, 2}), forced));
}

// Bad input at creation is refused before a single byte is written to any member.
TEST(Array, CreateRefusesBadMembersWithoutWriting) {
  {
    test::MemoryArray array(4, kMemberSize);
    auto small = std::make_unique<MemoryMember>("small", 1 << 20);
    auto members = array.members();
    members[3] = small.get();
    auto r = create_array(members, options(RaidLevel::raid5));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("small"), std::string::npos) << error_of(r);
    EXPECT_NE(r.error().message.find("too small"), std::string::npos) << error_of(r);
    for (auto& m : array.media) EXPECT_TRUE(superblock_area_is_zero(*m));
  }
  {
    test::MemoryArray array(4, kMemberSize);
    DeviceLimits four_k;
    four_k.logical_block = 4096;
    auto odd = std::make_unique<MemoryMember>("odd", kMemberSize, four_k);
    auto members = array.members();
    members[1] = odd.get();
    auto r = create_array(members, options(RaidLevel::raid5));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("logical block size"), std::string::npos) << error_of(r);
    for (auto& m : array.media) EXPECT_TRUE(superblock_area_is_zero(*m));
  }
  {
    test::MemoryArray other(2, kMemberSize), array(3, kMemberSize);
    ASSERT_TRUE(create_array(other.members(), options(RaidLevel::raid1)));
    auto members = array.members();
    members[2] = other.faulty[1].get();
    auto r = create_array(members, options(RaidLevel::raid5));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, EEXIST);
    EXPECT_NE(r.error().message.find("holds array"), std::string::npos) << error_of(r);
    EXPECT_TRUE(superblock_area_is_zero(*array.media[0]));
    EXPECT_TRUE(superblock_area_is_zero(*array.media[1]));
    auto force = options(RaidLevel::raid5);
    force.force = true;
    EXPECT_TRUE(create_array(members, force));
  }
  {
    test::MemoryArray array(3, kMemberSize);
    auto r = create_array(array.members(), options(RaidLevel::raid6));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("at least 4"), std::string::npos) << error_of(r);
    auto twice = array.members();
    twice[2] = twice[0];
    EXPECT_FALSE(create_array(twice, options(RaidLevel::raid5)));
    for (auto& m : array.media) EXPECT_TRUE(superblock_area_is_zero(*m));
  }
}

// Members that held garbage: the initial sync makes parity match whatever data is there.
TEST(Array, InitialSyncMakesParityConsistent) {
  test::MemoryArray array(4, kMemberSize);
  for (unsigned i = 0; i < 4; ++i) {
    AlignedBuffer junk = test::random_buffer(kMemberSize, 100 + i);
    std::memcpy(array.media[i]->contents().data(), junk.data(), kMemberSize);
    std::memset(array.media[i]->contents().data() + kSuperblockOffset, 0, kSuperblockSize);
  }
  ASSERT_TRUE(create_array(array.members(), options(RaidLevel::raid5)));
  auto opened = Array::open(array.members());
  ASSERT_TRUE(opened);
  auto& volume = (*opened)->volume();
  auto bad = volume.count_inconsistent_stripes(0, volume.geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
}

}  // namespace
}  // namespace stripefs
