// The write hole, closed: partial stripes go through the journal before they are written in
// place, and replay after a crash makes every stripe consistent, even degraded.
#include "journal/stripe_journal.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>
#include <random>

#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/mirrored_area.hpp"
#include "journal/write_intent_bitmap.hpp"
#include "raid/file_member.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 4096;
constexpr uint64_t kRows = 8;
constexpr uint64_t kBitmapOffset = 8192;  // header + one block of bits, before the data
constexpr uint64_t kBitmapArea = 2 * kBitmapHeaderSize;
constexpr uint64_t kJournalBlocks = 64;
constexpr uint64_t kMemberJournalArea = 65536;  // when the journal lives on the members
constexpr uint64_t kDataOffset = kMemberJournalArea + kJournalBlocks * kJournalBlockSize;
const Uuid kArray = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

// Where the write-hole journal lives: a separate device, or mirrored on the members.
enum class JournalPlace { device, members };

// Members and a journal device whose writes wait in a volatile cache until flushed.
struct CrashableArray {
  static constexpr unsigned kMembers = 4;
  test::MemoryArray media{kMembers, kDataOffset + kRows* kChunk};
  MemoryMember journal_medium{"journal", 1 << 20};
  FaultyMember journal_device{journal_medium};
  Geometry geometry = *Geometry::create(RaidLevel::raid5, kMembers, kChunk, kRows* kChunk);
  const JournalPlace place;
  // How often the journals started are checkpointed when idle. A test that must find a
  // logged write still in the log (or a stripe still torn: a checkpoint flushes the members)
  // after it is acknowledged makes it long.
  std::chrono::milliseconds idle_checkpoint = kIdleCheckpoint;

  // What open_member_journal_area needs to know: the level, the area, and that every start
  // follows a crash.
  static Superblock member_journal_superblock() {
    Superblock sb;
    sb.array_uuid = kArray;
    sb.level = RaidLevel::raid5;
    sb.member_count = kMembers;
    sb.journal_offset = kMemberJournalArea;
    sb.journal_size = kJournalBlocks * kJournalBlockSize;
    sb.set_clean(false);
    return sb;
  }

  explicit CrashableArray(JournalPlace where = JournalPlace::device) : place(where) {
    for (auto& m : media.faulty) m->set_volatile_cache(true);
    journal_device.set_volatile_cache(true);
    if (place == JournalPlace::device) {
      EXPECT_TRUE(Journal::format(journal_device, 0, kJournalBlocks, kArray));
    } else {
      MirroredArea area({{0, media.faulty[0].get()}, {1, media.faulty[1].get()}},
                        kMemberJournalArea, kJournalBlocks * kJournalBlockSize);
      EXPECT_TRUE(Journal::format(area, 0, kJournalBlocks, kArray));
    }
    // A write-intent bitmap with one region per stripe row.
    BitmapHeader header;
    header.array_uuid = kArray;
    header.region_size = kChunk;
    header.data_size = kRows * kChunk;
    header.regions = kRows;
    EXPECT_TRUE(WriteIntentBitmap::format(media.members(), kBitmapOffset, kBitmapArea, header));
  }

  // A running array: Volume + stripe journal (replayed) + bitmap, `missing` left out.
  struct Running {
    std::unique_ptr<Volume> volume;
    std::unique_ptr<StripeJournal> journal;
    std::unique_ptr<WriteIntentBitmap> bitmap;  // destroyed first: it records for the Volume
    uint64_t replayed = 0;
  };
  Running start(std::optional<unsigned> missing = std::nullopt, bool with_journal = true) {
    Running r;
    auto members = media.members();
    if (missing) members[*missing] = nullptr;
    auto volume = Volume::create(geometry, members, kDataOffset);
    EXPECT_TRUE(volume) << volume.error().message;
    r.volume = std::move(*volume);
    if (with_journal && place == JournalPlace::members) {
      auto area = open_member_journal_area(*r.volume, member_journal_superblock(), false);
      EXPECT_TRUE(area) << area.error().message;
      auto journal = Journal::open(**area, 0, kArray);
      EXPECT_TRUE(journal) << journal.error().message;
      r.journal = std::make_unique<StripeJournal>(std::move(*journal), *r.volume, std::move(*area),
                                                  idle_checkpoint);
    } else if (with_journal) {
      auto journal = Journal::open(journal_device, 0, kArray);
      EXPECT_TRUE(journal) << journal.error().message;
      r.journal =
          std::make_unique<StripeJournal>(std::move(*journal), *r.volume, nullptr, idle_checkpoint);
    }
    if (with_journal) {
      auto replayed = r.journal->replay(*r.volume);
      EXPECT_TRUE(replayed) << replayed.error().message;
      r.replayed = replayed.value_or(0);
      r.volume->set_stripe_log(r.journal.get());
    }
    // Every start follows a crash: set bits are ranges to resync.
    auto bitmap = WriteIntentBitmap::load(*r.volume, kBitmapOffset, kBitmapArea, kArray,
                                          /*clean=*/false, std::chrono::milliseconds(0));
    EXPECT_TRUE(bitmap) << bitmap.error().message;
    r.bitmap = std::move(*bitmap);
    r.volume->set_write_intent(r.bitmap.get());
    return r;
  }

  // Power goes: each cached write survives with probability `survive`.
  void power_cut(double survive, uint64_t seed) {
    for (unsigned i = 0; i < kMembers; ++i) media.faulty[i]->power_cut(survive, seed * 31 + i);
    journal_device.power_cut(survive, seed * 31 + 99);
  }
};

class StripeJournalPlaced : public testing::TestWithParam<JournalPlace> {};

INSTANTIATE_TEST_SUITE_P(, StripeJournalPlaced,
                         testing::Values(JournalPlace::device, JournalPlace::members),
                         [](const testing::TestParamInfo<JournalPlace>& info) {
                           return info.param == JournalPlace::device ? "OnADevice" : "OnTheMembers";
                         });

TEST_P(StripeJournalPlaced, WriteHoleIsClosedWhenTheArrayComesBackDegraded) {
  CrashableArray a(GetParam());
  a.idle_checkpoint = std::chrono::hours(1);  // the stripe stays torn until the power cut
  AlignedBuffer image = test::random_buffer(kRows * kChunk * 3, 1);
  const uint64_t stripe = 0;
  const unsigned d0 = a.geometry.locate(stripe, 0).member;
  const unsigned d1 = a.geometry.locate(stripe, 1).member;
  const unsigned p = a.geometry.p_member(stripe);
  {
    auto run = a.start();
    ASSERT_TRUE(run.volume->write(0, image.span()));
    ASSERT_TRUE(run.volume->flush());
    // A partial write into chunk 0 of stripe 0, acknowledged but never flushed.
    AlignedBuffer update = test::random_buffer(4096, 2);
    ASSERT_TRUE(run.volume->write(0, update.span()));
    EXPECT_EQ(run.journal->stats().stripes_logged, 1u);
    // The crash tears it: the data reached its member, the parity did not.
    a.media.faulty[d0]->power_cut(1.0);
    a.media.faulty[p]->power_cut(0.0);
    std::memcpy(image.data(), update.data(), 4096);
  }
  // d1 is gone after the crash. Its chunk must be rebuilt from the others.
  AlignedBuffer chunk(kChunk);
  {
    auto unprotected = a.start(d1, /*with_journal=*/false);
    ASSERT_TRUE(unprotected.volume->read(kChunk, chunk.span()));
    EXPECT_NE(std::memcmp(chunk.data(), image.data() + kChunk, kChunk), 0)
        << "without the log the torn stripe rebuilds d1 wrong (the write hole)";
  }
  auto run = a.start(d1);
  EXPECT_GT(run.replayed, 0u);
  ASSERT_TRUE(run.volume->read(kChunk, chunk.span()));
  EXPECT_EQ(std::memcmp(chunk.data(), image.data() + kChunk, kChunk), 0)
      << "replay must make the stripe consistent again";
  AlignedBuffer all(image.size());
  ASSERT_TRUE(run.volume->read(0, all.span()));
  EXPECT_EQ(std::memcmp(all.data(), image.data(), image.size()), 0);
}

// The power-cut loop: a mixed full/partial-stripe workload on members and a journal device
// whose unflushed writes vanish at random. After recovery, every sector last written before
// the last completed flush holds that data, whether the array comes back complete (then also
// parity checks clean and every member can be removed) or degraded.
// With the journal on the members, a recovery that loses a member holding a copy reads
// the other copy, and copies torn apart by the power cut are made equal again.
TEST_P(StripeJournalPlaced, PowerCutLoop) {
  constexpr int kIterations = 1000;
  const uint64_t size = kRows * kChunk * 3;
  const uint64_t sectors = size / 512;
  std::mt19937_64 rng(2026);
  CrashableArray a(GetParam());
  {
    auto run = a.start();
    AlignedBuffer zero(size);
    zero.zero();
    ASSERT_TRUE(run.volume->write(0, zero.span()));
    ASSERT_TRUE(run.volume->flush());
  }
  std::vector<uint64_t> durable(sectors, 0);  // version id as of the last completed flush
  uint64_t next_version = 1;
  auto fill = [](std::byte* at, uint64_t version) {
    for (int i = 0; i < 512; i += 8) std::memcpy(at + i, &version, 8);
  };
  auto version_of = [](const std::byte* at) {
    uint64_t v;
    std::memcpy(&v, at, 8);
    return v;
  };
  int degraded_recoveries = 0;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    std::map<uint64_t, std::vector<uint64_t>> since_flush;  // sector -> versions written
    std::optional<unsigned> lost;
    {
      auto run = a.start();
      const int ops = 1 + static_cast<int>(rng() % 6);
      for (int op = 0; op < ops; ++op) {
        if (rng() % 4 == 0) {
          ASSERT_TRUE(run.volume->flush());
          for (auto& [sector, versions] : since_flush) durable[sector] = versions.back();
          since_flush.clear();
          continue;
        }
        const bool full = rng() % 3 == 0;
        const uint64_t stripe_sectors = a.geometry.stripe_data_size() / 512;
        uint64_t first, count;
        if (full) {
          first = rng() % (sectors / stripe_sectors) * stripe_sectors;
          count = stripe_sectors;
        } else {
          first = rng() % sectors;
          count = 1 + rng() % std::min<uint64_t>(16, sectors - first);
        }
        AlignedBuffer data(count * 512);
        for (uint64_t s = 0; s < count; ++s) {
          fill(data.data() + s * 512, next_version);
          since_flush[first + s].push_back(next_version++);
        }
        ASSERT_TRUE(run.volume->write(first * 512, data.span()));
      }
      a.power_cut(0.5, iteration);
      if (iteration % 2 == 1) {
        lost = static_cast<unsigned>(rng() % CrashableArray::kMembers);
        ++degraded_recoveries;
      }
    }
    auto run = a.start(lost);
    if (!lost) {
      // Complete: resync only what the bitmap recorded. Parity is then checked on every
      // stripe below, so a torn stripe the bitmap missed would show.
      for (auto [begin, end] : run.bitmap->ranges_to_resync()) {
        auto [first, last] = run.volume->stripes_of(begin, end);
        ASSERT_TRUE(run.volume->check_stripes(first, last - first + 1, true));
        run.bitmap->resynced(begin, end);
      }
      ASSERT_TRUE(run.volume->flush());
    }
    AlignedBuffer back(size);
    ASSERT_TRUE(run.volume->read(0, back.span()));
    for (uint64_t s = 0; s < sectors; ++s) {
      const uint64_t got = version_of(back.data() + s * 512);
      auto it = since_flush.find(s);
      if (it == since_flush.end()) {
        ASSERT_EQ(got, durable[s]) << "iteration " << iteration << " sector " << s
                                   << (lost ? " (degraded)" : "") << ": flushed data lost";
      } else if (!lost) {
        const bool known = got == durable[s] ||
                           std::find(it->second.begin(), it->second.end(), got) != it->second.end();
        ASSERT_TRUE(known) << "iteration " << iteration << " sector " << s
                           << ": neither the old nor a written version";
      }
    }
    if (!lost) {
      auto bad = run.volume->count_inconsistent_stripes(0, a.geometry.stripes());
      ASSERT_TRUE(bad);
      ASSERT_EQ(*bad, 0u) << "iteration " << iteration;
      // With any one member removed, every sector still reads back the same.
      const unsigned gone = static_cast<unsigned>(rng() % CrashableArray::kMembers);
      run.volume->fail_member(gone, Error{EIO, "removed"});
      AlignedBuffer degraded(size);
      ASSERT_TRUE(run.volume->read(0, degraded.span()));
      ASSERT_EQ(std::memcmp(degraded.data(), back.data(), size), 0)
          << "iteration " << iteration << " without member " << gone;
    }
    // What was read is what the array holds now: the new baseline.
    for (uint64_t s = 0; s < sectors; ++s) durable[s] = version_of(back.data() + s * 512);
    if (lost) {
      // The lost member comes back: rewrite everything so it is current again.
      run.volume.reset();
      run.journal.reset();
      auto full = a.start();
      ASSERT_TRUE(full.volume->write(0, back.span()));
      ASSERT_TRUE(full.volume->flush());
      ASSERT_TRUE(full.bitmap->clear_idle(std::chrono::milliseconds(0)));
    } else {
      ASSERT_TRUE(run.volume->flush());
      ASSERT_TRUE(run.bitmap->clear_idle(std::chrono::milliseconds(0)));  // idle: bits go
    }
  }
  EXPECT_EQ(degraded_recoveries, kIterations / 2);
}

TEST(StripeJournal, ArrayWithJournalNeedsItsDeviceAndReplaysAtOpen) {
  test::MemoryArray media(4, 8 << 20);
  MemoryMember journal_device("nvme-journal", 4 << 20);
  ArrayOptions create;
  create.chunk_size = 64 * 1024;
  add_bitmap(create, 0, std::chrono::milliseconds(0));
  add_stripe_journal(create, journal_device, 0, 256);
  auto created = create_array(media.members(), create);
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->journal_size, 256u * kJournalBlockSize);
  EXPECT_NE(created->bitmap_size, 0u);
  OpenOptions plain;
  auto refused = Array::open(media.members(), plain);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("journal"), std::string::npos) << refused.error().message;
  OpenOptions options;
  use_bitmap(options, std::chrono::milliseconds(0));
  use_stripe_journal(options, &journal_device);
  AlignedBuffer data = test::random_buffer(8192, 3);
  {
    auto opened = Array::open(media.members(), options);
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->volume().write(4096, data.span()));
    auto* log = static_cast<StripeJournal*>((*opened)->stripe_log());
    EXPECT_EQ(log->stats().stripes_logged, 1u);
    ASSERT_TRUE((*opened)->close());
  }
  MemoryMember wrong("other", 4 << 20);
  ASSERT_TRUE(Journal::format(wrong, 0, 64, generate_uuid()));
  OpenOptions mismatched;
  use_stripe_journal(mismatched, &wrong);
  auto foreign = Array::open(media.members(), mismatched);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("array_uuid"), std::string::npos)
      << foreign.error().message;
  auto again = Array::open(media.members(), options);
  ASSERT_TRUE(again) << again.error().message;
  AlignedBuffer back(data.size());
  ASSERT_TRUE((*again)->volume().read(4096, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

// A member that fails while the journal is replayed, before the array's failure listener
// exists, is still recorded as faulty in the survivors' superblocks: it must never be
// assembled again as if it were current.
TEST(StripeJournal, MemberFailingDuringReplayIsRecordedFaulty) {
  test::MemoryArray media(4, 8 << 20);
  MemoryMember journal_device("nvme-journal", 4 << 20);
  ArrayOptions create;
  create.chunk_size = 64 * 1024;
  add_stripe_journal(create, journal_device, 0, 256);
  ASSERT_TRUE(create_array(media.members(), create));
  OpenOptions options;
  // Checkpointed only when asked: the image below must still hold the logged write.
  use_stripe_journal(options, &journal_device, std::chrono::hours(1));
  // The crash image: a partial stripe logged, never checkpointed.
  std::vector<std::vector<std::byte>> members_image;
  std::vector<std::byte> journal_image;
  AlignedBuffer data = test::random_buffer(8192, 5);
  {
    auto opened = Array::open(media.members(), options);
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->volume().write(4096, data.span()));
    for (auto& m : media.media) {
      members_image.emplace_back(m->contents().begin(), m->contents().end());
    }
    journal_image.assign(journal_device.contents().begin(), journal_device.contents().end());
    ASSERT_TRUE((*opened)->close());
  }
  for (size_t i = 0; i < media.media.size(); ++i) {
    std::copy(members_image[i].begin(), members_image[i].end(), media.media[i]->contents().begin());
  }
  std::copy(journal_image.begin(), journal_image.end(), journal_device.contents().begin());
  // Replay writes the logged chunk to its member, which now fails every write.
  auto probe = Geometry::create(RaidLevel::raid5, 4, 64 * 1024, 1 << 20);
  const unsigned target = probe->locate(0, 0).member;
  media.faulty[target]->fail_range(MemberOp::write, {0, UINT64_MAX});
  {
    auto opened = Array::open(media.members(), options);
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_FALSE((*opened)->volume().active(target));
    AlignedBuffer back(data.size());
    ASSERT_TRUE((*opened)->volume().read(4096, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0)
        << "the logged data reads back, rebuilt from the survivors";
    ASSERT_TRUE((*opened)->close());
  }
  for (unsigned m = 0; m < 4; ++m) {
    if (m == target) continue;
    auto sb = read_superblock(*media.faulty[m]);
    ASSERT_TRUE(sb) << sb.error().message;
    EXPECT_EQ(sb->member_states[target], MemberState::faulty) << "as member " << m << " says";
  }
  media.faulty[target]->heal();
  auto again = Array::open(media.members(), options);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE((*again)->volume().active(target)) << "a failed member is not assembled as current";
}

// On real io_uring members, completions run on the engine's thread: nothing on the journal's
// path may block that thread, nor hold a lock across I/O that a completion needs. (A
// checkpoint once held the journal's lock across its superblock write: a deadlock.)
TEST(StripeJournal, CheckpointsOnIoUringMembersDoNotDeadlock) {
  char pattern[] = "/dev/shm/stripefs-journal-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  auto engine = IoEngine::create(64);
  ASSERT_TRUE(engine);
  std::vector<std::unique_ptr<FileMember>> files;
  auto make = [&](const std::string& name, uint64_t size) -> Member* {
    const std::string path = dir + "/" + name;
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    ::close(fd);
    auto m = FileMember::open(path, **engine, FileMember::InMemory::ring);
    EXPECT_TRUE(m) << m.error().message;
    files.push_back(std::move(*m));
    return files.back().get();
  };
  std::vector<Member*> members;
  for (int i = 0; i < 4; ++i) members.push_back(make("m" + std::to_string(i), 8 << 20));
  Member* journal_device = make("journal", 1 << 20);
  {
    ArrayOptions create;
    create.chunk_size = 64 * 1024;
    create.assume_clean = true;
    add_stripe_journal(create, *journal_device, 0, 140);  // small: checkpoints all the time
    ASSERT_TRUE(create_array(members, create));
    OpenOptions options;
    use_stripe_journal(options, journal_device);
    auto array = Array::open(members, options);
    ASSERT_TRUE(array) << array.error().message;
    Volume& volume = (*array)->volume();
    std::mt19937_64 rng(5);
    AlignedBuffer data = test::random_buffer(volume.geometry().stripe_data_size(), 6);
    for (int i = 0; i < 300; ++i) {
      const uint64_t stripe = rng() % 8;
      const uint64_t at = stripe * volume.geometry().stripe_data_size();
      // Partial writes, then a full stripe over the same stripe: the bypass barrier.
      auto r = (i % 5 == 4) ? volume.write(at, data.span())
                            : volume.write(at + (rng() % 16) * 4096, data.span().first(8192));
      ASSERT_TRUE(r) << r.error().message;
    }
    auto* log = static_cast<StripeJournal*>((*array)->stripe_log());
    EXPECT_GT(log->stats().checkpoints, 0u);
    EXPECT_GT(log->stats().bypass_waits, 0u);
    ASSERT_TRUE((*array)->close());
  }
  files.clear();
  engine->reset();
  std::filesystem::remove_all(dir);
}

TEST(StripeJournal, RefusesAJournalTooSmallForTwoPartialStripes) {
  test::MemoryArray media(4, 8 << 20);
  MemoryMember journal_device("nvme-journal", 4 << 20);
  ArrayOptions create;
  create.chunk_size = 64 * 1024;
  add_stripe_journal(create, journal_device, 0, 64);
  auto refused = create_array(media.members(), create);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("at least 532.0 KiB (133 blocks)"), std::string::npos)
      << refused.error().message;
}

// A torn transaction's sequence is never reused: a later transaction of the same batch that
// survived the crash must not become valid behind the reused one (review finding).
TEST(StripeJournal, TornTransactionSequenceIsNotReused) {
  MemoryMember device("journal", 1 << 20);
  ASSERT_TRUE(Journal::format(device, 0, 64, kArray));
  auto none = [](uint64_t, std::span<const std::byte>) -> Result<void> { return {}; };
  auto targets = [&] {
    auto j = Journal::open(device, 0, kArray);
    std::vector<uint64_t> out;
    EXPECT_TRUE((*j)->replay([&](uint64_t t, std::span<const std::byte>) -> Result<void> {
      out.push_back(t);
      return {};
    }));
    return out;
  };
  AlignedBuffer a = test::random_buffer(kJournalBlockSize, 1),
                b = test::random_buffer(kJournalBlockSize, 2),
                c = test::random_buffer(kJournalBlockSize, 3);
  {
    auto j = std::move(*Journal::open(device, 0, kArray));
    ASSERT_TRUE(j->replay(none));
    ASSERT_TRUE(j->commit({{1, a.span()}}));
    ASSERT_TRUE(j->commit({{2, b.span()}}));
  }
  // The crash tore transaction 1 (its commit, log block 3) but not transaction 2.
  std::fill_n(device.contents().begin() + 3 * kJournalBlockSize, kJournalBlockSize, std::byte{0});
  ASSERT_TRUE(targets().empty());
  uint64_t seq = 0;
  {
    auto j = std::move(*Journal::open(device, 0, kArray));
    ASSERT_TRUE(j->replay(none));
    auto committed = j->commit({{3, c.span()}});
    ASSERT_TRUE(committed) << committed.error().message;
    seq = *committed;
    EXPECT_GT(seq, 2u) << "sequence 1 must not be reused";
    EXPECT_EQ(targets(), std::vector<uint64_t>{3});
    ASSERT_TRUE(j->checkpoint(seq));
  }
  EXPECT_TRUE(targets().empty()) << "nothing stale comes back after the checkpoint";
}

// A full stripe waiting at the barrier for a checkpoint that cannot happen (the array has
// failed) completes with the error instead of hanging (review finding).
TEST(StripeJournal, BypassWaitingForAFailedCheckpointCompletes) {
  CrashableArray a;
  for (auto& m : a.media.faulty) m->set_volatile_cache(false);
  a.journal_device.set_volatile_cache(false);
  auto run = a.start();
  AlignedBuffer small = test::random_buffer(4096, 1);
  AlignedBuffer full = test::random_buffer(a.geometry.stripe_data_size(), 2);
  ASSERT_TRUE(run.volume->write(0, small.span()));  // stripe 0 is in the log now
  a.media.faulty[0]->fail_after(0);
  a.media.faulty[1]->fail_after(0);  // two of four: the array has failed
  std::promise<Result<void>> done;
  run.volume->write({{0, std::span<std::byte>(full.data(), full.size())}},
                    [&done](Result<void> r) { done.set_value(std::move(r)); });
  auto outcome = done.get_future();
  // A liveness bound, not a speed goal: the barrier normally clears in milliseconds.
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the write hangs at the barrier";
  EXPECT_FALSE(outcome.get());
}

// A damaged journal header is refused by device and field; force rebuilds the journal, and
// an unclean array is then resynced whole (what the journal held is gone).
TEST(StripeJournal, ForceRebuildsADamagedJournal) {
  test::MemoryArray media(4, 8 << 20);
  MemoryMember journal_device("nvme-journal", 4 << 20);
  ArrayOptions create;
  create.chunk_size = 64 * 1024;
  add_bitmap(create, 0, std::chrono::milliseconds(0));
  add_stripe_journal(create, journal_device, 0, 256);
  ASSERT_TRUE(create_array(media.members(), create));
  OpenOptions options;
  use_bitmap(options, std::chrono::milliseconds(0));
  use_stripe_journal(options, &journal_device);
  {
    auto opened = Array::open(media.members(), options);
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->close());
  }
  for (auto& m : media.faulty) {  // a crash...
    auto s = read_superblock(*m);
    s->set_clean(false);
    ASSERT_TRUE(write_superblock(*m, *s));
  }
  journal_device.contents()[40] ^= std::byte{1};  // ...and a damaged journal header
  auto refused = Array::open(media.members(), options);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("nvme-journal"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("checksum"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("force rebuilds"), std::string::npos);
  options.force = true;
  auto repaired = Array::open(media.members(), options);
  ASSERT_TRUE(repaired) << repaired.error().message;
  EXPECT_TRUE((*repaired)->stripe_log()->lost_records());
  EXPECT_EQ((*repaired)->wait_resync().total, (*repaired)->volume().geometry().stripes())
      << "the journal's records are gone: every stripe is resynced";
  ASSERT_TRUE(Journal::open(journal_device, 0, (*repaired)->superblock().array_uuid));
}

TEST(StripeJournal, TargetsRoundTrip) {
  for (auto [member, offset, length] :
       {std::tuple{0u, uint64_t{0}, 512u}, std::tuple{63u, (uint64_t{1} << 47) * 512, 4096u}}) {
    unsigned m;
    uint64_t o;
    uint32_t l;
    StripeJournal::decode_target(StripeJournal::encode_target(member, offset, length), m, o, l);
    EXPECT_EQ(m, member);
    EXPECT_EQ(o, offset);
    EXPECT_EQ(l, length);
  }
}

}  // namespace
}  // namespace stripefs
