// Hot replace (Array::replace, md's --replace) on arrays with a write-intent bitmap and a
// write-hole journal, as the daemon runs them: a writer goes on throughout and its data is
// checked afterwards; the replacement then carries the role on its own (the old device gone,
// another member pulled, the array closed and opened from the new set); redundancy never
// drops meanwhile; and each way a replace can be cut short leaves the array whole.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/open_array.hpp"
#include "raid/array.hpp"
#include "unit/raid/shadow_writer.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMemberSize = 16 << 20;
constexpr uint32_t kChunk = 64 * 1024;

struct Case {
  RaidLevel level;
  unsigned members;
};

// An array of memory members with a bitmap (and a journal on its first members, where the
// level has parity), a new device, and what every volume byte should hold.
struct Replacing {
  test::MemoryArray media;
  MemoryMember new_medium{"new", kMemberSize};
  FaultyMember fresh{new_medium};
  std::unique_ptr<Array> array;
  AlignedBuffer shadow;
  std::mutex shadow_mutex;
  std::vector<ArrayEvent> events;
  std::mutex events_mutex;

  explicit Replacing(Case c) : media(c.members, kMemberSize) {
    ArrayOptions create;
    create.level = c.level;
    create.chunk_size = kChunk;
    if (c.level != RaidLevel::raid0) add_bitmap(create, 0, milliseconds(0));
    if (c.level == RaidLevel::raid5 || c.level == RaidLevel::raid6) {
      add_member_journal(create, 256);
    }
    auto made = create_array(media.members(), create);
    EXPECT_TRUE(made) << made.error().message;
    open(media.members());
    shadow = test::random_buffer(volume().size(), 1);
    EXPECT_TRUE(volume().write(0, shadow.span()));
  }
  // `speed`, if given, limits a rebuild or replace resumed at the open (bytes a second).
  void open(std::vector<Member*> members, uint64_t speed = 0) {
    OpenOptions options = open_options(ArraySetup{.bitmap_clear_delay = milliseconds(0),
                                                  .journal_idle_checkpoint = milliseconds(50)});
    if (speed != 0) options.speed_min = options.speed_max = speed;
    auto opened = Array::open(members, options);
    ASSERT_TRUE(opened) << opened.error().message;
    array = std::move(*opened);
    array->set_event_listener([this](const ArrayEvent& e) {
      std::lock_guard lock(events_mutex);
      events.push_back(e);
    });
  }
  // The array goes first: its threads may still tell the listener, which uses the members
  // below.
  ~Replacing() { array.reset(); }
  Volume& volume() { return array->volume(); }
  // Waits (20 s at most) until the running replace has copied `bytes`; false if it ended or
  // did not get there, so a test fails instead of hanging.
  bool copied_past(uint64_t bytes) {
    for (int i = 0; i < 10000; ++i) {
      const RebuildProgress p = array->rebuild_progress();
      if (p.done >= bytes && p.done > 0) return true;
      if (!p.running) return false;
      std::this_thread::sleep_for(milliseconds(2));
    }
    return false;
  }
  bool heard(ArrayEvent::Kind kind) {
    std::lock_guard lock(events_mutex);
    return std::any_of(events.begin(), events.end(),
                       [kind](const ArrayEvent& e) { return e.kind == kind; });
  }

  void writer(std::atomic<bool>& stop, uint64_t seed, std::atomic<uint64_t>& writes) {
    test::write_randomly(volume(), shadow, shadow_mutex, stop, seed, writes);
  }
  void expect_data() {
    AlignedBuffer back(volume().size());
    auto r = volume().read(0, back.span());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(std::memcmp(back.data(), shadow.data(), back.size()), 0);
  }
  void expect_consistent() {
    auto bad = volume().count_inconsistent_stripes(0, volume().geometry().stripes());
    ASSERT_TRUE(bad) << bad.error().message;
    EXPECT_EQ(*bad, 0u) << "parity (or the copies) disagree after the replace";
  }
};

class HotReplace : public testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(, HotReplace,
                         testing::Values(Case{RaidLevel::raid0, 3}, Case{RaidLevel::raid1, 2},
                                         Case{RaidLevel::raid10, 4}, Case{RaidLevel::raid5, 4},
                                         Case{RaidLevel::raid6, 5}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(to_string(info.param.level));
                         });

// The whole way: the old device serves while the copy runs under a writer, the new one takes
// the role, and then carries it alone: the old one goes bad, another member is pulled (where
// the level allows), and the array opens from the new set of members.
TEST_P(HotReplace, TheNewDeviceTakesTheRoleWhileWritesGoOn) {
  Replacing r(GetParam());
  Member* old = r.array->member_device(0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 7, writes); });
  while (writes < 20) std::this_thread::yield();
  // Slow enough that writes land behind the copy point (mirrored) and ahead of it (copied).
  r.array->set_rebuild_speed(8 << 20, 8 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  EXPECT_EQ(r.array->replacement(0), &r.fresh);
  EXPECT_TRUE(r.volume().active(0)) << "the old device serves on";
  const RebuildProgress progress = r.array->wait_rebuild();
  stop = true;
  writer.join();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(progress.replace);
  EXPECT_EQ(progress.done, progress.total);
  EXPECT_GT(writes.load(), 40u);
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  EXPECT_EQ(r.array->replacement(0), nullptr);
  EXPECT_TRUE(r.volume().active(0));
  EXPECT_TRUE(r.heard(ArrayEvent::Kind::replace_started));
  EXPECT_TRUE(r.heard(ArrayEvent::Kind::replace_finished));
  r.expect_data();
  if (GetParam().level != RaidLevel::raid0) r.expect_consistent();
  // The old device is out of the picture: failing it changes nothing.
  r.media.faulty[0]->fail_after(0);
  r.expect_data();
  const unsigned other = GetParam().members - 1;
  if (GetParam().level != RaidLevel::raid0) {
    r.volume().fail_member(other, Error{EIO, "pulled to prove the new device right"});
    r.expect_data();
  }
  ASSERT_TRUE(r.array->close());
  r.array.reset();
  // Opened from the new set (the pulled member left out where it was pulled).
  std::vector<Member*> members = r.media.members();
  members[0] = &r.fresh;
  if (GetParam().level != RaidLevel::raid0) members.erase(members.begin() + other);
  r.media.faulty[0]->heal();
  r.open(members);
  r.expect_data();
  // Given beside its replacement, the old device is told apart as the older one.
  r.array->close();
  r.array.reset();
  members.push_back(old);
  r.open(members);
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  const auto& notes = r.array->notes();
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("was replaced by faulty:new") != std::string::npos;
  })) << testing::PrintToString(notes);
  r.expect_data();
}

// No window without redundancy: another member fails in the middle of the copy, and every
// byte still reads (the old device still serves its role), and the copy completes.
TEST_P(HotReplace, AnotherMemberFailingMidwayLosesNothing) {
  if (GetParam().level == RaidLevel::raid0) GTEST_SKIP() << "RAID0 has no redundancy to keep";
  Replacing r(GetParam());
  r.array->set_rebuild_speed(4 << 20, 4 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  while (r.array->rebuild_progress().done < r.array->rebuild_progress().total / 3) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  r.volume().fail_member(1, Error{EIO, "pulled during the replace"});
  r.expect_data();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 9, writes); });
  r.array->set_rebuild_speed(64 << 20, 0);
  const RebuildProgress progress = r.array->wait_rebuild();
  stop = true;
  writer.join();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  r.expect_data();
}

// The new device fails a write: the replace stops, the old device keeps the role, nothing
// is lost, and the replace can be run again onto another device.
TEST_P(HotReplace, AFailingNewDeviceLeavesTheOldOneServing) {
  Replacing r(GetParam());
  Member* old = r.array->member_device(0);
  r.fresh.fail_range(MemberOp::write, {kMemberSize / 2, kMemberSize});
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  const RebuildProgress progress = r.array->wait_rebuild();
  ASSERT_TRUE(progress.error);
  EXPECT_NE(progress.error->message.find("new"), std::string::npos) << progress.error->message;
  EXPECT_EQ(r.array->member_device(0), old);
  EXPECT_EQ(r.array->replacement(0), nullptr);
  EXPECT_TRUE(r.volume().active(0));
  EXPECT_TRUE(r.heard(ArrayEvent::Kind::replace_failed));
  r.expect_data();
  // Writes after it went only to the old device, and they are all there.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 3, writes); });
  while (writes < 50) std::this_thread::yield();
  stop = true;
  writer.join();
  r.expect_data();
  r.fresh.heal();
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  const RebuildProgress again = r.array->wait_rebuild();
  ASSERT_FALSE(again.error) << again.error->message;
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  r.expect_data();
}

// The old device fails while it is copied: as md does, the role is rebuilt onto the new
// device instead (from the others), and nothing is lost.
TEST_P(HotReplace, AFailingOldDeviceTurnsIntoARebuild) {
  if (GetParam().level == RaidLevel::raid0) GTEST_SKIP() << "RAID0 cannot rebuild a role";
  Replacing r(GetParam());
  r.media.faulty[0]->fail_range(MemberOp::read, {kMemberSize / 2, kMemberSize / 2 + 4096});
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  const RebuildProgress progress = r.array->wait_rebuild();
  ASSERT_TRUE(progress.error) << "the replace's own error is kept";
  EXPECT_NE(progress.error->message.find("rebuilding onto faulty:new instead"), std::string::npos)
      << progress.error->message;
  EXPECT_TRUE(r.heard(ArrayEvent::Kind::replace_failed));
  EXPECT_TRUE(r.heard(ArrayEvent::Kind::rebuild_started));
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  EXPECT_TRUE(r.volume().active(0));
  EXPECT_TRUE(r.heard(ArrayEvent::Kind::rebuild_finished));
  r.expect_data();
  r.expect_consistent();
}

// Closed in the middle: the new device's superblock says how far the copy got, and the next
// open given both devices resumes it there, under a writer, to the end.
TEST_P(HotReplace, AReplaceCutShortByACloseResumesAtTheNextOpen) {
  Replacing r(GetParam());
  Member* old = r.array->member_device(0);
  r.array->set_rebuild_speed(4 << 20, 4 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  ASSERT_TRUE(r.copied_past(2u << 20));
  {  // writes land behind the copy point (mirrored) and ahead of it
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> writes{0};
    std::thread writer([&] { r.writer(stop, 17, writes); });
    while (writes < 30) std::this_thread::yield();
    stop = true;
    writer.join();
  }
  ASSERT_TRUE(r.array->close());
  r.array.reset();
  auto sb = read_superblock(r.fresh);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_TRUE(sb->replacement());
  EXPECT_EQ(sb->role, 0u);
  EXPECT_GE(sb->rebuild_checkpoint, 2u << 20) << "the close records where the copy got to";
  std::vector<Member*> members = r.media.members();
  members.push_back(&r.fresh);
  r.open(members, 1 << 20);  // slow, so the copy is still under way below
  EXPECT_EQ(r.array->member_device(0), old) << "the old device serves on";
  EXPECT_EQ(r.array->replacement(0), &r.fresh);
  const auto& notes = r.array->notes();
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("resuming the copy at byte") != std::string::npos;
  })) << testing::PrintToString(notes);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 19, writes); });
  r.array->set_rebuild_speed(16 << 20, 0);
  const RebuildProgress progress = r.array->wait_rebuild();
  stop = true;
  writer.join();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(progress.replace);
  EXPECT_LT(progress.bytes, progress.total) << "resumed, not started over";
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  r.expect_data();
  if (GetParam().level == RaidLevel::raid0) return;
  r.expect_consistent();
  r.media.faulty[0]->fail_after(0);
  r.expect_data();
}

// A replacement that missed a run of the array (opened without it) is stale: kept out with
// a note, never resumed; the replace runs again onto it from the start.
TEST_P(HotReplace, AReplacementThatMissedARunIsKeptOut) {
  Replacing r(GetParam());
  r.array->set_rebuild_speed(4 << 20, 4 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  ASSERT_TRUE(r.copied_past(1));
  ASSERT_TRUE(r.array->close());
  r.array.reset();
  r.open(r.media.members());  // without it
  EXPECT_EQ(r.array->replacement(0), nullptr);
  {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> writes{0};
    std::thread writer([&] { r.writer(stop, 23, writes); });
    while (writes < 30) std::this_thread::yield();
    stop = true;
    writer.join();
  }
  ASSERT_TRUE(r.array->close());
  r.array.reset();
  std::vector<Member*> members = r.media.members();
  members.push_back(&r.fresh);
  r.open(members);
  EXPECT_EQ(r.array->replacement(0), nullptr);
  EXPECT_TRUE(r.volume().active(0));
  const auto& notes = r.array->notes();
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("replacement faulty:new of role 0 is stale") != std::string::npos;
  })) << testing::PrintToString(notes);
  r.expect_data();
  r.array->set_rebuild_speed(64 << 20, 0);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  const RebuildProgress again = r.array->wait_rebuild();
  ASSERT_FALSE(again.error) << again.error->message;
  EXPECT_EQ(r.array->member_device(0), &r.fresh);
  r.expect_data();
}

// The old device gone when the array opens again: the replacement (complete only below its
// checkpoint) is kept as a spare, never re-added as the role's own device; a rebuild onto it
// makes it whole.
TEST(HotReplaceResume, AReplacementWithoutItsOldDeviceIsASpareNotAMember) {
  Replacing r({RaidLevel::raid5, 4});
  r.array->set_rebuild_speed(4 << 20, 4 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  ASSERT_TRUE(r.copied_past(2u << 20));
  ASSERT_TRUE(r.array->close());
  r.array.reset();
  std::vector<Member*> members = r.media.members();
  members[0] = &r.fresh;
  r.open(members);
  EXPECT_EQ(r.array->member_device(0), nullptr);
  ASSERT_EQ(r.array->spares().size(), 1u);
  EXPECT_EQ(r.array->spares()[0], &r.fresh);
  auto readded = r.array->readd(0, &r.fresh);
  ASSERT_FALSE(readded);
  EXPECT_NE(readded.error().message.find("unfinished replacement"), std::string::npos)
      << readded.error().message;
  r.array->set_rebuild_speed(64 << 20, 0);
  ASSERT_TRUE(r.array->rebuild(0, &r.fresh));
  const RebuildProgress done = r.array->wait_rebuild();
  ASSERT_FALSE(done.error) << done.error->message;
  r.expect_data();
  r.expect_consistent();
}

// Stopped on request: the new device is wiped, so no later open takes it for a replacement.
TEST(HotReplaceStop, AStoppedReplaceLeavesABlankNewDevice) {
  Replacing r({RaidLevel::raid5, 4});
  r.array->set_rebuild_speed(2 << 20, 2 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  ASSERT_TRUE(r.copied_past(1));
  ASSERT_TRUE(r.array->cancel_replace(0));
  const RebuildProgress progress = r.array->wait_rebuild();
  ASSERT_TRUE(progress.error);
  EXPECT_FALSE(read_superblock(r.fresh)) << "the new device must not look like a replacement";
  ASSERT_TRUE(r.array->close());
  r.array.reset();
  std::vector<Member*> members = r.media.members();
  members.push_back(&r.fresh);
  auto opened = Array::open(members, open_options(ArraySetup{}));
  EXPECT_FALSE(opened) << "a blank device among the members is refused";
}

// The old device fails while a spare waits (the daemon then rebuilds onto the spare as the
// replace ends by rebuilding onto its new device): one of them takes the role, the other is
// refused, and the Volume writes to the device the array records, never to the old one.
TEST(HotReplaceRaces, AFailingOldDeviceAndASpareRebuild) {
  MemoryMember spare_medium{"spare", kMemberSize};  // outlives the array
  Replacing r({RaidLevel::raid5, 4});
  r.array->set_rebuild_speed(2 << 20, 2 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  ASSERT_TRUE(r.copied_past(1));
  ASSERT_TRUE(r.array->fail_member(0));
  auto spare = r.array->rebuild(0, &spare_medium);  // refused while the replace ends, or not
  r.array->set_rebuild_speed(64 << 20, 0);
  for (int i = 0; i < 2000 && !r.volume().active(0); ++i) {
    r.array->wait_rebuild();
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(r.volume().active(0));
  Member* holder = r.array->member_device(0);
  EXPECT_TRUE(holder == &r.fresh || (spare && holder == &spare_medium)) << holder->name();
  EXPECT_EQ(r.volume().member(0), holder) << "the Volume writes where the array records";
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 13, writes); });
  while (writes < 30) std::this_thread::yield();
  stop = true;
  writer.join();
  r.volume().fail_member(1, Error{EIO, "pulled to prove role 0's device right"});
  r.expect_data();
}

TEST(HotReplaceRefusals, NothingChangesForARefusedReplace) {
  MemoryMember small_medium{"small", kMemberSize / 2};
  Replacing r({RaidLevel::raid5, 4});
  EXPECT_FALSE(r.array->replace(7, &r.fresh)) << "no role 7";
  EXPECT_FALSE(r.array->replace(0, r.array->member_device(1))) << "a member already";
  EXPECT_FALSE(r.array->replace(0, &small_medium)) << "too small";
  EXPECT_TRUE(std::all_of(small_medium.contents().begin(), small_medium.contents().end(),
                          [](std::byte b) { return b == std::byte{0}; }));
  ASSERT_TRUE(r.array->fail_member(1));
  auto failed = r.array->replace(1, &r.fresh);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("not in service"), std::string::npos)
      << failed.error().message;
  r.array->set_rebuild_speed(1 << 20, 1 << 20);
  ASSERT_TRUE(r.array->replace(0, &r.fresh));
  auto twice = r.array->replace(0, &r.fresh);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("being replaced already"), std::string::npos)
      << twice.error().message;
  EXPECT_EQ(r.array->rebuild_progress().roles.size(), 1u);
}

}  // namespace
}  // namespace stripefs
