// The write-hole journal kept on the members themselves (the default for RAID5/6): an area
// before the data, mirrored on parity_chunks + 1 members, so it outlives every failure the
// level survives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/journal.hpp"
#include "journal/mirrored_area.hpp"
#include "journal/open_array.hpp"
#include "journal/stripe_journal.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMemberSize = 16 << 20;
constexpr uint32_t kChunk = 64 * 1024;
constexpr uint64_t kJournalBlocks = 1024;  // 4 MiB

struct MemberJournalArray {
  test::MemoryArray media;
  Superblock created;

  explicit MemberJournalArray(RaidLevel level = RaidLevel::raid5, unsigned members = 4)
      : media(members, kMemberSize) {
    ArrayOptions create;
    create.level = level;
    create.chunk_size = kChunk;
    add_bitmap(create, 0, milliseconds(0));
    add_member_journal(create, kJournalBlocks);
    auto made = create_array(media.members(), create);
    EXPECT_TRUE(made) << made.error().message;
    if (made) created = *made;
  }
  // The journal is checkpointed only when asked: the crash images these tests take after a
  // logged write must still hold its record (a periodic checkpoint in between would release
  // it, and the test would fail one run in many).
  OpenOptions options(bool force = false) const {
    return open_options(ArraySetup{.force = force,
                                   .bitmap_clear_delay = milliseconds(0),
                                   .journal_idle_checkpoint = std::chrono::hours(1)});
  }
  std::span<std::byte> area(unsigned role) {
    return media.media[role]->contents().subspan(created.journal_offset, created.journal_size);
  }
  bool copies_equal(unsigned a, unsigned b) {
    return std::equal(area(a).begin(), area(a).end(), area(b).begin());
  }
  // A crash: every member's superblock says the array was running.
  void mark_unclean() {
    for (auto& m : media.faulty) {
      auto s = read_superblock(*m);
      ASSERT_TRUE(s) << s.error().message;
      s->set_clean(false);
      ASSERT_TRUE(write_superblock(*m, *s));
    }
  }
  using Image = std::vector<std::vector<std::byte>>;
  Image image() {
    Image out;
    for (auto& m : media.media) out.emplace_back(m->contents().begin(), m->contents().end());
    return out;
  }
  void restore(const Image& image) {
    for (size_t i = 0; i < image.size(); ++i) {
      std::copy(image[i].begin(), image[i].end(), media.media[i]->contents().begin());
    }
  }
};

TEST(MemberJournal, LivesBeforeTheDataOnTheFirstMembers) {
  MemberJournalArray a;
  const Superblock& sb = a.created;
  EXPECT_EQ(sb.journal_offset, kMemberJournalOffset);
  EXPECT_EQ(sb.journal_size, kJournalBlocks * kJournalBlockSize);
  EXPECT_TRUE(is_zero(sb.journal_device_uuid));
  EXPECT_EQ(sb.data_offset, kMemberJournalOffset + (4u << 20)) << "the data moved past it";
  EXPECT_LE(sb.bitmap_offset + sb.bitmap_size, sb.journal_offset);
  // RAID5: two copies (roles 0 and 1), each a valid journal; the other members hold none.
  for (unsigned role = 0; role < 4; ++role) {
    MirroredArea one({{role, a.media.faulty[role].get()}}, sb.journal_offset, sb.journal_size);
    EXPECT_EQ(bool(Journal::open(one, 0, sb.array_uuid)), role < 2) << "role " << role;
  }
  EXPECT_TRUE(a.copies_equal(0, 1));

  auto refused = Array::open(a.media.members(), OpenOptions{});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("its members"), std::string::npos)
      << refused.error().message;
  MemoryMember stray("stray-journal", 1 << 20);
  OpenOptions with_device = a.options();
  use_stripe_journal(with_device, &stray);
  auto wrong = Array::open(a.media.members(), with_device);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("stray-journal"), std::string::npos)
      << wrong.error().message;

  AlignedBuffer data = test::random_buffer(8192, 1);
  {
    auto opened = Array::open(a.media.members(), a.options());
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->volume().write(4096, data.span()));
    auto* log = static_cast<StripeJournal*>((*opened)->stripe_log());
    EXPECT_EQ(log->stats().stripes_logged, 1u);
    ASSERT_TRUE((*opened)->close());
  }
  EXPECT_TRUE(a.copies_equal(0, 1)) << "every write reaches both copies";
  auto again = Array::open(a.media.members(), a.options());
  ASSERT_TRUE(again) << again.error().message;
  AlignedBuffer back(data.size());
  ASSERT_TRUE((*again)->volume().read(4096, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

TEST(MemberJournal, Raid6KeepsThreeCopies) {
  MemberJournalArray a(RaidLevel::raid6, 5);
  for (unsigned role = 0; role < 5; ++role) {
    MirroredArea one({{role, a.media.faulty[role].get()}}, a.created.journal_offset,
                     a.created.journal_size);
    EXPECT_EQ(bool(Journal::open(one, 0, a.created.array_uuid)), role < 3) << "role " << role;
  }
}

TEST(MemberJournal, BadLayoutsAreRefusedBeforeAnythingIsWritten) {
  auto try_create = [](RaidLevel level, uint64_t blocks, uint64_t member_size,
                       uint64_t journal_offset = kMemberJournalOffset) {
    test::MemoryArray media(4, member_size);
    ArrayOptions create;
    create.level = level;
    create.chunk_size = kChunk;
    add_bitmap(create, 0, milliseconds(0));
    add_member_journal(create, blocks);
    create.journal_offset = journal_offset;
    auto made = create_array(media.members(), create);
    for (auto& m : media.faulty) {
      auto sb = read_superblock(*m);
      EXPECT_FALSE(sb) << "nothing was written";
      if (!sb) {
        EXPECT_EQ(sb.error().code, ENODATA);
      }
    }
    return made ? std::string() : made.error().message;
  };
  EXPECT_NE(try_create(RaidLevel::raid1, kJournalBlocks, kMemberSize).find("write hole"),
            std::string::npos);
  EXPECT_NE(try_create(RaidLevel::raid5, 100, kMemberSize).find("at least"), std::string::npos)
      << "too small for two partial stripes";
  EXPECT_NE(try_create(RaidLevel::raid5, kJournalBlocks, 5 << 20).find("too small"),
            std::string::npos)
      << "members without room for the data after the journal";
  // The bitmap (a header and a block of bits after byte 8192) must end before the journal.
  const std::string bitmap = try_create(RaidLevel::raid5, kJournalBlocks, kMemberSize, 12288);
  EXPECT_NE(bitmap.find("journal area"), std::string::npos) << bitmap;
}

// A crash left a partial stripe logged and torn (new data in place, old parity); then the
// member holding the first copy is gone. Replay reads the second copy, and the lost
// member's chunk, rebuilt from parity, is right.
TEST(MemberJournal, WriteHoleStaysClosedWithoutTheFirstCopy) {
  MemberJournalArray a;
  auto geometry = *Geometry::create(RaidLevel::raid5, 4, kChunk, a.created.data_size);
  // Stripe 0: chunk 0 on member 0 (the first copy's holder), chunk 1 on member 1.
  ASSERT_EQ(geometry.locate(0, 0).member, 0u);
  const unsigned parity = geometry.p_member(0);
  AlignedBuffer base = test::random_buffer(geometry.stripe_data_size(), 2);
  AlignedBuffer update = test::random_buffer(8192, 3);
  MemberJournalArray::Image torn;
  {
    auto opened = Array::open(a.media.members(), a.options());
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->volume().write(0, base.span()));
    ASSERT_TRUE((*opened)->volume().flush());
    auto before = a.image();
    ASSERT_TRUE((*opened)->volume().write(kChunk, update.span()));  // chunk 1: logged
    torn = a.image();
    // The parity write never made it.
    const uint64_t row = a.created.data_offset;
    std::copy(before[parity].begin() + static_cast<std::ptrdiff_t>(row),
              before[parity].begin() + static_cast<std::ptrdiff_t>(row + kChunk),
              torn[parity].begin() + static_cast<std::ptrdiff_t>(row));
    ASSERT_TRUE((*opened)->close());
  }
  a.restore(torn);
  std::memcpy(base.data() + kChunk, update.data(), update.size());
  std::vector<Member*> without_first = a.media.members();
  without_first[0] = nullptr;
  std::vector<Member*> present(without_first.begin() + 1, without_first.end());
  auto opened = Array::open(present, a.options());
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_EQ((*opened)->volume().missing_members(), 1u);
  AlignedBuffer back(base.size());
  ASSERT_TRUE((*opened)->volume().read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), base.data(), kChunk), 0)
      << "member 0's chunk rebuilt from the replayed parity";
  EXPECT_EQ(std::memcmp(back.data(), base.data(), base.size()), 0);
}

// After a crash the copies may differ. The one whose log reaches furthest (then, the one
// checkpointed furthest) is copied over the others before replay, whichever role holds it.
TEST(MemberJournal, TheFreshestCopyWinsAndTheOthersAreMadeEqual) {
  for (unsigned stale : {0u, 1u}) {
    SCOPED_TRACE(testing::Message() << "stale copy on role " << stale);
    MemberJournalArray a;
    const unsigned fresh = 1 - stale;
    AlignedBuffer update = test::random_buffer(8192, 4);
    MemberJournalArray::Image crashed;
    std::vector<std::byte> stale_area;
    {
      auto opened = Array::open(a.media.members(), a.options());
      ASSERT_TRUE(opened) << opened.error().message;
      stale_area.assign(a.area(stale).begin(), a.area(stale).end());
      ASSERT_TRUE((*opened)->volume().write(4096, update.span()));  // logged on both
      crashed = a.image();
      ASSERT_TRUE((*opened)->close());
    }
    a.restore(crashed);
    std::copy(stale_area.begin(), stale_area.end(), a.area(stale).begin());  // it missed it
    ASSERT_FALSE(a.copies_equal(0, 1));
    auto volume =
        Volume::create(*Geometry::create(RaidLevel::raid5, 4, kChunk, a.created.data_size),
                       a.media.members(), a.created.data_offset);
    ASSERT_TRUE(volume);
    Superblock sb = a.created;
    sb.set_clean(false);
    auto area = open_member_journal_area(**volume, sb, false);
    ASSERT_TRUE(area) << area.error().message;
    EXPECT_EQ((*area)->copies()[0].role, fresh) << "reads come from the freshest copy";
    EXPECT_TRUE(a.copies_equal(0, 1)) << "the stale copy was overwritten";
    auto journal = Journal::open(**area, 0, sb.array_uuid);
    ASSERT_TRUE(journal);
    uint64_t replayed_blocks = 0;
    ASSERT_TRUE((*journal)->replay([&](uint64_t, std::span<const std::byte>) -> Result<void> {
      ++replayed_blocks;
      return {};
    }));
    EXPECT_GT(replayed_blocks, 0u) << "the logged write is replayed";
  }
}

// A copy whose log is as long as the other's but checkpointed less far is the stale one:
// replaying it could bring logged contents back over full-stripe writes made since (they
// bypass the log). Here member 0 missed the checkpoint that a degraded run made.
TEST(MemberJournal, ACopyCheckpointedLessFarLoses) {
  MemberJournalArray a;
  AlignedBuffer update = test::random_buffer(8192, 5);
  {
    auto opened = Array::open(a.media.members(), a.options());
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->volume().write(4096, update.span()));  // logged, not checkpointed
    auto crashed = a.image();
    ASSERT_TRUE((*opened)->close());
    a.restore(crashed);
  }
  std::vector<std::byte> old_first(a.area(0).begin(), a.area(0).end());
  const std::vector<Member*> all = a.media.members();
  std::vector<Member*> present(all.begin() + 1, all.end());
  {
    auto degraded = Array::open(present, a.options());  // replays from role 1, checkpoints
    ASSERT_TRUE(degraded) << degraded.error().message;
  }
  ASSERT_FALSE(a.copies_equal(0, 1));
  std::copy(old_first.begin(), old_first.end(), a.area(0).begin());
  auto volume = Volume::create(*Geometry::create(RaidLevel::raid5, 4, kChunk, a.created.data_size),
                               a.media.members(), a.created.data_offset);
  ASSERT_TRUE(volume);
  auto area = open_member_journal_area(**volume, a.created, /*force=*/false);
  ASSERT_TRUE(area) << area.error().message;
  EXPECT_EQ((*area)->copies()[0].role, 1u);
  EXPECT_TRUE(a.copies_equal(0, 1));
}

// A damaged copy is repaired from the other; with every copy damaged the array is refused,
// naming the member and the field, and force rebuilds the journal (full resync).
TEST(MemberJournal, DamagedCopiesAreRepairedOrRefused) {
  MemberJournalArray a;
  a.mark_unclean();
  a.area(0)[40] ^= std::byte{1};  // the first copy's journal superblock
  {
    auto opened = Array::open(a.media.members(), a.options());
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_FALSE((*opened)->stripe_log()->lost_records());
    ASSERT_TRUE((*opened)->close());
  }
  EXPECT_TRUE(a.copies_equal(0, 1)) << "repaired from the intact copy";
  a.mark_unclean();
  a.area(0)[40] ^= std::byte{1};
  a.area(1)[40] ^= std::byte{1};
  auto refused = Array::open(a.media.members(), a.options());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("mem0"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("checksum"), std::string::npos) << refused.error().message;
  auto repaired = Array::open(a.media.members(), a.options(/*force=*/true));
  ASSERT_TRUE(repaired) << repaired.error().message;
  EXPECT_TRUE((*repaired)->stripe_log()->lost_records());
  EXPECT_EQ((*repaired)->wait_resync().total, (*repaired)->volume().geometry().stripes());
  EXPECT_TRUE(a.copies_equal(0, 1));
}

// A copy that cannot be written takes its member out (recorded in the survivors'
// superblocks), and logging goes on with the other copy.
TEST(MemberJournal, ACopyThatFailsIsTakenOut) {
  MemberJournalArray a;
  auto opened = Array::open(a.media.members(), a.options());
  ASSERT_TRUE(opened) << opened.error().message;
  a.media.faulty[0]->fail_range(
      MemberOp::write,
      {a.created.journal_offset, a.created.journal_offset + a.created.journal_size});
  AlignedBuffer data = test::random_buffer(8192, 6);
  ASSERT_TRUE((*opened)->volume().write(kChunk + 4096, data.span()));
  EXPECT_FALSE((*opened)->volume().active(0));
  ASSERT_TRUE((*opened)->volume().write(2 * kChunk + 4096, data.span()));
  auto* log = static_cast<StripeJournal*>((*opened)->stripe_log());
  EXPECT_EQ(log->stats().stripes_logged, 2u);
  ASSERT_TRUE((*opened)->close());
  auto sb = read_superblock(*a.media.faulty[1]);
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->member_states[0], MemberState::faulty);
  a.media.faulty[0]->heal();
  auto again = Array::open(a.media.members(), a.options());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE((*again)->volume().active(0));
  AlignedBuffer back(data.size());
  ASSERT_TRUE((*again)->volume().read(2 * kChunk + 4096, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

// A member holding a copy that was away while partial stripes were logged on the other
// copy: when it is re-added (by the bitmap), its copy is made current too, so it could
// serve the next replay alone.
class MemberJournalReAdd : public testing::TestWithParam<bool> {};

TEST_P(MemberJournalReAdd, AReAddedMemberGetsACurrentCopy) {
  MemberJournalArray a;
  const std::vector<Member*> all = a.media.members();
  std::vector<Member*> present(all.begin() + 1, all.end());
  {
    auto degraded = Array::open(present, a.options());
    ASSERT_TRUE(degraded) << degraded.error().message;
    for (uint64_t at : {uint64_t{4096}, uint64_t{kChunk * 7 + 8192}}) {
      ASSERT_TRUE((*degraded)->volume().write(at, test::random_buffer(8192, at).span()));
    }
    EXPECT_EQ(static_cast<StripeJournal*>((*degraded)->stripe_log())->stats().stripes_logged, 2u);
    ASSERT_TRUE((*degraded)->close());
  }
  ASSERT_FALSE(a.copies_equal(0, 1));
  if (GetParam()) {
    // Its copy cannot be written: the re-add fails and the member stays out. (The copy's
    // failure is not held against it: the source's read may have been what failed.)
    a.media.faulty[0]->fail_range(
        MemberOp::write,
        {a.created.journal_offset, a.created.journal_offset + a.created.journal_size});
    {
      auto refused = Array::open(all, a.options());
      ASSERT_TRUE(refused) << refused.error().message;
      EXPECT_FALSE((*refused)->volume().active(0));
      EXPECT_NE((*refused)->notes().back().find("re-adding it failed"), std::string::npos)
          << (*refused)->notes().back();
      EXPECT_EQ((*refused)->superblock().member_states[0], MemberState::missing);
    }
    a.media.faulty[0]->heal();  // then it is tried again, below
  }
  auto back = Array::open(all, a.options());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE((*back)->volume().active(0)) << "re-added";
  EXPECT_TRUE(a.copies_equal(0, 1));
}

INSTANTIATE_TEST_SUITE_P(, MemberJournalReAdd, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "CopyWriteFails" : "Succeeds";
                         });

// A run that does not log partial stripes (write_hole=open) says so in the superblocks:
// after a crash during it the array is treated as having no log (refused degraded without
// force, resynced by its bitmap), until a clean shutdown clears the mark.
TEST(MemberJournal, AnUnloggedRunLeavesTheHoleOpenUntilACleanClose) {
  MemberJournalArray a;
  OpenOptions unlogged = a.options();
  unlogged.log_partial_stripes = false;
  MemberJournalArray::Image crashed;
  {
    auto opened = Array::open(a.media.members(), unlogged);
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_FALSE((*opened)->logs_partial_stripes());
    ASSERT_TRUE((*opened)->volume().write(4096, test::random_buffer(8192, 8).span()));
    auto* log = static_cast<StripeJournal*>((*opened)->stripe_log());
    EXPECT_EQ(log->stats().stripes_logged, 0u);
    auto running = read_superblock(*a.media.faulty[2]);
    ASSERT_TRUE(running);
    EXPECT_TRUE(running->unlogged());
    crashed = a.image();
    ASSERT_TRUE((*opened)->close());
  }
  auto closed = read_superblock(*a.media.faulty[2]);
  ASSERT_TRUE(closed);
  EXPECT_FALSE(closed->unlogged()) << "a clean close clears it";
  a.restore(crashed);
  const std::vector<Member*> all = a.media.members();
  std::vector<Member*> degraded(all.begin(), all.end() - 1);
  auto refused = Array::open(degraded, a.options());
  ASSERT_FALSE(refused) << "its journal did not cover the crashed run";
  EXPECT_EQ(refused.error().code, EUCLEAN);
  {
    auto whole = Array::open(all, a.options());  // logging again; the mark stays till close
    ASSERT_TRUE(whole) << whole.error().message;
    EXPECT_TRUE((*whole)->logs_partial_stripes());
    EXPECT_GT((*whole)->wait_resync().total, 0u) << "the bitmap's regions are resynced";
    auto running = read_superblock(*a.media.faulty[2]);
    ASSERT_TRUE(running);
    EXPECT_TRUE(running->unlogged());
    ASSERT_TRUE((*whole)->close());
  }
  auto after = read_superblock(*a.media.faulty[2]);
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->unlogged());
}

TEST(MemberJournal, DefaultSize) {
  // 1/64 of a member within [16 MiB, 64 MiB], at least four worst-case partial stripes.
  EXPECT_EQ(default_member_journal_blocks(4, 512 * 1024, 1ull << 30) * kJournalBlockSize,
            16u << 20);
  EXPECT_EQ(default_member_journal_blocks(4, 512 * 1024, 2ull << 30) * kJournalBlockSize,
            32u << 20);
  EXPECT_EQ(default_member_journal_blocks(4, 512 * 1024, 1ull << 40) * kJournalBlockSize,
            64u << 20);
  const uint64_t wide = default_member_journal_blocks(16, 4 << 20, 1ull << 40);
  EXPECT_GE(wide, 2 * min_stripe_journal_blocks(16, 4 << 20));
}

}  // namespace
}  // namespace stripefs
