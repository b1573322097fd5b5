// A hot replace cut short by a power cut (PowerCutMember under every device, the new one
// too) while a writer runs, at every redundant level (on parity levels the write-hole
// journal's replay rewrites much of what the cut tore; without it, the bitmap alone tells): the
// next open resumes the copy from the new device's checkpoint, copies again what the cut may have
// torn between the two devices below it, and the new device ends up a true copy of the old: byte
// for byte over the data area, and consistent with the other members.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/open_array.hpp"
#include "raid/array.hpp"
#include "raid/memory_member.hpp"
#include "raid/power_cut_member.hpp"
#include "unit/raid/shadow_writer.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMemberSize = 8 << 20;
constexpr uint32_t kChunk = 64 * 1024;

struct Case {
  RaidLevel level;
  unsigned members;
  bool journal = true;  // parity levels: the write-hole journal on the members
};

OpenOptions options() {
  OpenOptions o = open_options(ArraySetup{.bitmap_clear_delay = milliseconds(20),
                                          .journal_idle_checkpoint = milliseconds(50)});
  o.checkpoint_every = milliseconds(100);
  return o;
}

// Writes 4 KiB blocks and whole stripes at random until `stop` or the first error (the cut).
void write_until_cut(Volume& volume, const std::atomic<bool>& stop, uint64_t seed,
                     std::atomic<uint64_t>& writes) {
  std::mt19937_64 rng(seed);
  while (!stop.load()) {
    auto [at, data] = test::random_write(volume, rng);
    if (!volume.write(at, data.span())) return;
    ++writes;
  }
}

class ReplaceCrash : public testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(, ReplaceCrash,
                         testing::Values(Case{RaidLevel::raid1, 2}, Case{RaidLevel::raid10, 4},
                                         Case{RaidLevel::raid5, 4}, Case{RaidLevel::raid6, 5},
                                         Case{RaidLevel::raid5, 4, false}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(to_string(info.param.level)) +
                                  (info.param.journal ? "" : "_without_journal");
                         });

TEST_P(ReplaceCrash, APowerCutMidCopyResumesAndTheCopyIsTrue) {
  const Case c = GetParam();
  std::vector<std::unique_ptr<MemoryMember>> media;  // the last is the new device
  for (unsigned i = 0; i <= c.members; ++i) {
    media.push_back(std::make_unique<MemoryMember>(
        i < c.members ? "mem" + std::to_string(i) : std::string("new"), kMemberSize));
  }
  std::vector<std::unique_ptr<PowerCutMember>> powered;
  std::vector<Member*> members;
  for (auto& m : media) powered.push_back(std::make_unique<PowerCutMember>(*m));
  for (unsigned i = 0; i < c.members; ++i) members.push_back(powered[i].get());
  ArrayOptions create;
  create.level = c.level;
  create.chunk_size = kChunk;
  add_bitmap(create, 256 * 1024, milliseconds(20));
  if (c.journal && (c.level == RaidLevel::raid5 || c.level == RaidLevel::raid6)) {
    add_member_journal(create, 256);
  }
  auto made = create_array(members, create);
  ASSERT_TRUE(made) << made.error().message;
  Superblock sb = *made;

  {
    auto opened = Array::open(members, options());
    ASSERT_TRUE(opened) << opened.error().message;
    std::unique_ptr<Array> array = std::move(*opened);
    AlignedBuffer filled = test::random_buffer(array->volume().size(), 5);
    ASSERT_TRUE(array->volume().write(0, filled.span()));
    ASSERT_TRUE(array->volume().flush());
    array->set_rebuild_speed(4 << 20, 4 << 20);
    ASSERT_TRUE(array->replace(0, powered[c.members].get()));
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> writes{0};
    std::thread writer([&] { write_until_cut(array->volume(), stop, 29, writes); });
    // Past a checkpoint or two, with writes behind the copy point and ahead of it.
    for (int i = 0; i < 4000 && array->rebuild_progress().done < kMemberSize / 3; ++i) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    // The power goes, on every device at once, with writes in the caches (a flush may have
    // just emptied them); a quarter of what was not flushed survives.
    const auto in_caches = [&] {
      size_t n = 0;
      for (auto& p : powered) n += p->volatile_writes();
      return n;
    };
    // Counted again once frozen (a flush between the count and the freeze would leave the
    // cut nothing to lose, and the test nothing to prove): too few, and the power stays.
    for (int attempt = 1;; ++attempt) {
      for (int i = 0; i < 1000000 && in_caches() < 8; ++i) std::this_thread::yield();
      for (auto& p : powered) p->freeze();
      if (in_caches() >= 8 || attempt == 100) break;
      for (auto& p : powered) p->thaw();
    }
    const RebuildProgress at_cut = array->rebuild_progress();
    EXPECT_LT(at_cut.done, at_cut.total) << "the copy ended before the cut";
    size_t undone = 0;
    for (size_t i = 0; i < powered.size(); ++i) undone += powered[i]->power_off(0.25, 31 + i);
    for (auto& p : powered) p->release_held();
    writer.join();
    EXPECT_GT(writes.load(), 50u);
    EXPECT_GT(undone, 0u) << "the cut lost nothing: the test proves nothing";
    (void)array->close();
  }

  // Power back: the devices as the cut left them.
  members.clear();
  for (auto& m : media) members.push_back(m.get());
  OpenOptions slow = options();
  slow.speed_min = slow.speed_max = 1 << 20;  // the resync ends before the copy does
  auto opened = Array::open(members, slow);
  ASSERT_TRUE(opened) << opened.error().message;
  std::unique_ptr<Array> array = std::move(*opened);
  ASSERT_EQ(array->replacement(0), media[c.members].get())
      << testing::PrintToString(array->notes());
  const ResyncProgress resync = array->wait_resync();
  ASSERT_FALSE(resync.error) << resync.error->message;
  array->set_rebuild_speed(256 << 20, 0);
  const RebuildProgress progress = array->wait_rebuild();
  ASSERT_FALSE(progress.error) << progress.error->message;
  EXPECT_LT(progress.bytes, progress.total) << "resumed, not started over";
  ASSERT_EQ(array->member_device(0), media[c.members].get());
  auto bad = array->volume().count_inconsistent_stripes(0, array->volume().geometry().stripes());
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_EQ(*bad, 0u) << "the new device disagrees with the other members";
  const auto& old_bytes = media[0]->contents();
  const auto& new_bytes = media[c.members]->contents();
  uint64_t differ = 0;
  for (uint64_t at = sb.data_offset; at < sb.data_offset + sb.data_size; at += 4096) {
    differ += std::memcmp(old_bytes.data() + at, new_bytes.data() + at, 4096) != 0;
  }
  EXPECT_EQ(differ, 0u) << "4 KiB blocks of the data area the copy got wrong";
  ASSERT_TRUE(array->close());
}

}  // namespace
}  // namespace stripefs
