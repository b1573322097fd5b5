#include "journal/write_intent_bitmap.hpp"

#include <gtest/gtest.h>

#include "journal/array_bitmap.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMemberSize = 8 << 20;
constexpr uint64_t kRegion = 256 * 1024;
constexpr uint64_t kDataOffset = 1 << 20;

struct BitmapArray {
  test::MemoryArray media;
  std::unique_ptr<Array> array;

  explicit BitmapArray(DeviceLimits limits = {}, unsigned members = 4)
      : media(members, kMemberSize, limits) {
    ArrayOptions create;
    create.level = RaidLevel::raid5;
    create.chunk_size = 64 * 1024;
    create.data_offset = kDataOffset;
    add_bitmap(create, kRegion, milliseconds(0));
    auto created = create_array(media.members(), create);
    EXPECT_TRUE(created) << created.error().message;
    open();
  }
  void open() {
    OpenOptions options;
    use_bitmap(options, milliseconds(0));
    auto opened = Array::open(media.members(), options);
    EXPECT_TRUE(opened) << opened.error().message;
    if (opened) array = std::move(*opened);
  }
  Volume& volume() { return array->volume(); }
  WriteIntentBitmap& bitmap() { return *static_cast<WriteIntentBitmap*>(array->write_intent()); }
  Superblock sb() { return array->superblock(); }
  void logging(bool on) {
    for (auto& m : media.faulty) {
      m->set_logging(on);
      m->take_log();
    }
  }
  bool is_bitmap_io(const LoggedIo& io) {
    return io.offset >= sb().bitmap_offset && io.offset < sb().bitmap_offset + sb().bitmap_size;
  }
};

void write(Volume& volume, uint64_t offset, uint64_t length, uint64_t seed) {
  AlignedBuffer data = test::random_buffer(length, seed);
  auto r = volume.write(offset, data.span());
  ASSERT_TRUE(r) << r.error().message;
}

TEST(WriteIntentBitmap, BitIsDurableOnEveryMemberBeforeTheData) {
  BitmapArray a;
  a.logging(true);
  write(a.volume(), 0, 4096, 1);
  for (auto& m : a.media.faulty) {
    SCOPED_TRACE(m->name());
    auto log = m->take_log();
    ASSERT_FALSE(log.empty());
    EXPECT_TRUE(a.is_bitmap_io(log.front())) << "first request must be the bitmap";
    EXPECT_EQ(log.front().op, MemberOp::write);
    EXPECT_TRUE(log.front().fua) << "the bit must be durable before the data";
    for (size_t i = 1; i < log.size(); ++i) EXPECT_FALSE(a.is_bitmap_io(log[i]));
  }
  // The region is hot now: no more bitmap I/O for writes into it.
  const auto before = a.bitmap().stats();
  write(a.volume(), 8192, 4096, 2);
  for (auto& m : a.media.faulty) {
    for (const LoggedIo& io : m->take_log()) EXPECT_FALSE(a.is_bitmap_io(io));
  }
  EXPECT_EQ(a.bitmap().stats().ready_at_once, before.ready_at_once + 1);
  EXPECT_EQ(a.bitmap().stats().bits_set, 1u);
}

// The md lesson: bitmap writes sized to the optimal I/O size and aligned to it (no
// device-side read-modify-write), never overrunning the bitmap area.
TEST(WriteIntentBitmap, WritesAreSizedAndAlignedToTheOptimalIoSize) {
  DeviceLimits limits;
  limits.logical_block = 512;
  limits.physical_block = 512;
  limits.optimal_io = 4096;
  for (uint32_t optimal : {4096u, 65536u}) {
    SCOPED_TRACE(optimal);
    limits.optimal_io = optimal;
    BitmapArray a(limits);
    const uint64_t area_begin = a.sb().bitmap_offset, area_end = area_begin + a.sb().bitmap_size;
    a.logging(true);
    // Touch regions across the whole volume so several bitmap units may change.
    const uint64_t stride = a.volume().geometry().stripe_data_size() * (kRegion / (64 * 1024));
    for (uint64_t at = 0; at + 4096 <= a.volume().size(); at += stride)
      write(a.volume(), at, 4096, at);
    size_t bitmap_writes = 0;
    for (auto& m : a.media.faulty) {
      for (const LoggedIo& io : m->take_log()) {
        if (!a.is_bitmap_io(io)) {
          EXPECT_GE(io.offset, kDataOffset) << "only data I/O may lie outside the bitmap area";
          continue;
        }
        ++bitmap_writes;
        EXPECT_GE(io.offset, area_begin);
        EXPECT_LE(io.offset + io.length, area_end) << "overran the bitmap area";
        const uint64_t unit_start = io.offset / optimal * optimal;
        EXPECT_EQ(io.offset, std::max(unit_start, area_begin));
        EXPECT_EQ(io.offset + io.length, std::min(unit_start + optimal, area_end));
        EXPECT_EQ(io.length % 512, 0u);
      }
    }
    EXPECT_GT(bitmap_writes, 0u);
    if (optimal == 4096) {
      EXPECT_EQ(a.bitmap().write_unit(), 4096u);
    }
  }
}

TEST(WriteIntentBitmap, IdleRegionsAreClearedAfterAFlushAndBusyOnesKept) {
  BitmapArray a;
  write(a.volume(), 0, 4096, 1);
  const uint64_t far = a.volume().size() - 65536;
  write(a.volume(), far, 4096, 2);
  EXPECT_EQ(a.bitmap().dirty_regions(), 2u);
  // A write still in progress in a third region keeps its bit.
  const uint64_t busy = 3 * kRegion;
  bool ready = false;
  a.bitmap().begin_write(busy, busy + 4096, [&] { ready = true; });
  EXPECT_TRUE(ready);
  a.logging(true);
  auto cleared = a.bitmap().clear_idle(milliseconds(0));
  ASSERT_TRUE(cleared) << cleared.error().message;
  EXPECT_EQ(*cleared, 2u);
  EXPECT_EQ(a.bitmap().dirty_regions(), 1u);
  for (auto& m : a.media.faulty) {
    auto log = m->take_log();
    ASSERT_GE(log.size(), 2u);
    EXPECT_EQ(log.front().op, MemberOp::flush) << "data must be durable before its bit goes";
    EXPECT_TRUE(a.is_bitmap_io(log.back()));
  }
  // On disk: only the busy region's bit remains.
  AlignedBuffer bits(4096);
  ASSERT_TRUE(
      member_read(*a.media.faulty[2], a.sb().bitmap_offset + kBitmapHeaderSize, bits.span()));
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint8_t expect = i == busy / kRegion / 8 ? uint8_t(1u << (busy / kRegion % 8)) : 0;
    ASSERT_EQ(static_cast<uint8_t>(bits.data()[i]), expect) << "byte " << i;
  }
  a.bitmap().end_write(busy, busy + 4096);
  EXPECT_EQ(*a.bitmap().clear_idle(milliseconds(0)), 1u);
  EXPECT_EQ(a.bitmap().dirty_regions(), 0u);
}

// While degraded, bits stay: they are the record of what the missing member missed.
TEST(WriteIntentBitmap, BitsAreKeptWhileAMemberIsMissing) {
  BitmapArray a;
  a.volume().fail_member(2, Error{EIO, "pulled"});
  write(a.volume(), 0, 4096, 1);
  write(a.volume(), a.volume().size() - 65536, 4096, 2);
  EXPECT_EQ(a.bitmap().dirty_regions(), 2u);
  EXPECT_EQ(*a.bitmap().clear_idle(milliseconds(0)), 0u);
  EXPECT_EQ(a.bitmap().dirty_regions(), 2u);
}

// After a crash only the regions whose bits were set are resynced: an inconsistency planted
// elsewhere stays (it could not have been caused by an interrupted write).
TEST(WriteIntentBitmap, CrashResyncsOnlyTheRecordedRegions) {
  BitmapArray a;
  const uint64_t stripe = a.volume().geometry().stripe_data_size();
  const uint64_t stripes_per_region = kRegion / (64 * 1024);
  write(a.volume(), 0, 4096, 1);                                // region 0
  write(a.volume(), 5 * stripes_per_region * stripe, 4096, 2);  // region 5
  const Superblock sb = a.sb();
  ASSERT_TRUE(a.array->close());
  a.array.reset();
  // The crash: superblocks still say running, and parity is wrong in region 0 (the write
  // was torn) and in region 9 (never written: silent damage, for scrub, not resync).
  for (auto& m : a.media.faulty) {
    auto s = read_superblock(*m);
    s->set_clean(false);
    ++s->events;
    ASSERT_TRUE(write_superblock(*m, *s));
  }
  auto geometry = Geometry::create(sb.level, 4, sb.chunk_size, sb.data_size);
  for (uint64_t s : {uint64_t{0}, 9 * stripes_per_region}) {
    a.media.media[geometry->p_member(s)]->contents()[sb.data_offset + s * sb.chunk_size] ^=
        std::byte{1};
  }
  a.open();
  const ResyncProgress progress = a.array->wait_resync();
  EXPECT_TRUE(progress.finished);
  EXPECT_EQ(progress.total, 2 * stripes_per_region) << "regions 0 and 5 only";
  EXPECT_EQ(progress.repaired, 1u);
  auto bad = a.volume().count_inconsistent_stripes(0, geometry->stripes());
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 1u) << "region 9 was not recorded, so not resynced";
  // Resynced regions are ordinary dirty regions now: clearable once idle.
  EXPECT_EQ(*a.bitmap().clear_idle(milliseconds(0)), 2u);
}

// After a clean shutdown set bits need no resync; they are cleared like any idle region.
TEST(WriteIntentBitmap, BitsLeftByACleanShutdownAreClearableNotResynced) {
  BitmapArray a;
  write(a.volume(), 0, 4096, 1);
  ASSERT_TRUE(a.array->close());
  a.array.reset();
  a.open();
  EXPECT_EQ(a.array->wait_resync().total, 0u);
  EXPECT_TRUE(a.bitmap().ranges_to_resync().empty());
  EXPECT_EQ(a.bitmap().dirty_regions(), 1u);
  EXPECT_EQ(*a.bitmap().clear_idle(milliseconds(0)), 1u);
}

TEST(WriteIntentBitmap, DamagedHeaderIsRefusedNamingMemberAndField) {
  BitmapArray a;
  const Superblock sb = a.sb();
  ASSERT_TRUE(a.array->close());
  a.array.reset();
  a.media.media[1]->contents()[sb.bitmap_offset + 20] ^= std::byte{4};
  OpenOptions options;
  use_bitmap(options, milliseconds(0));
  auto refused = Array::open(a.media.members(), options);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("mem1"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("checksum"), std::string::npos) << refused.error().message;
}

// The repair path: with force, a damaged header is rebuilt. After an unclean shutdown the
// rebuilt bitmap is stale, so every stripe is resynced; after a clean one, none.
TEST(WriteIntentBitmap, ForceRebuildsADamagedBitmap) {
  for (bool clean : {false, true}) {
    SCOPED_TRACE(clean ? "clean" : "dirty");
    BitmapArray a;
    write(a.volume(), 0, 4096, 1);
    const Superblock sb = a.sb();
    ASSERT_TRUE(a.array->close());
    a.array.reset();
    if (!clean) {
      for (auto& m : a.media.faulty) {
        auto s = read_superblock(*m);
        s->set_clean(false);
        ASSERT_TRUE(write_superblock(*m, *s));
      }
    }
    a.media.media[1]->contents()[sb.bitmap_offset + 20] ^= std::byte{4};
    OpenOptions options;
    use_bitmap(options, milliseconds(0));
    auto refused = Array::open(a.media.members(), options);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("force rebuilds"), std::string::npos);
    options.force = true;
    auto repaired = Array::open(a.media.members(), options);
    ASSERT_TRUE(repaired) << repaired.error().message;
    const ResyncProgress progress = (*repaired)->wait_resync();
    EXPECT_EQ(progress.total, clean ? 0u : (*repaired)->volume().geometry().stripes());
    static_cast<WriteIntentBitmap*>((*repaired)->write_intent())->settle();
    auto header = read_bitmap_header(*a.media.faulty[1], sb.bitmap_offset, sb.array_uuid);
    ASSERT_TRUE(header) << "the header is whole again";
    EXPECT_FALSE(header->stale()) << "after the full resync the bitmap is trusted again";
    ASSERT_TRUE((*repaired)->close());
    repaired->reset();
    // The next crash resyncs only what the bitmap recorded (nothing was written since).
    for (auto& m : a.media.faulty) {
      auto s = read_superblock(*m);
      s->set_clean(false);
      ASSERT_TRUE(write_superblock(*m, *s));
    }
    OpenOptions again;
    use_bitmap(again, milliseconds(0));
    auto reopened = Array::open(a.media.members(), again);
    ASSERT_TRUE(reopened) << reopened.error().message;
    EXPECT_EQ((*reopened)->wait_resync().total, 0u);
  }
}

TEST(WriteIntentBitmap, RefusesABitmapThatDoesNotFitBeforeTheData) {
  test::MemoryArray media(4, kMemberSize);
  ArrayOptions create;
  create.chunk_size = 64 * 1024;
  create.data_offset = 12288;  // 4 KiB after the area start: no room for header and bits
  add_bitmap(create, 4096, milliseconds(0));
  auto refused = create_array(media.members(), create);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("bitmap"), std::string::npos) << refused.error().message;
  for (auto& m : media.media) {
    auto sb = m->contents().subspan(kSuperblockOffset, 2 * kSuperblockSize);
    EXPECT_TRUE(std::all_of(sb.begin(), sb.end(), [](std::byte b) { return b == std::byte{0}; }))
        << "nothing may be written";
  }
}

// An array (RAID5 unless said) with a bitmap on `media`; the options that open it with its
// bitmap.
OpenOptions bitmap_array(test::MemoryArray& media, RaidLevel level = RaidLevel::raid5) {
  ArrayOptions create;
  create.level = level;
  create.chunk_size = 64 * 1024;
  add_bitmap(create, kRegion, milliseconds(0));
  auto created = create_array(media.members(), create);
  EXPECT_TRUE(created) << created.error().message;
  OpenOptions options;
  use_bitmap(options, milliseconds(0));
  return options;
}

// md's re-add: a member that was away while the array ran degraded comes back, and only
// the regions the bitmap recorded since are rebuilt on it. Checked the hard way: with
// another member then removed, every byte must still read back, so the returning member's
// chunks (data and parity) must be right.
void check_readd(RaidLevel level, unsigned members, unsigned away) {
  SCOPED_TRACE(testing::Message() << to_string(level) << ", member " << away << " away");
  test::MemoryArray media(members, kMemberSize);
  ArrayOptions create;
  create.level = level;
  create.chunk_size = 64 * 1024;
  add_bitmap(create, kRegion, milliseconds(0));
  ASSERT_TRUE(create_array(media.members(), create));
  OpenOptions options;
  use_bitmap(options, milliseconds(0));
  uint64_t size = 0;
  AlignedBuffer image;
  {
    auto opened = Array::open(media.members(), options);
    ASSERT_TRUE(opened) << opened.error().message;
    size = (*opened)->volume().size();
    image = test::random_buffer(size, 7);
    ASSERT_TRUE((*opened)->volume().write(0, image.span()));
    ASSERT_TRUE((*opened)->volume().flush());
    auto* bitmap = static_cast<WriteIntentBitmap*>((*opened)->write_intent());
    ASSERT_TRUE(bitmap->clear_idle(milliseconds(0)));
    ASSERT_EQ(bitmap->dirty_regions(), 0u);
    ASSERT_TRUE((*opened)->close());
  }
  std::vector<Member*> without = media.members();
  without.erase(without.begin() + away);
  {
    auto degraded = Array::open(without, options);
    ASSERT_TRUE(degraded) << degraded.error().message;
    for (uint64_t at : {uint64_t{4096}, size / 2 + 8192, size - 65536}) {
      AlignedBuffer update = test::random_buffer(3 * 4096, at);
      ASSERT_TRUE((*degraded)->volume().write(at, update.span()));
      std::memcpy(image.data() + at, update.data(), update.size());
    }
    ASSERT_TRUE((*degraded)->close());
  }
  auto back = Array::open(media.members(), options);
  ASSERT_TRUE(back) << back.error().message;
  Volume& volume = (*back)->volume();
  EXPECT_TRUE(volume.active(away));
  ASSERT_FALSE((*back)->notes().empty());
  const std::string& note = (*back)->notes().back();
  EXPECT_NE(note.find("re-added"), std::string::npos) << note;
  const uint64_t stripes = volume.geometry().stripes();
  uint64_t rebuilt = 0;
  ASSERT_EQ(std::sscanf(note.substr(note.find("re-added, ")).c_str(), "re-added, %lu", &rebuilt), 1)
      << note;
  EXPECT_GT(rebuilt, 0u);
  EXPECT_LT(rebuilt, stripes / 4) << "only the recorded regions, not the whole member";
  EXPECT_EQ((*back)->superblock().member_states[away], MemberState::active);
  auto inconsistent = volume.count_inconsistent_stripes(0, stripes);
  ASSERT_TRUE(inconsistent);
  EXPECT_EQ(*inconsistent, 0u);
  AlignedBuffer read(size);
  ASSERT_TRUE(volume.read(0, read.span()));
  EXPECT_EQ(std::memcmp(read.data(), image.data(), size), 0);
  const unsigned other = (away + 1) % members;
  volume.fail_member(other, Error{EIO, "pulled to prove the re-added member right"});
  ASSERT_TRUE(volume.read(0, read.span()));
  EXPECT_EQ(std::memcmp(read.data(), image.data(), size), 0);
  ASSERT_TRUE((*back)->close());
  auto own = read_superblock(*media.faulty[away]);
  auto peer = read_superblock(*media.faulty[(away + 2) % members]);
  ASSERT_TRUE(own && peer);
  EXPECT_EQ(own->events, peer->events) << "the re-added member is current again";
}

TEST(WriteIntentBitmap, AMemberThatWasAwayIsReAddedAndRebuiltOnlyWhereRecorded) {
  check_readd(RaidLevel::raid5, 4, 0);
  check_readd(RaidLevel::raid5, 4, 3);
  check_readd(RaidLevel::raid6, 5, 2);
  check_readd(RaidLevel::raid1, 2, 1);
  check_readd(RaidLevel::raid10, 4, 1);
}

// md's events_cleared: bits cleared after a member left no longer say what it missed. A
// member whose superblock is older than the last clearing is rebuilt whole.
TEST(WriteIntentBitmap, AMemberOlderThanTheLastClearingIsRebuiltWhole) {
  test::MemoryArray media(4, kMemberSize);
  const OpenOptions options = bitmap_array(media);
  ASSERT_TRUE(Array::open(media.members(), options));  // opened and closed: events move on
  const std::vector<std::byte> old_member(media.media[3]->contents().begin(),
                                          media.media[3]->contents().end());
  AlignedBuffer image;
  uint64_t stripes = 0;
  {
    auto opened = Array::open(media.members(), options);
    ASSERT_TRUE(opened) << opened.error().message;
    image = test::random_buffer((*opened)->volume().size(), 9);
    stripes = (*opened)->volume().geometry().stripes();
    ASSERT_TRUE((*opened)->volume().write(0, image.span()));
    auto* bitmap = static_cast<WriteIntentBitmap*>((*opened)->write_intent());
    ASSERT_GT(*bitmap->clear_idle(milliseconds(0)), 0u);
    EXPECT_GT(bitmap->header().events_cleared, 0u);
    ASSERT_TRUE((*opened)->close());
  }
  // Member 3 as it was before all that: behind, and behind the clearing too.
  std::copy(old_member.begin(), old_member.end(), media.media[3]->contents().begin());
  auto back = Array::open(media.members(), options);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE((*back)->volume().active(3));
  const std::string& note = (*back)->notes().back();
  EXPECT_NE(note.find(fmt::format("re-added, {} stripes", stripes)), std::string::npos) << note;
  (*back)->volume().fail_member(0, Error{EIO, "pulled"});
  AlignedBuffer read(image.size());
  ASSERT_TRUE((*back)->volume().read(0, read.span()));
  EXPECT_EQ(std::memcmp(read.data(), image.data(), image.size()), 0);
}

// Two mirrors each run alone: the one behind is no returning member but the other half of
// a split brain, however far apart their events are. Re-adding it would drop its writes
// silently: it is kept out, with a note.
TEST(WriteIntentBitmap, SplitBrainIsKeptOutNotReAdded) {
  test::MemoryArray media(2, kMemberSize);
  const OpenOptions options = bitmap_array(media, RaidLevel::raid1);
  for (int run = 0; run < 3; ++run) {  // member 0 alone, three times: far ahead
    auto alone = Array::open(std::vector<Member*>{media.faulty[0].get()}, options);
    ASSERT_TRUE(alone) << alone.error().message;
  }
  {
    auto alone = Array::open(std::vector<Member*>{media.faulty[1].get()}, options);
    ASSERT_TRUE(alone) << alone.error().message;
    ASSERT_TRUE((*alone)->volume().write(0, test::random_buffer(8192, 3).span()));
  }
  auto both = Array::open(media.members(), options);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_FALSE((*both)->volume().active(1)) << "kept out, not rebuilt over";
  ASSERT_FALSE((*both)->notes().empty());
  EXPECT_NE((*both)->notes().back().find("ran without member"), std::string::npos)
      << (*both)->notes().back();
}

// A linear history is no split brain: role 0 away (run 1), then role 1 away while role 0
// comes back (run 2). Role 1's superblock still says role 0 is missing, yet it ran with
// role 2, which ran on: it is re-added.
TEST(WriteIntentBitmap, AMemberAwayAfterAnotherReturnedIsReAdded) {
  test::MemoryArray media(3, kMemberSize);
  const OpenOptions options = bitmap_array(media, RaidLevel::raid1);
  Member* m0 = media.faulty[0].get();
  Member* m1 = media.faulty[1].get();
  Member* m2 = media.faulty[2].get();
  ASSERT_TRUE(Array::open(std::vector<Member*>{m1, m2}, options));
  ASSERT_TRUE(Array::open(std::vector<Member*>{m0, m2}, options));
  auto all = Array::open(std::vector<Member*>{m0, m1, m2}, options);
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_TRUE((*all)->volume().active(1));
}

// A run of the array without member `away`, writing `bytes` at the start: it misses them.
void run_without(test::MemoryArray& media, const OpenOptions& options, unsigned away,
                 size_t bytes) {
  std::vector<Member*> without = media.members();
  without.erase(without.begin() + away);
  auto degraded = Array::open(without, options);
  ASSERT_TRUE(degraded) << degraded.error().message;
  ASSERT_TRUE((*degraded)->volume().write(0, test::random_buffer(bytes, away).span()));
}

// A returning member that cannot take its superblock stays out, recorded faulty; the
// array starts without it.
TEST(WriteIntentBitmap, AReAddWhoseSuperblockWriteFailsLeavesTheMemberOut) {
  test::MemoryArray media(4, kMemberSize);
  const OpenOptions options = bitmap_array(media);
  ASSERT_NO_FATAL_FAILURE(run_without(media, options, 1, 8192));
  media.faulty[1]->fail_range(MemberOp::write,
                              {kSuperblockOffset, kSuperblockOffset + kSuperblockSize});
  auto back = Array::open(media.members(), options);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_FALSE((*back)->volume().active(1));
  EXPECT_EQ((*back)->superblock().member_states[1], MemberState::faulty);
  EXPECT_NE((*back)->notes().back().find("could not take its superblock"), std::string::npos)
      << (*back)->notes().back();
  EXPECT_TRUE((*back)->volume().write(65536, test::random_buffer(8192, 5).span()));
  ASSERT_TRUE((*back)->close());
  auto peer = read_superblock(*media.faulty[0]);
  ASSERT_TRUE(peer);
  EXPECT_EQ(peer->member_states[1], MemberState::faulty);
}

// A returning member that refuses the rebuild's writes is recorded failed: the next mount
// does not try it again.
TEST(WriteIntentBitmap, AReturningMemberThatFailsItsRebuildIsRecordedFailed) {
  test::MemoryArray media(4, kMemberSize);
  const OpenOptions options = bitmap_array(media);
  ASSERT_NO_FATAL_FAILURE(run_without(media, options, 2, 256 * 1024));
  const uint64_t data_offset = read_superblock(*media.faulty[0])->data_offset;
  media.faulty[2]->fail_range(MemberOp::write, {data_offset, kMemberSize});
  {
    auto back = Array::open(media.members(), options);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_FALSE((*back)->volume().active(2));
    EXPECT_NE((*back)->notes().back().find("re-adding it failed (recorded failed)"),
              std::string::npos)
        << (*back)->notes().back();
    EXPECT_EQ((*back)->superblock().member_states[2], MemberState::faulty);
  }
  media.faulty[2]->heal();
  auto again = Array::open(media.members(), options);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE((*again)->volume().active(2)) << "recorded failed: not tried again";
}

// A member that failed (an I/O error, recorded faulty) is not re-added: it may be broken.
// Nor is any member of an array without a bitmap: nothing says what it missed.
TEST(WriteIntentBitmap, FailedMembersAndArraysWithoutBitmapDoNotReAdd) {
  for (bool with_bitmap : {true, false}) {
    SCOPED_TRACE(with_bitmap ? "failed member" : "no bitmap");
    test::MemoryArray media(4, kMemberSize);
    ArrayOptions create;
    create.chunk_size = 64 * 1024;
    if (with_bitmap) add_bitmap(create, kRegion, milliseconds(0));
    ASSERT_TRUE(create_array(media.members(), create));
    OpenOptions options;
    if (with_bitmap) use_bitmap(options, milliseconds(0));
    {
      auto opened = Array::open(media.members(), options);
      ASSERT_TRUE(opened) << opened.error().message;
      if (with_bitmap) {
        (*opened)->volume().fail_member(2, Error{EIO, "media error"});
        ASSERT_TRUE((*opened)->volume().write(0, test::random_buffer(8192, 1).span()));
      }
      ASSERT_TRUE((*opened)->close());
    }
    if (!with_bitmap) {
      std::vector<Member*> without = media.members();
      without.erase(without.begin() + 2);
      auto degraded = Array::open(without, options);
      ASSERT_TRUE(degraded) << degraded.error().message;
      ASSERT_TRUE((*degraded)->volume().write(0, test::random_buffer(8192, 2).span()));
      ASSERT_TRUE((*degraded)->close());
    }
    auto back = Array::open(media.members(), options);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_FALSE((*back)->volume().active(2));
    ASSERT_EQ((*back)->notes().size(), 1u);
    EXPECT_NE((*back)->notes()[0].find("kept out"), std::string::npos) << (*back)->notes()[0];
  }
}

}  // namespace
}  // namespace stripefs
