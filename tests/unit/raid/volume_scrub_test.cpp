// Scrub at every level with redundancy: a chunk corrupted behind the array's back (as a
// failing disk or a bad cable does) is found; where the level can name it (RAID6, three
// mirror copies) it is the right member's, and repair rewrites it; where it cannot (RAID5,
// two copies) nothing is rewritten on a guess.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "raid/level.hpp"
#include "raid/volume.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 16384;
// More stripes than the scrub's pipeline holds (scrub_depth() batches of scrub_batch()
// stripes: 4 of 64 at these chunks), so that every batch slot is used and reused.
constexpr uint64_t kRows = 328;
constexpr uint64_t kDataOffset = 8192;

struct ScrubCase {
  RaidLevel level;
  unsigned members;
  bool names_the_bad_chunk;
};

struct Scrubbed {
  test::MemoryArray array;
  std::unique_ptr<Volume> volume;
  std::unique_ptr<Level> level;
  AlignedBuffer data;

  explicit Scrubbed(const ScrubCase& c) : array(c.members, kDataOffset + kRows * kChunk) {
    auto geometry = Geometry::create(c.level, c.members, kChunk, kRows * kChunk);
    EXPECT_TRUE(geometry) << geometry.error().message;
    auto created = Volume::create(*geometry, array.members(), kDataOffset);
    EXPECT_TRUE(created) << created.error().message;
    volume = std::move(*created);
    level = Level::create(*geometry);
    data = test::random_buffer(volume->size(), 9);
    EXPECT_TRUE(volume->write(0, data.span()));
  }
  // Flips bytes [from, from + 512) of slot `slot` of `stripe`'s set on its member, unseen by
  // the array.
  ChunkLocation corrupt(uint64_t stripe, size_t slot, size_t from = 512) {
    const ChunkLocation at = level->redundancy_set(stripe)[slot];
    std::byte* chunk = array.media[at.member]->contents().data() + kDataOffset + at.member_offset;
    for (size_t i = from; i < from + 512; ++i) chunk[i] ^= std::byte{0xa5};
    return at;
  }
  Volume::ScrubCounts scrub(bool repair, const ScrubBatch* check = nullptr) {
    Volume::ScrubCounts counts;
    auto r = volume->scrub_stripes(0, volume->geometry().stripes(), repair, counts, check);
    EXPECT_TRUE(r) << r.error().message;
    return counts;
  }
  AlignedBuffer members_now() const {
    AlignedBuffer all(array.media.size() * (kDataOffset + kRows * kChunk));
    for (size_t m = 0; m < array.media.size(); ++m) {
      auto contents = array.media[m]->contents();
      std::memcpy(all.data() + m * contents.size(), contents.data(), contents.size());
    }
    return all;
  }
  void expect_data() {
    AlignedBuffer back(volume->size());
    ASSERT_TRUE(volume->read(0, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), back.size()), 0);
  }
};

// The checks a filesystem's checksums give: whether a block holds what was written there (the
// test knows it), or nothing to say for the blocks `known` leaves out.
class KnownData : public ScrubBatch {
 public:
  explicit KnownData(const AlignedBuffer& data, std::function<bool(uint64_t)> known = {})
      : data_(data), known_(std::move(known)) {}
  uint32_t block_size() const override { return 4096; }
  Verdict check(uint64_t offset, std::span<const std::byte> block) const override {
    EXPECT_EQ(block.size(), 4096u);
    EXPECT_EQ(offset % 4096, 0u);
    if (known_ && !known_(offset)) return Verdict::unknown;
    return std::memcmp(block.data(), data_.data() + offset, block.size()) == 0 ? Verdict::good
                                                                               : Verdict::bad;
  }

 private:
  const AlignedBuffer& data_;
  std::function<bool(uint64_t)> known_;
};

class VolumeScrub : public testing::TestWithParam<ScrubCase> {};

INSTANTIATE_TEST_SUITE_P(
    , VolumeScrub,
    testing::Values(ScrubCase{RaidLevel::raid1, 2, false}, ScrubCase{RaidLevel::raid1, 3, true},
                    ScrubCase{RaidLevel::raid10, 4, false}, ScrubCase{RaidLevel::raid5, 4, false},
                    ScrubCase{RaidLevel::raid6, 5, true}),
    [](const testing::TestParamInfo<ScrubCase>& info) {
      return std::string(to_string(info.param.level)) + "_" + std::to_string(info.param.members);
    });

// An unreadable sector (which a write remaps) in the middle: the scrub heals it as a read
// does and goes on to the end, checking only, and the member stays.
TEST_P(VolumeScrub, AnUnreadableSectorIsHealedAndTheScrubGoesOn) {
  Scrubbed s(GetParam());
  const ChunkLocation at = s.level->redundancy_set(2)[0];
  const uint64_t byte = kDataOffset + at.member_offset + 8192;
  s.array.faulty[at.member]->bad_sectors({byte, byte + 4096});
  const Volume::ScrubCounts counts = s.scrub(false);
  EXPECT_EQ(counts.stripes, s.volume->geometry().stripes()) << "it went on to the end";
  EXPECT_EQ(counts.mismatched, 0u);
  EXPECT_TRUE(s.volume->active(at.member));
  EXPECT_EQ(s.array.faulty[at.member]->counters().corrected, 1u);
  AlignedBuffer direct(4096);
  ASSERT_TRUE(member_read(*s.array.faulty[at.member], byte, direct.span()))
      << "rewritten, so it reads again";
  s.expect_data();
}

// Two members' reads fail in the same stripe where the level can rebuild two chunks (RAID6,
// three copies): both are read again before either is rebuilt, and rebuilt together, so
// neither is made from the other's unfilled buffer.
TEST(VolumeScrubTwoUnreadable, BothChunksOfAStripeAreRebuiltFromTheReadableOnes) {
  for (const ScrubCase c :
       {ScrubCase{RaidLevel::raid6, 5, true}, ScrubCase{RaidLevel::raid1, 3, true}}) {
    SCOPED_TRACE(std::string(to_string(c.level)));
    Scrubbed s(c);
    const AlignedBuffer before = s.members_now();
    for (size_t slot = 0; slot < 2; ++slot) {
      const ChunkLocation at = s.level->redundancy_set(2)[slot];
      const uint64_t byte = kDataOffset + at.member_offset + 4096;
      s.array.faulty[at.member]->bad_sectors({byte, byte + 4096});
    }
    const Volume::ScrubCounts counts = s.scrub(false);
    EXPECT_EQ(counts.stripes, s.volume->geometry().stripes());
    EXPECT_EQ(counts.mismatched, 0u) << "healed chunks were checked with the others";
    const AlignedBuffer after = s.members_now();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0)
        << "a healed chunk was written with other contents";
    s.expect_data();
  }
}

TEST_P(VolumeScrub, AConsistentArrayIsFoundSo) {
  Scrubbed s(GetParam());
  const Volume::ScrubCounts counts = s.scrub(true);
  EXPECT_EQ(counts.stripes, s.volume->geometry().stripes());
  EXPECT_EQ(counts.mismatched, 0u);
  EXPECT_EQ(counts.repaired, 0u);
  EXPECT_EQ(counts.unrepairable, 0u);
}

// Every slot of a stripe's set in turn (data, parity, each copy), each in its own stripe:
// found, and named on the right member where the level can tell; repaired then, so that a
// second scrub is clean. Where it cannot, check and repair both leave every byte as it was.
TEST_P(VolumeScrub, ACorruptedChunkIsFoundAndRepairedOnlyWhenItCanBeNamed) {
  const ScrubCase c = GetParam();
  Scrubbed s(c);
  const size_t slots = s.level->redundancy_set(0).size();
  std::vector<uint64_t> expected(c.members, 0);
  for (size_t slot = 0; slot < slots; ++slot) {
    ++expected[s.corrupt(slot * 3 + 1, slot).member];
  }
  const AlignedBuffer before = s.members_now();
  Volume::ScrubCounts check = s.scrub(false);
  EXPECT_EQ(check.mismatched, slots);
  EXPECT_EQ(check.repaired, 0u);
  AlignedBuffer after = s.members_now();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "a check wrote";
  if (!c.names_the_bad_chunk) {
    EXPECT_EQ(check.unrepairable, slots);
    const Volume::ScrubCounts repair = s.scrub(true);
    EXPECT_EQ(repair.unrepairable, slots);
    EXPECT_EQ(repair.repaired, 0u);
    after = s.members_now();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "rewritten on a guess";
    return;
  }
  EXPECT_EQ(check.unrepairable, 0u);
  EXPECT_EQ(check.bad_chunks, expected) << "a chunk was named on the wrong member";
  const Volume::ScrubCounts repair = s.scrub(true);
  EXPECT_EQ(repair.repaired, slots);
  EXPECT_EQ(repair.bad_chunks, expected);
  const Volume::ScrubCounts again = s.scrub(false);
  EXPECT_EQ(again.mismatched, 0u) << "not clean after the repair";
  s.expect_data();
}

// With checks on the data (a filesystem's checksums), every level names the bad chunk, RAID5
// and two copies included: the copy or data chunk that fails its check, or P (and Q) when all
// the data passes. Repaired, a second scrub is clean.
TEST_P(VolumeScrub, WithChecksEveryCorruptedChunkIsNamedAndRepaired) {
  const ScrubCase c = GetParam();
  Scrubbed s(c);
  const KnownData check(s.data);
  const size_t slots = s.level->redundancy_set(0).size();
  std::vector<uint64_t> expected(c.members, 0);
  for (size_t slot = 0; slot < slots; ++slot) {
    ++expected[s.corrupt(slot * 3 + 1, slot).member];
  }
  const AlignedBuffer before = s.members_now();
  const Volume::ScrubCounts found = s.scrub(false, &check);
  EXPECT_EQ(found.mismatched, slots);
  EXPECT_EQ(found.unrepairable, 0u);
  EXPECT_EQ(found.bad_chunks, expected) << "a chunk was named on the wrong member";
  const size_t data_slots =
      s.volume->geometry().has_parity() ? s.volume->geometry().data_chunks() : slots;
  EXPECT_EQ(found.bad_data, data_slots);
  EXPECT_EQ(found.bad_parity, slots - data_slots);
  EXPECT_EQ(found.checksum_failures, data_slots) << "one block of each bad data chunk";
  EXPECT_EQ(found.verified_blocks,
            s.volume->size() / 4096 * (s.volume->geometry().has_parity() ? 1 : slots));
  AlignedBuffer after = s.members_now();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "a check wrote";
  const Volume::ScrubCounts repair = s.scrub(true, &check);
  EXPECT_EQ(repair.repaired, slots);
  EXPECT_EQ(repair.bad_chunks, expected);
  const Volume::ScrubCounts again = s.scrub(false, &check);
  EXPECT_EQ(again.mismatched, 0u) << "not clean after the repair";
  EXPECT_EQ(again.checksum_failures, 0u);
  s.expect_data();
}

// The background scrub's way: a call per round with the same buffers, a round longer than
// the pipeline (so every batch slot is used, and the first is used again). Each round judges its
// own stripes, not what an earlier round left in the buffers, a read that fails in a later round is
// healed from what that round read, and the buffers are allocated once.
TEST_P(VolumeScrub, RoundsWithKeptBuffersFindWhatOneCallFinds) {
  Scrubbed s(GetParam());
  const KnownData check(s.data);
  const uint64_t stripes = s.volume->geometry().stripes();
  const uint64_t round = s.volume->scrub_depth() * s.volume->scrub_batch() + 3;
  ASSERT_GT(stripes, round + 2) << "the test needs a second round";
  const uint64_t bad_stripe = round - 2;  // in the first round's last batch, a reused slot
  const ChunkLocation bad = s.corrupt(bad_stripe, 0);
  const ChunkLocation unreadable = s.level->redundancy_set(round + 1)[0];  // second round
  const uint64_t byte = kDataOffset + unreadable.member_offset + 4096;
  s.array.faulty[unreadable.member]->bad_sectors({byte, byte + 4096});
  Volume::ScrubBuffers buffers;
  Volume::ScrubCounts total;
  for (uint64_t stripe = 0; stripe < stripes; stripe += round) {
    Volume::ScrubCounts counts;
    auto r = s.volume->scrub_stripes(stripe, round, false, counts, &check, &buffers);
    ASSERT_TRUE(r) << r.error().message;
    const bool holds_bad = stripe <= bad_stripe && bad_stripe < stripe + round;
    EXPECT_EQ(counts.mismatched, holds_bad ? 1u : 0u) << "round from stripe " << stripe;
    total.add(counts);
  }
  EXPECT_EQ(buffers.allocations, 1u);
  EXPECT_EQ(total.stripes, stripes);
  EXPECT_EQ(total.mismatched, 1u);
  EXPECT_EQ(total.unrepairable, 0u);
  EXPECT_EQ(total.bad_chunks[bad.member], 1u);
  EXPECT_EQ(s.array.faulty[unreadable.member]->counters().corrected, 1u);
  EXPECT_TRUE(s.volume->active(unreadable.member));
}

// Several workers find, name and repair what one finds, with reads that complete as they are
// submitted (memory members) and with reads that complete later, on another thread (a
// latency: every worker keeps batches in flight). Bad chunks in many batches, every slot.
TEST_P(VolumeScrub, ManyWorkersFindAndRepairWhatOneFinds) {
  const ScrubCase c = GetParam();
  for (const auto latency : {std::chrono::microseconds(0), std::chrono::microseconds(200)}) {
    SCOPED_TRACE(latency.count() == 0 ? "inline" : "in flight");
    Scrubbed s(c);
    const KnownData check(s.data);
    const size_t slots = s.level->redundancy_set(0).size();
    std::vector<uint64_t> expected(c.members, 0);
    uint64_t bad = 0;
    for (uint64_t stripe = 1; stripe < kRows; stripe += 11, ++bad) {
      ++expected[s.corrupt(stripe, bad % slots).member];
    }
    for (auto& f : s.array.faulty) f->set_latency(latency);
    const AlignedBuffer before = s.members_now();
    s.volume->set_scrub_workers(1);
    const Volume::ScrubCounts one = s.scrub(false, &check);
    s.volume->set_scrub_workers(4);
    const Volume::ScrubCounts four = s.scrub(false, &check);
    for (const Volume::ScrubCounts* counts : {&one, &four}) {
      EXPECT_EQ(counts->stripes, s.volume->geometry().stripes());
      EXPECT_EQ(counts->mismatched, bad);
      EXPECT_EQ(counts->unrepairable, 0u);
      EXPECT_EQ(counts->bad_chunks, expected);
    }
    EXPECT_EQ(four.bad_data, one.bad_data);
    EXPECT_EQ(four.bad_parity, one.bad_parity);
    EXPECT_EQ(four.verified_blocks, one.verified_blocks);
    EXPECT_EQ(four.checksum_failures, one.checksum_failures);
    const AlignedBuffer after = s.members_now();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "a check wrote";
    const Volume::ScrubCounts repair = s.scrub(true, &check);
    EXPECT_EQ(repair.repaired, bad);
    EXPECT_EQ(repair.bad_chunks, expected);
    EXPECT_EQ(s.scrub(false, &check).mismatched, 0u) << "not clean after the repair";
    for (auto& f : s.array.faulty) f->set_latency({});
    ASSERT_TRUE(s.volume->write(0, s.data.span())) << "every stripe lock was let go";
    s.expect_data();
  }
}

// A worker whose batch cannot be read (healing is off) stops them all: the scrub fails naming
// the member, and every stripe it locked is let go (a write of the whole volume goes through).
TEST_P(VolumeScrub, AFailingWorkerStopsTheOthersAndLetsGoOfItsStripes) {
  for (const auto latency : {std::chrono::microseconds(0), std::chrono::microseconds(200)}) {
    SCOPED_TRACE(latency.count() == 0 ? "inline" : "in flight");
    Scrubbed s(GetParam());
    s.volume->set_scrub_workers(4);
    s.volume->set_read_error_policy(0, {});
    const ChunkLocation at = s.level->redundancy_set(kRows / 2)[0];
    s.array.faulty[at.member]->fail_range(
        MemberOp::read, {kDataOffset + at.member_offset, kDataOffset + at.member_offset + 4096});
    for (auto& f : s.array.faulty) f->set_latency(latency);
    Volume::ScrubCounts counts;
    auto r = s.volume->scrub_stripes(0, kRows, false, counts);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(s.array.faulty[at.member]->name()), std::string::npos)
        << r.error().message;
    EXPECT_LT(counts.stripes, kRows);
    s.array.faulty[at.member]->heal();
    for (auto& f : s.array.faulty) f->set_latency({});
    ASSERT_TRUE(s.volume->write(0, s.data.span()));
    s.expect_data();
  }
}

// The judging runs on more than one thread: with the first batch's read held back, the other
// worker judges the rest of the volume meanwhile (one worker would wait for it first).
TEST(VolumeScrubWorkers, AnotherWorkerGoesOnWhileOneWaitsForItsRead) {
  Scrubbed s({RaidLevel::raid5, 4, false});
  s.volume->set_scrub_workers(2);
  struct Counting : KnownData {
    using KnownData::KnownData;
    Verdict check(uint64_t offset, std::span<const std::byte> block) const override {
      calls.fetch_add(1);
      return KnownData::check(offset, block);
    }
    mutable std::atomic<uint64_t> calls{0};
  } check(s.data);
  FaultyMember& first = *s.array.faulty[s.level->redundancy_set(0)[0].member];
  first.hold(MemberOp::read, {kDataOffset, kDataOffset + 4096});
  Volume::ScrubCounts counts;
  Result<void> scrubbed;
  std::thread scrub([&] { scrubbed = s.volume->scrub_stripes(0, kRows, false, counts, &check); });
  // The worker with the held read has at most two batches (of scrub_batch() stripes) taken;
  // the rest is the other's. Data blocks: 3 data chunks of kChunk per stripe.
  const uint64_t others = (kRows - 2 * s.volume->scrub_batch()) * 3 * (kChunk / 4096);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (check.calls.load() < others && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(check.calls.load(), others) << "nothing went on while a read was held";
  EXPECT_EQ(first.held(), 1u);
  first.release_held();
  scrub.join();
  ASSERT_TRUE(scrubbed) << scrubbed.error().message;
  EXPECT_EQ(counts.stripes, kRows);
  EXPECT_EQ(counts.mismatched, 0u);
  EXPECT_EQ(counts.verified_blocks, kRows * 3 * (kChunk / 4096));
}

// A row whose bad chunk could be a block without a check or the parity is not guessed, checks
// or no checks: RAID5's data chunk 0 unknown, the others known good.
TEST(VolumeScrubRaid5, ABlockWithoutACheckIsNotTakenForGood) {
  Scrubbed s({RaidLevel::raid5, 4, false});
  const uint64_t stripe_bytes = s.volume->geometry().stripe_data_size();
  const KnownData check(s.data, [&](uint64_t offset) { return offset % stripe_bytes >= kChunk; });
  s.corrupt(2, 0);
  const AlignedBuffer before = s.members_now();
  const Volume::ScrubCounts counts = s.scrub(true, &check);
  EXPECT_EQ(counts.mismatched, 1u);
  EXPECT_EQ(counts.unrepairable, 1u);
  EXPECT_EQ(counts.repaired, 0u);
  EXPECT_EQ(counts.checksum_failures, 0u);
  const AlignedBuffer after = s.members_now();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "rewritten on a guess";
}

// More bad chunks in a row than the level can rebuild: found, and nothing is written, checks
// or no checks. RAID5 with two data chunks bad in one row; two copies both bad in one row
// (a row that agrees with itself but fails its checks: the data is lost).
TEST(VolumeScrubChecks, TooManyBadChunksInARowAreLeftAsTheyAre) {
  for (const ScrubCase c :
       {ScrubCase{RaidLevel::raid5, 4, false}, ScrubCase{RaidLevel::raid1, 2, false}}) {
    Scrubbed s(c);
    const KnownData check(s.data);
    s.corrupt(3, 0);
    s.corrupt(3, 1);
    const AlignedBuffer before = s.members_now();
    const Volume::ScrubCounts counts = s.scrub(true, &check);
    EXPECT_EQ(counts.mismatched, 1u) << to_string(c.level);
    EXPECT_EQ(counts.unrepairable, 1u) << to_string(c.level);
    EXPECT_EQ(counts.repaired, 0u) << to_string(c.level);
    EXPECT_EQ(counts.checksum_failures, 2u) << to_string(c.level);
    const AlignedBuffer after = s.members_now();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << to_string(c.level);
  }
}

// Two bad chunks in one row are more than RAID6 can name without checks: found, left as they
// are. Bad chunks in different rows of one stripe are each named.
TEST(VolumeScrubRaid6, TwoBadChunksInOneRowAreNotGuessed) {
  Scrubbed s({RaidLevel::raid6, 5, true});
  s.corrupt(2, 0, 512);
  s.corrupt(2, 3, 1024);
  const AlignedBuffer before = s.members_now();
  const Volume::ScrubCounts counts = s.scrub(true);
  EXPECT_EQ(counts.mismatched, 1u);
  EXPECT_EQ(counts.unrepairable, 1u);
  EXPECT_EQ(counts.repaired, 0u);
  const AlignedBuffer after = s.members_now();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0);
}

TEST(VolumeScrubRaid6, BadChunksInDifferentRowsAreEachNamed) {
  Scrubbed s({RaidLevel::raid6, 5, true});
  s.corrupt(2, 0, 512);
  s.corrupt(2, 3, 4096 + 512);
  const Volume::ScrubCounts counts = s.scrub(true);
  EXPECT_EQ(counts.mismatched, 1u);
  EXPECT_EQ(counts.unrepairable, 0u);
  EXPECT_EQ(counts.repaired, 1u);
  EXPECT_EQ(counts.bad_data, 1u);
  EXPECT_EQ(counts.bad_parity, 1u);
  EXPECT_EQ(s.scrub(false).mismatched, 0u);
  s.expect_data();
}

// A data chunk and P off by the same bytes: P still matches the data, and the syndromes point
// at Q. Without checks the scrub would rewrite Q to match the bad data (so it only checks
// here); with them, the data fails, and leaving out the data and P is the one answer.
TEST(VolumeScrubRaid6, ADataChunkAndPBadTogetherAreNamedByTheChecks) {
  Scrubbed s({RaidLevel::raid6, 5, true});
  const KnownData check(s.data);
  const ChunkLocation data = s.corrupt(4, 1);
  const ChunkLocation p = s.corrupt(4, 3);
  const ChunkLocation q = s.level->redundancy_set(4)[4];
  const Volume::ScrubCounts blind = s.scrub(false);
  EXPECT_EQ(blind.bad_chunks[q.member], 1u) << "the case this test is about: it looks like Q";
  const Volume::ScrubCounts counts = s.scrub(true, &check);
  EXPECT_EQ(counts.unrepairable, 0u);
  EXPECT_EQ(counts.repaired, 1u);
  EXPECT_EQ(counts.bad_chunks[data.member], 1u);
  EXPECT_EQ(counts.bad_chunks[p.member], 1u);
  EXPECT_EQ(counts.bad_chunks[q.member], 0u);
  EXPECT_EQ(s.scrub(false, &check).mismatched, 0u);
  s.expect_data();
}

}  // namespace
}  // namespace stripefs
