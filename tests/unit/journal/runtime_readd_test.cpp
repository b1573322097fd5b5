// md's --re-add while the array is in use (Array::readd): a member that failed comes back
// and only what the write-intent bitmap recorded since is rebuilt on it, while a writer goes
// on — also into stripes above the recovery point that the bitmap did not hold when the
// re-add started. Checked the hard way: another member is then pulled and every byte must
// still read back.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "journal/array_bitmap.hpp"
#include "journal/write_intent_bitmap.hpp"
#include "raid/array.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMemberSize = 24 << 20;
constexpr uint64_t kRegion = 512 * 1024;

struct Case {
  RaidLevel level;
  unsigned members;
};

class RuntimeReadd : public testing::TestWithParam<Case> {};

TEST_P(RuntimeReadd, OnlyWhatTheBitmapRecordedIsRebuiltWhileWritesGoOn) {
  test::MemoryArray media(GetParam().members, kMemberSize);
  ArrayOptions create;
  create.level = GetParam().level;
  create.chunk_size = 64 * 1024;
  add_bitmap(create, kRegion, milliseconds(0));
  ASSERT_TRUE(create_array(media.members(), create));
  OpenOptions options;
  use_bitmap(options, milliseconds(0));
  auto opened = Array::open(media.members(), options);
  ASSERT_TRUE(opened) << opened.error().message;
  Array& array = **opened;
  Volume& volume = array.volume();
  const uint64_t size = volume.size();
  AlignedBuffer image = test::random_buffer(size, 3);
  ASSERT_TRUE(volume.write(0, image.span()));
  ASSERT_TRUE(volume.flush());
  // The initial fill's bits cleared, as the bitmap's cleaner does once regions go idle.
  auto* bitmap = static_cast<WriteIntentBitmap*>(array.write_intent());
  ASSERT_NE(bitmap, nullptr);
  ASSERT_TRUE(bitmap->clear_idle(milliseconds(0)));
  ASSERT_EQ(bitmap->dirty_regions(), 0u);

  ASSERT_TRUE(array.fail_member(1));
  std::mutex mutex;  // the image and the volume change together
  // Degraded writes in a few places: what member 1 misses.
  for (uint64_t at : {uint64_t{8192}, size / 2, size - 65536}) {
    AlignedBuffer update = test::random_buffer(4096, at);
    ASSERT_TRUE(volume.write(at, update.span()));
    std::memcpy(image.data() + at, update.data(), update.size());
  }
  // Slow, so the writer lands ahead of the recovery point and behind it.
  array.set_rebuild_speed(8 << 20, 8 << 20);
  ASSERT_TRUE(array.readd(1, media.members()[1]));
  // Once the re-add has begun: a burst of writes into regions that were clean then and that
  // it reaches later (it must find them dirty when it gets there, or the member keeps stale
  // chunks), and a writer behind the recovery point (its writes must reach the member).
  while (array.rebuild_progress().done == 0) std::this_thread::yield();
  std::mt19937_64 burst(5);
  const uint64_t window = size * 5 / 8 / 4096, window_blocks = size / 4 / 4096;
  for (int i = 0; i < 300; ++i) {
    const uint64_t at = (window + burst() % window_blocks) * 4096;
    AlignedBuffer data = test::random_buffer(4096, burst());
    ASSERT_TRUE(volume.write(at, data.span()));
    std::memcpy(image.data() + at, data.data(), data.size());
  }
  ASSERT_LT(array.rebuild_progress().done * 8, volume.geometry().stripes() * 5)
      << "the burst landed ahead of the recovery point";
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(11);
    while (!stop) {
      const uint64_t done = array.rebuild_progress().done;
      const uint64_t behind =
          std::max<uint64_t>(1, done * volume.geometry().stripe_data_size() / 4096);
      const uint64_t at = rng() % behind * 4096;
      AlignedBuffer data = test::random_buffer(4096, rng());
      std::lock_guard lock(mutex);
      ASSERT_TRUE(volume.write(at, data.span()));
      std::memcpy(image.data() + at, data.data(), data.size());
    }
  });
  const RebuildProgress progress = array.wait_rebuild();
  stop = true;
  writer.join();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_TRUE(volume.active(1));
  EXPECT_EQ(array.superblock().member_states[1], MemberState::active);
  const uint64_t member_bytes = volume.geometry().stripes() * volume.geometry().chunk_size();
  EXPECT_EQ(progress.bytes, member_bytes) << "every stripe brought in sync";
  EXPECT_GT(progress.written, 0u);
  EXPECT_LT(progress.written, member_bytes * 3 / 4) << "not the whole member";
  auto bad = volume.count_inconsistent_stripes(0, volume.geometry().stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 0u);
  AlignedBuffer read(size);
  ASSERT_TRUE(volume.read(0, read.span()));
  EXPECT_EQ(std::memcmp(read.data(), image.data(), size), 0);
  volume.fail_member(2, Error{EIO, "pulled to prove the re-added member right"});
  ASSERT_TRUE(volume.read(0, read.span()));
  EXPECT_EQ(std::memcmp(read.data(), image.data(), size), 0);
}

INSTANTIATE_TEST_SUITE_P(, RuntimeReadd,
                         testing::Values(Case{RaidLevel::raid1, 3}, Case{RaidLevel::raid10, 4},
                                         Case{RaidLevel::raid5, 4}, Case{RaidLevel::raid6, 5}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(to_string(info.param.level));
                         });

TEST(RuntimeReaddRefusals, NothingIsWrittenToADeviceThatIsRefused) {
  test::MemoryArray media(4, kMemberSize), other(4, kMemberSize);
  ArrayOptions create;
  create.level = RaidLevel::raid5;
  create.chunk_size = 64 * 1024;
  add_bitmap(create, kRegion, milliseconds(0));
  ASSERT_TRUE(create_array(media.members(), create));
  ASSERT_TRUE(create_array(other.members(), create));
  OpenOptions options;
  use_bitmap(options, milliseconds(0));
  auto opened = Array::open(media.members(), options);
  ASSERT_TRUE(opened) << opened.error().message;
  Array& array = **opened;
  auto busy = array.readd(1, media.members()[1]);
  ASSERT_FALSE(busy) << "role 1 is in service";
  ASSERT_TRUE(array.fail_member(1));
  auto wrong_role = array.readd(1, media.members()[2]);
  ASSERT_FALSE(wrong_role);
  auto foreign = array.readd(1, other.members()[1]);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("not a member of this array"), std::string::npos)
      << foreign.error().message;
  MemoryMember blank("blank", kMemberSize);
  EXPECT_FALSE(array.readd(1, &blank));
  EXPECT_EQ(read_superblock(*other.members()[1])->array_uuid,
            read_superblock(*other.members()[0])->array_uuid)
      << "the foreign device's superblock is untouched";
  EXPECT_FALSE(array.volume().active(1));
  EXPECT_FALSE(array.volume().recovering(1));
}

}  // namespace
}  // namespace stripefs
