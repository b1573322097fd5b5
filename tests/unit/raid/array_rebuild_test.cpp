// Rebuilding a failed member onto a new device while the array is in use (md's recovery):
// a writer runs throughout, and afterwards the data is checked, parity is checked, and the
// rebuilt device carries the data on its own (another member then fails).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "raid/array.hpp"
#include "unit/raid/shadow_writer.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 64 * 1024;
constexpr uint64_t kMemberSize = 6 << 20;

struct LevelCase {
  RaidLevel level;
  unsigned members;
};

const LevelCase kLevels[] = {
    {RaidLevel::raid1, 2}, {RaidLevel::raid10, 4}, {RaidLevel::raid5, 4}, {RaidLevel::raid6, 5}};

// An array of memory members, a spare device, and the data every volume byte should hold.
struct Rebuilding {
  test::MemoryArray media;
  MemoryMember spare_medium{"spare", kMemberSize};
  FaultyMember spare{spare_medium};
  std::unique_ptr<Array> array;
  AlignedBuffer shadow;
  std::mutex shadow_mutex;

  explicit Rebuilding(LevelCase c) : media(c.members, kMemberSize) {
    ArrayOptions create;
    create.level = c.level;
    create.chunk_size = kChunk;
    EXPECT_TRUE(create_array(media.members(), create));
    open(media.members());
    shadow = test::random_buffer(volume().size(), 1);
    EXPECT_TRUE(volume().write(0, shadow.span()));
  }
  void open(std::vector<Member*> members) {
    auto opened = Array::open(members);
    ASSERT_TRUE(opened) << opened.error().message;
    array = std::move(*opened);
  }
  Volume& volume() { return array->volume(); }

  void writer(std::atomic<bool>& stop, uint64_t seed, std::atomic<uint64_t>& writes) {
    test::write_randomly(volume(), shadow, shadow_mutex, stop, seed, writes);
  }
  void expect_data() {
    AlignedBuffer back(volume().size());
    ASSERT_TRUE(volume().read(0, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), shadow.data(), back.size()), 0);
  }
};

class ArrayRebuild : public testing::TestWithParam<LevelCase> {};

INSTANTIATE_TEST_SUITE_P(, ArrayRebuild, testing::ValuesIn(kLevels),
                         [](const testing::TestParamInfo<LevelCase>& info) {
                           return std::string(to_string(info.param.level));
                         });

// Member 0 fails; a new device is rebuilt in its place while a writer runs; then member 1
// fails too and every byte still reads right: the rebuilt device carries what member 0 held.
TEST_P(ArrayRebuild, ANewDeviceIsRebuiltWhileWritesGoOn) {
  Rebuilding r(GetParam());
  r.volume().fail_member(0, Error{EIO, "pulled"});
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 7, writes); });
  while (writes < 50) std::this_thread::yield();  // degraded writes first
  // Slow enough that many writes land behind the recovery point (they must reach the new
  // device) and ahead of it (the rebuild must bring them over).
  r.array->set_rebuild_speed(4 << 20, 4 << 20);
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  const RebuildProgress progress = r.array->wait_rebuild();
  stop = true;
  writer.join();
  EXPECT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(r.volume().active(0));
  EXPECT_EQ(progress.done, r.volume().geometry().stripes());
  EXPECT_GT(writes, 50u);
  r.expect_data();
  auto bad = r.volume().count_inconsistent_stripes(0, r.volume().geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u) << "parity (or the copies) disagree after the rebuild";
  EXPECT_EQ(r.array->superblock().member_states[0], MemberState::active);
  r.volume().fail_member(1, Error{EIO, "pulled too"});
  r.expect_data();
}

// Stopped halfway (close), the rebuild resumes at the next open from the checkpoint its
// device's superblock records, not from the start.
TEST_P(ArrayRebuild, AStoppedRebuildResumesFromItsCheckpoint) {
  Rebuilding r(GetParam());
  r.volume().fail_member(0, Error{EIO, "pulled"});
  const uint64_t stripes = r.volume().geometry().stripes();
  const uint64_t stripe_member_bytes = r.volume().geometry().chunk_size();
  // Slow enough to stop it in the middle: a few stripes a second.
  r.array->set_rebuild_speed(4 * stripe_member_bytes, 4 * stripe_member_bytes);
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  while (r.array->rebuild_progress().done < stripes / 8) std::this_thread::yield();
  ASSERT_TRUE(r.array->close());
  const uint64_t reached = r.array->rebuild_progress().done;
  r.array.reset();
  auto sb = read_superblock(r.spare);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(sb->member_states[0], MemberState::rebuilding);
  ASSERT_TRUE(sb->rebuilding());
  EXPECT_GT(sb->rebuild_checkpoint, 0u);
  EXPECT_LT(reached, stripes);

  std::vector<Member*> members = r.media.members();
  members[0] = &r.spare;
  r.open(members);
  EXPECT_TRUE(r.volume().recovering(0));
  const uint64_t resumed_at = r.volume().recovered(0);
  EXPECT_GT(resumed_at, 0u) << "resumed from the checkpoint, not from the start";
  EXPECT_LE(resumed_at, reached);
  r.array->set_rebuild_speed(0, 0);
  const RebuildProgress progress = r.array->wait_rebuild();
  EXPECT_FALSE(progress.error) << progress.error->message;
  EXPECT_LT(progress.bytes, stripes * stripe_member_bytes) << "not everything rebuilt again";
  EXPECT_TRUE(r.volume().active(0));
  r.expect_data();
  auto bad = r.volume().count_inconsistent_stripes(0, stripes);
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
}

// Pipelined: while one batch's rebuilt chunks are written to the new device, the next batch
// is read from the sources (the two are busy at once, as on devices they are independent),
// and a batch counts as in sync only once its write is done. Here the first batch's write and
// the second batch's reads are held: both are in flight together, and nothing is in sync yet.
TEST_P(ArrayRebuild, TheNextBatchIsReadWhileTheLastIsWritten) {
  Rebuilding r(GetParam());
  r.volume().fail_member(0, Error{EIO, "pulled"});
  const uint64_t data_offset = r.array->superblock().data_offset;
  // Volume::kRebuildBatchBytes of each member: its stripes, and where the next batch starts
  // on the members (at RAID10 a member holds only some of a batch's stripes).
  const uint64_t batch = (4 << 20) / kChunk;
  ASSERT_GT(r.volume().geometry().stripes(), batch) << "needs two batches";
  const uint64_t first_batch = r.volume().member_range(batch, batch).first;
  r.spare.hold(MemberOp::write, {data_offset, data_offset + 1});
  for (auto& source : r.media.faulty) {
    source->hold(MemberOp::read, {data_offset + first_batch, data_offset + kMemberSize});
  }
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  const auto both_held = [&] {
    return r.spare.held() > 0 && std::any_of(r.media.faulty.begin(), r.media.faulty.end(),
                                             [](auto& source) { return source->held() > 0; });
  };
  for (int i = 0; i < 10000 && !both_held(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool overlapped = both_held();
  EXPECT_TRUE(overlapped) << "the second batch was not read while the first was written";
  EXPECT_EQ(r.volume().recovered(0), 0u) << "in sync before its write was done";
  for (auto& source : r.media.faulty) source->release_held();
  r.spare.release_held();
  const RebuildProgress progress = r.array->wait_rebuild();
  EXPECT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(r.volume().active(0));
  auto bad = r.volume().count_inconsistent_stripes(0, r.volume().geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
  r.volume().fail_member(1, Error{EIO, "pulled too"});
  r.expect_data();
}

// The device being rebuilt fails while a batch's write is in flight, and another device
// is given the role at once: the first rebuild stops there, without counting the new
// device in sync anywhere (its own rebuild starts from 0), and the second completes.
TEST_P(ArrayRebuild, ARebuildWhoseDeviceLeavesNeverMovesTheNextDevicesPoint) {
  MemoryMember second_medium{"second", kMemberSize};  // outlives the array
  FaultyMember second{second_medium};
  Rebuilding r(GetParam());
  r.volume().fail_member(0, Error{EIO, "pulled"});
  const uint64_t data_offset = r.array->superblock().data_offset;
  r.spare.hold(MemberOp::write, {data_offset, data_offset + 1});
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  for (int i = 0; i < 10000 && r.spare.held() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(r.spare.held(), 1u);
  r.volume().fail_member(0, Error{EIO, "pulled again"});
  ASSERT_TRUE(r.array->rebuild(0, &second));
  EXPECT_EQ(r.volume().recovered(0), 0u);
  r.spare.release_held();
  const RebuildProgress progress = r.array->wait_rebuild();
  ASSERT_TRUE(progress.error) << "the first rebuild stopped short";
  EXPECT_NE(progress.error->message.find("left its rebuild"), std::string::npos)
      << progress.error->message;
  EXPECT_TRUE(r.volume().active(0));
  EXPECT_EQ(r.array->member_device(0), &second);
  auto bad = r.volume().count_inconsistent_stripes(0, r.volume().geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
  r.volume().fail_member(1, Error{EIO, "pulled too"});
  r.expect_data();
}

// The write of a later batch fails while the one before it is done: the rebuild fails, the
// device leaves the role, and every stripe lock is given back (writes everywhere go on).
TEST_P(ArrayRebuild, AFailedWriteOfALaterBatchLeavesNoStripeLocked) {
  Rebuilding r(GetParam());
  r.volume().fail_member(0, Error{EIO, "pulled"});
  const uint64_t data_offset = r.array->superblock().data_offset;
  const uint64_t second_batch = data_offset + (4 << 20);
  r.spare.fail_range(MemberOp::write, {second_batch, second_batch + kChunk});
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  const RebuildProgress progress = r.array->wait_rebuild();
  ASSERT_TRUE(progress.error);
  EXPECT_FALSE(r.volume().active(0));
  EXPECT_FALSE(r.volume().recovering(0));
  ASSERT_TRUE(r.volume().write(0, r.shadow.span()));  // would wait forever on a kept lock
  r.expect_data();
}

// RAID6 with two members failed rebuilds both, one after the other.
TEST(ArrayRebuildRaid6, BothFailedMembersAreRebuilt) {
  MemoryMember second_medium{"spare2", kMemberSize};  // outlives the array
  FaultyMember second{second_medium};
  Rebuilding r({RaidLevel::raid6, 5});
  r.volume().fail_member(1, Error{EIO, "pulled"});
  r.volume().fail_member(3, Error{EIO, "pulled"});
  ASSERT_TRUE(r.array->rebuild(1, &r.spare));
  ASSERT_TRUE(r.array->rebuild(3, &second));
  const RebuildProgress progress = r.array->wait_rebuild();
  EXPECT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(r.volume().active(1));
  EXPECT_TRUE(r.volume().active(3));
  auto bad = r.volume().count_inconsistent_stripes(0, r.volume().geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
  r.volume().fail_member(0, Error{EIO, "pulled"});
  r.volume().fail_member(2, Error{EIO, "pulled"});
  r.expect_data();
}

// RAID6 rebuilding member 0 when member 1 fails in the middle (a real I/O error, met by the
// rebuild's own reads and a writer's): as md does, the rebuild goes on from the members
// left, degraded twice, and completes; then member 1 is rebuilt too, and the array again
// survives losing any two members.
TEST(ArrayRebuildRaid6, ASecondMemberFailingMidRebuildIsHandled) {
  MemoryMember second_medium{"spare2", kMemberSize};
  FaultyMember second{second_medium};
  Rebuilding r({RaidLevel::raid6, 5});
  r.volume().fail_member(0, Error{EIO, "pulled"});
  const uint64_t stripes = r.volume().geometry().stripes();
  r.array->set_rebuild_speed(4 << 20, 4 << 20);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] { r.writer(stop, 5, writes); });
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  while (r.array->rebuild_progress().done < stripes / 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.media.faulty[1]->fail_after(0);
  r.array->set_rebuild_speed(64 << 20, 0);
  const RebuildProgress progress = r.array->wait_rebuild();
  stop = true;
  writer.join();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(r.volume().active(0)) << "rebuilt from the three members left";
  EXPECT_FALSE(r.volume().active(1));
  r.expect_data();
  ASSERT_TRUE(r.array->rebuild(1, &second));
  const RebuildProgress again = r.array->wait_rebuild();
  ASSERT_FALSE(again.error) << again.error->message;
  EXPECT_TRUE(r.volume().active(1));
  auto bad = r.volume().count_inconsistent_stripes(0, stripes);
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
  r.volume().fail_member(2, Error{EIO, "pulled"});
  r.volume().fail_member(4, Error{EIO, "pulled"});
  r.expect_data();
}

TEST(ArrayRebuildRefusals, NothingIsWrittenToADeviceThatIsRefused) {
  Rebuilding r({RaidLevel::raid5, 4});
  auto untouched = [&] {
    auto bytes = r.spare_medium.contents();
    return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
  };
  auto busy = r.array->rebuild(0, &r.spare);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, EBUSY) << busy.error().message;
  EXPECT_NE(busy.error().message.find("in service"), std::string::npos);
  r.volume().fail_member(0, Error{EIO, "pulled"});
  MemoryMember small_medium{"small", 1 << 20};
  auto small = r.array->rebuild(0, &small_medium);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, ENOSPC) << small.error().message;
  auto twice = r.array->rebuild(0, r.media.faulty[1].get());
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("member of this array"), std::string::npos);
  r.volume().fail_member(1, Error{EIO, "pulled"});  // now beyond RAID5's redundancy
  auto beyond = r.array->rebuild(0, &r.spare);
  ASSERT_FALSE(beyond);
  EXPECT_TRUE(untouched());
}

// The new device fails during its rebuild: it is recorded failed, the array goes on degraded.
TEST(ArrayRebuildFailures, ADeviceThatFailsItsRebuildIsRecordedFailed) {
  Rebuilding r({RaidLevel::raid5, 4});
  r.volume().fail_member(2, Error{EIO, "pulled"});
  // Its writes fail a little way into the data area.
  const uint64_t data_offset = r.array->superblock().data_offset;
  r.spare.fail_range(MemberOp::write, {data_offset + (2 << 20), data_offset + (2 << 20) + 4096});
  ASSERT_TRUE(r.array->rebuild(2, &r.spare));
  const RebuildProgress progress = r.array->wait_rebuild();
  ASSERT_TRUE(progress.error);
  EXPECT_FALSE(r.volume().active(2));
  EXPECT_FALSE(r.volume().recovering(2));
  // Recorded by the array's recorder thread; give it a moment.
  for (int i = 0; i < 1000 && r.array->superblock().member_states[2] != MemberState::faulty; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(r.array->superblock().member_states[2], MemberState::faulty);
  r.expect_data();
}

// The administrator's fail: recorded before it returns, refused when the array could not
// run without the member, and the events tell the story of the failure and the rebuild.
TEST(ArrayFailMember, IsRecordedAndTheRebuildIsAnnounced) {
  Rebuilding r({RaidLevel::raid5, 4});
  std::mutex mutex;
  std::vector<ArrayEvent> events;
  r.array->set_event_listener([&](const ArrayEvent& e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
  });
  ASSERT_TRUE(r.array->fail_member(1));
  EXPECT_FALSE(r.volume().active(1));
  EXPECT_EQ(r.array->superblock().member_states[1], MemberState::faulty) << "recorded already";
  auto again = r.array->fail_member(1);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("out of service already"), std::string::npos);
  auto last = r.array->fail_member(2);
  ASSERT_FALSE(last);
  EXPECT_EQ(last.error().code, EBUSY) << last.error().message;
  EXPECT_TRUE(r.volume().active(2)) << "a refused fail changes nothing";
  EXPECT_FALSE(r.array->fail_member(9));
  ASSERT_TRUE(r.array->rebuild(1, &r.spare));
  EXPECT_FALSE(r.array->wait_rebuild().error);
  EXPECT_TRUE(r.array->resume_rebuilds().empty()) << "nothing stopped short";
  r.expect_data();
  r.array->set_event_listener(nullptr);  // waits out a call in progress: `events` is stable
  std::lock_guard lock(mutex);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, ArrayEvent::Kind::member_failed);
  EXPECT_EQ(events[0].role, 1u);
  EXPECT_EQ(events[0].device, r.media.members()[1]->name());
  EXPECT_EQ(events[1].kind, ArrayEvent::Kind::rebuild_started);
  EXPECT_EQ(events[1].device, r.spare.name());
  EXPECT_EQ(events[2].kind, ArrayEvent::Kind::rebuild_finished);
  EXPECT_STREQ(to_string(events[2].kind), "rebuild-finished");
  // The rebuild's writes and the members' reads were counted.
  EXPECT_GE(r.spare.counters().written_bytes,
            r.volume().geometry().stripes() * r.volume().geometry().chunk_size());
  EXPECT_GT(r.media.members()[0]->counters().reads, 0u);
  EXPECT_EQ(r.media.members()[0]->counters().errors, 0u);
}

// A rebuild whose new device fails is announced as failed, and counted as the device's error.
TEST(ArrayFailMember, AFailedRebuildIsAnnounced) {
  Rebuilding r({RaidLevel::raid6, 5});
  std::mutex mutex;
  std::vector<ArrayEvent> events;
  r.array->set_event_listener([&](const ArrayEvent& e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
  });
  ASSERT_TRUE(r.array->fail_member(0));
  // Its writes fail a little way into the data area.
  const uint64_t data_offset = r.array->superblock().data_offset;
  r.spare.fail_range(MemberOp::write, {data_offset + (2 << 20), data_offset + (2 << 20) + 4096});
  ASSERT_TRUE(r.array->rebuild(0, &r.spare));
  ASSERT_TRUE(r.array->wait_rebuild().error);
  EXPECT_GT(r.spare.counters().errors, 0u);
  // The spare's failure is recorded (and announced) on the recorder thread: wait for it, then
  // stop listening before `events` goes.
  for (int i = 0; i < 1000 && r.array->superblock().member_states[0] != MemberState::faulty; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.array->set_event_listener(nullptr);
  std::lock_guard lock(mutex);
  ASSERT_GE(events.size(), 3u);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const ArrayEvent& e) {
    return e.kind == ArrayEvent::Kind::rebuild_failed && e.role == 0 && !e.detail.empty();
  }));
}

}  // namespace
}  // namespace stripefs
