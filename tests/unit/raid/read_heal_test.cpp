// Read errors healed as md's fix_read_error does: a member with an unreadable sector (which
// a write remaps, as on a disk) keeps its role; the reader gets the right bytes, the sector
// is rewritten from redundancy and reads again, the device counts a corrected error and the
// array raises a device-errors event. Past max_read_errors, or when the rewrite does not
// hold, the member is failed, and nothing is lost either way. A bad spot on the copy a heal
// reads from is skipped for the next copy, as md does.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include "raid/array.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kMemberSize = 4 << 20;
constexpr uint32_t kChunk = 64 * 1024;

struct Case {
  RaidLevel level;
  unsigned members;
};

struct Healing {
  test::MemoryArray media;
  std::unique_ptr<Array> array;
  AlignedBuffer data;
  std::mutex mutex;
  std::vector<ArrayEvent> events;

  explicit Healing(Case c) : media(c.members, kMemberSize) {
    ArrayOptions create;
    create.level = c.level;
    create.chunk_size = kChunk;
    EXPECT_TRUE(create_array(media.members(), create));
    auto opened = Array::open(media.members());
    EXPECT_TRUE(opened) << opened.error().message;
    array = std::move(*opened);
    array->set_event_listener([this](const ArrayEvent& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    });
    data = test::random_buffer(volume().size(), 9);
    EXPECT_TRUE(volume().write(0, data.span()));
  }
  // The array goes first: its threads may still tell the listener, which uses the members
  // below.
  ~Healing() { array.reset(); }
  Volume& volume() { return array->volume(); }
  // An unreadable 4 KiB sector under the first block of stripe `stripe`'s first data chunk
  // (its first copy): which member, and the volume offset that reads it.
  std::pair<unsigned, uint64_t> bad_block(uint64_t stripe) {
    const Geometry& g = volume().geometry();
    const ChunkLocation at = g.locate(stripe, 0, 0);
    const uint64_t member_byte = volume().data_offset() + at.member_offset;
    media.faulty[at.member]->bad_sectors({member_byte, member_byte + 4096});
    return {at.member, stripe * g.stripe_data_size()};
  }
  // Reads the block at `offset` as often as there are copies (each copy in turn serves a
  // small read), and checks it.
  void read_block(uint64_t offset) {
    for (unsigned i = 0; i < volume().geometry().copies(); ++i) {
      AlignedBuffer back(4096);
      auto r = volume().read(offset, back.span());
      ASSERT_TRUE(r) << r.error().message;
      ASSERT_EQ(std::memcmp(back.data(), data.data() + offset, 4096), 0);
    }
  }
  void expect_data() {
    AlignedBuffer back(volume().size());
    auto r = volume().read(0, back.span());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(std::memcmp(back.data(), data.data(), back.size()), 0);
  }
  size_t heard(ArrayEvent::Kind kind) {
    std::lock_guard lock(mutex);
    return static_cast<size_t>(std::count_if(
        events.begin(), events.end(), [kind](const ArrayEvent& e) { return e.kind == kind; }));
  }
};

class ReadHeal : public testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(, ReadHeal,
                         testing::Values(Case{RaidLevel::raid1, 2}, Case{RaidLevel::raid10, 4},
                                         Case{RaidLevel::raid5, 4}, Case{RaidLevel::raid6, 5}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(to_string(info.param.level));
                         });

TEST_P(ReadHeal, AnUnreadableSectorIsRewrittenAndTheMemberStays) {
  Healing h(GetParam());
  const auto [member, offset] = h.bad_block(3);
  ASSERT_NO_FATAL_FAILURE(h.read_block(offset));
  EXPECT_TRUE(h.volume().active(member));
  EXPECT_EQ(h.media.faulty[member]->counters().corrected, 1u);
  EXPECT_EQ(h.heard(ArrayEvent::Kind::device_errors), 1u);
  EXPECT_EQ(h.heard(ArrayEvent::Kind::member_failed), 0u);
  // Rewritten: the member reads the sector again, and holds the right bytes.
  const ChunkLocation at = h.volume().geometry().locate(3, 0, 0);
  AlignedBuffer direct(4096);
  ASSERT_TRUE(member_read(*h.media.faulty[member], h.volume().data_offset() + at.member_offset,
                          direct.span()));
  EXPECT_EQ(std::memcmp(direct.data(), h.data.data() + offset, 4096), 0);
  ASSERT_NO_FATAL_FAILURE(h.expect_data());
  auto bad = h.volume().count_inconsistent_stripes(0, h.volume().geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
}

// A large read over the sector takes the batched path, and heals it the same way.
// Three chunks a read (so mirrors take each copy in turn), the middle one over the sector;
// its neighbours, read in the same merged request, are not counted as errors.
TEST_P(ReadHeal, ALargeReadHealsToo) {
  Healing h(GetParam());
  const auto [member, offset] = h.bad_block(5);
  const uint64_t from = offset - 4096, length = kChunk + 8192;
  for (unsigned i = 0; i < h.volume().geometry().copies(); ++i) {
    AlignedBuffer back(length);
    auto r = h.volume().read(from, back.span());
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(std::memcmp(back.data(), h.data.data() + from, length), 0);
  }
  EXPECT_TRUE(h.volume().active(member));
  EXPECT_EQ(h.media.faulty[member]->counters().corrected, 1u);
}

// Past max_read_errors the member is failed, and its data still reads.
TEST_P(ReadHeal, TooManyCorrectedErrorsFailTheMember) {
  Healing h(GetParam());
  h.array->set_max_read_errors(2);
  // Three sectors on one member: the same member holds the first chunk of stripes n,
  // n + members, ... at every level here.
  const unsigned n = h.volume().geometry().members();
  std::vector<std::pair<unsigned, uint64_t>> bad;
  for (uint64_t s : {uint64_t{1}, uint64_t{1} + n, uint64_t{1} + 2 * n})
    bad.push_back(h.bad_block(s));
  ASSERT_EQ(bad[0].first, bad[2].first) << "the layout changed: pick other stripes";
  for (const auto& [member, offset] : bad) ASSERT_NO_FATAL_FAILURE(h.read_block(offset));
  EXPECT_FALSE(h.volume().active(bad[0].first)) << "3 corrected errors, at most 2";
  EXPECT_EQ(h.heard(ArrayEvent::Kind::device_errors), 2u) << "the 1st and 2nd (doublings)";
  ASSERT_NO_FATAL_FAILURE(h.expect_data());
}

// A sector that stays unreadable after the rewrite (a dying disk): the member is failed.
TEST_P(ReadHeal, ARewriteThatDoesNotHoldFailsTheMember) {
  Healing h(GetParam());
  const ChunkLocation at = h.volume().geometry().locate(2, 0, 0);
  const uint64_t byte = h.volume().data_offset() + at.member_offset;
  h.media.faulty[at.member]->fail_range(MemberOp::read, {byte, byte + 4096});
  ASSERT_NO_FATAL_FAILURE(h.read_block(2 * h.volume().geometry().stripe_data_size()));
  EXPECT_FALSE(h.volume().active(at.member));
  EXPECT_EQ(h.media.faulty[at.member]->counters().corrected, 0u);
  ASSERT_NO_FATAL_FAILURE(h.expect_data());
}

// max_read_errors 0: md's behaviour before it corrected anything; the first error fails.
TEST_P(ReadHeal, NoHealingWhenTurnedOff) {
  Healing h(GetParam());
  h.array->set_max_read_errors(0);
  const auto [member, offset] = h.bad_block(3);
  ASSERT_NO_FATAL_FAILURE(h.read_block(offset));
  EXPECT_FALSE(h.volume().active(member));
  EXPECT_EQ(h.media.faulty[member]->counters().corrected, 0u);
}

// md's fix_read_error tries the next copy: a bad spot on the copy the heal reads first does
// not fail that member; the third copy heals both, and every member stays.
TEST(ReadHealCopies, ABadSpotOnTwoCopiesIsHealedFromTheThird) {
  Healing h({RaidLevel::raid1, 3});
  const Geometry& g = h.volume().geometry();
  const uint64_t stripe = 4;
  for (unsigned copy : {0u, 1u}) {
    const ChunkLocation at = g.locate(stripe, 0, copy);
    const uint64_t byte = h.volume().data_offset() + at.member_offset;
    h.media.faulty[at.member]->bad_sectors({byte, byte + 4096});
  }
  ASSERT_NO_FATAL_FAILURE(h.read_block(stripe * g.stripe_data_size()));
  uint64_t corrected = 0;
  for (unsigned m = 0; m < 3; ++m) {
    EXPECT_TRUE(h.volume().active(m)) << "member " << m;
    corrected += h.media.faulty[m]->counters().corrected;
  }
  EXPECT_EQ(h.heard(ArrayEvent::Kind::member_failed), 0u);
  EXPECT_GE(corrected, 1u);
  // Both bad spots read right again, straight from their devices, once each was read.
  for (unsigned copy : {0u, 1u}) {
    ASSERT_NO_FATAL_FAILURE(h.read_block(stripe * g.stripe_data_size()));
    const ChunkLocation at = g.locate(stripe, 0, copy);
    AlignedBuffer direct(4096);
    ASSERT_TRUE(member_read(*h.media.faulty[at.member], h.volume().data_offset() + at.member_offset,
                            direct.span()));
    EXPECT_EQ(std::memcmp(direct.data(), h.data.data() + stripe * g.stripe_data_size(), 4096), 0)
        << "copy " << copy;
  }
  ASSERT_NO_FATAL_FAILURE(h.expect_data());
}

// A resync (check_stripes with repair) that meets an unreadable sector heals it as a read
// does and goes on, instead of stopping short; with healing off, the member is failed and
// the resync still completes.
TEST_P(ReadHeal, AResyncHealsAnUnreadableSectorAndGoesOn) {
  Healing h(GetParam());
  const auto [member, offset] = h.bad_block(3);
  const uint64_t stripes = h.volume().geometry().stripes();
  auto checked = h.volume().check_stripes(0, stripes, /*repair=*/true);
  ASSERT_TRUE(checked) << checked.error().message;
  EXPECT_EQ(*checked, 0u);
  EXPECT_TRUE(h.volume().active(member));
  EXPECT_EQ(h.media.faulty[member]->counters().corrected, 1u);
  EXPECT_EQ(h.heard(ArrayEvent::Kind::device_errors), 1u);
  const ChunkLocation at = h.volume().geometry().locate(3, 0, 0);
  AlignedBuffer direct(4096);
  ASSERT_TRUE(member_read(*h.media.faulty[member], h.volume().data_offset() + at.member_offset,
                          direct.span()));
  EXPECT_EQ(std::memcmp(direct.data(), h.data.data() + offset, 4096), 0);

  h.array->set_max_read_errors(0);
  const auto [second, second_offset] = h.bad_block(7);
  checked = h.volume().check_stripes(0, stripes, /*repair=*/true);
  ASSERT_TRUE(checked) << checked.error().message;
  EXPECT_FALSE(h.volume().active(second));
  ASSERT_NO_FATAL_FAILURE(h.expect_data());
  (void)second_offset;
}

// The initial sync of a new array fails a member whose chunk stays unreadable: the creation
// fails then, rather than record clean an array whose later stripes were never synced.
TEST(ReadHealLimits, CreationFailsWhenItsSyncFailsAMember) {
  test::MemoryArray media(4, kMemberSize);
  const uint64_t data_offset = ArrayOptions{}.data_offset;
  media.faulty[1]->fail_range(MemberOp::read, {data_offset + 4096, data_offset + 8192});
  ArrayOptions create;
  create.level = RaidLevel::raid5;
  create.chunk_size = kChunk;
  auto made = create_array(media.members(), create);
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("failed during the initial sync"), std::string::npos)
      << made.error().message;
}

// Without redundancy left there is nothing to heal from: the error stands (RAID5 degraded).
TEST(ReadHealLimits, ADegradedArrayCannotHeal) {
  Healing h({RaidLevel::raid5, 4});
  const auto [member, offset] = h.bad_block(3);
  h.volume().fail_member((member + 1) % 4, Error{EIO, "pulled"});
  AlignedBuffer back(4096);
  auto r = h.volume().read(offset, back.span());
  EXPECT_FALSE(r) << "two chunks of the stripe gone: RAID5 cannot rebuild it";
}

}  // namespace
}  // namespace stripefs
