#include "journal/journal.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <thread>

#include "raid/faulty_member.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kDeviceSize = 8 << 20;
const Uuid kArray = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// A transaction as the tests write it and expect it back.
struct Tx {
  std::vector<uint64_t> targets;
  std::vector<AlignedBuffer> images;

  Tx(uint64_t id, unsigned blocks) {
    for (unsigned i = 0; i < blocks; ++i) {
      targets.push_back(id * 100 + i);
      images.push_back(test::random_buffer(kJournalBlockSize, id * 1000 + i));
    }
  }
  std::vector<JournalBlock> blocks() const {
    std::vector<JournalBlock> out;
    for (size_t i = 0; i < targets.size(); ++i) out.push_back({targets[i], images[i].span()});
    return out;
  }
};

// What replay handed back: (target, first 8 bytes of the image) per block, in order.
using Replayed = std::vector<std::pair<uint64_t, std::vector<std::byte>>>;

Replayed expected(const std::vector<const Tx*>& txs) {
  Replayed out;
  for (const Tx* tx : txs) {
    for (size_t i = 0; i < tx->targets.size(); ++i) {
      out.emplace_back(tx->targets[i],
                       std::vector<std::byte>(tx->images[i].data(), tx->images[i].data() + 4096));
    }
  }
  return out;
}

Result<Replayed> replay(Member& device) {
  auto journal = Journal::open(device, 0, kArray);
  if (!journal) return fail(journal.error());
  Replayed out;
  auto r =
      (*journal)->replay([&](uint64_t target, std::span<const std::byte> data) -> Result<void> {
        out.emplace_back(target, std::vector<std::byte>(data.begin(), data.end()));
        return {};
      });
  if (!r) return fail(r.error());
  return out;
}

struct Fixture {
  MemoryMember media{"journal-dev", kDeviceSize};
  std::unique_ptr<Journal> journal;

  explicit Fixture(uint64_t blocks = 64) {
    EXPECT_TRUE(Journal::format(media, 0, blocks, kArray));
    auto opened = Journal::open(media, 0, kArray);
    EXPECT_TRUE(opened) << opened.error().message;
    journal = std::move(*opened);
    auto replayed = journal->replay([](uint64_t, std::span<const std::byte>) -> Result<void> {
      ADD_FAILURE() << "a fresh journal replays nothing";
      return {};
    });
    EXPECT_TRUE(replayed);
  }
  std::vector<std::byte> snapshot() { return {media.contents().begin(), media.contents().end()}; }
  void restore(const std::vector<std::byte>& image) {
    std::copy(image.begin(), image.end(), media.contents().begin());
  }
};

TEST(Journal, ReplayReturnsEveryDurableTransactionInOrder) {
  Fixture f;
  std::vector<std::unique_ptr<Tx>> txs;
  std::vector<const Tx*> all;
  for (unsigned i = 1; i <= 5; ++i) {
    txs.push_back(std::make_unique<Tx>(i, i));
    auto seq = f.journal->commit(txs.back()->blocks());
    ASSERT_TRUE(seq) << seq.error().message;
    EXPECT_EQ(*seq, i);
    all.push_back(txs.back().get());
  }
  auto back = replay(f.media);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, expected(all));
}

// A block whose owner sealed it (its checksum when handed over) and that changed before the
// batch was written is never journaled: its transaction fails, the journal goes on.
TEST(Journal, ABlockChangedAfterItWasSealedIsNotJournaled) {
  Fixture f;
  Tx first(1, 2);
  ASSERT_TRUE(f.journal->commit(first.blocks()));
  Tx second(2, 3);
  std::vector<JournalBlock> blocks = second.blocks();
  for (JournalBlock& b : blocks) {
    b.sealed = data_block_checksum(
        std::span<const std::byte, kJournalBlockSize>(b.data.data(), kJournalBlockSize));
  }
  second.images[1].data()[100] ^= std::byte{1};  // changed after it was sealed
  auto refused = f.journal->commit(blocks);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, EIO);
  EXPECT_NE(refused.error().message.find("block 201"), std::string::npos)
      << refused.error().message;
  // Sealed and unchanged: journaled.
  Tx third(3, 2);
  blocks = third.blocks();
  for (JournalBlock& b : blocks) {
    b.sealed = data_block_checksum(
        std::span<const std::byte, kJournalBlockSize>(b.data.data(), kJournalBlockSize));
  }
  ASSERT_TRUE(f.journal->commit(blocks));
  auto back = replay(f.media);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, expected({&first, &third}));
}

// The last transaction cut at every sector boundary: replay gives the state before it or
// after it, never a mix.
TEST(Journal, TornLastTransactionReplaysWholeOrNotAtAll) {
  Fixture f;
  Tx a(1, 2), b(2, 3), last(3, 4);
  ASSERT_TRUE(f.journal->commit(a.blocks()));
  ASSERT_TRUE(f.journal->commit(b.blocks()));
  const auto before = f.snapshot();
  ASSERT_TRUE(f.journal->commit(last.blocks()));
  const auto after = f.snapshot();
  // The last transaction's blocks: descriptor + 4 images + commit, after a's 4 and b's 5.
  const uint64_t begin = (1 + 4 + 5) * kJournalBlockSize;
  const uint64_t end = begin + 6 * kJournalBlockSize;
  const Replayed without = expected({&a, &b}), with = expected({&a, &b, &last});
  for (uint64_t cut = begin; cut <= end; cut += 512) {
    auto image = before;
    std::copy(after.begin() + begin, after.begin() + cut, image.begin() + begin);
    f.restore(image);
    auto back = replay(f.media);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, cut == end ? with : without) << "cut after byte " << cut - begin;
  }
  // A device that reorders writes: any subset of the sectors may have landed.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    auto image = before;
    for (uint64_t s = begin; s < end; s += 512) {
      if (rng() % 4 != 0) std::copy(after.begin() + s, after.begin() + s + 512, image.begin() + s);
    }
    f.restore(image);
    auto back = replay(f.media);
    ASSERT_TRUE(back);
    EXPECT_TRUE(*back == without || *back == with) << "trial " << trial << " mixed states";
  }
}

TEST(Journal, BitFlipsInsideTheLastTransactionDropItWhole) {
  Fixture f;
  Tx a(1, 2), last(2, 3);
  ASSERT_TRUE(f.journal->commit(a.blocks()));
  ASSERT_TRUE(f.journal->commit(last.blocks()));
  const auto after = f.snapshot();
  const uint64_t begin = (1 + 4) * kJournalBlockSize;
  const uint64_t end = begin + 5 * kJournalBlockSize;
  for (uint64_t bit = begin * 8; bit < end * 8; bit += 331) {
    auto image = after;
    image[bit / 8] ^= std::byte(1u << (bit % 8));
    f.restore(image);
    auto back = replay(f.media);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, expected({&a})) << "bit " << bit - begin * 8;
  }
}

// Transactions committed while one is in flight share the next batch and its one flush.
TEST(Journal, ConcurrentCommitsAreGrouped) {
  MemoryMember media("journal-dev", kDeviceSize);
  FaultyMember slow(media);
  slow.set_latency(std::chrono::microseconds(2000));
  ASSERT_TRUE(Journal::format(slow, 0, 128, kArray));
  auto journal = Journal::open(slow, 0, kArray);
  ASSERT_TRUE(journal);
  ASSERT_TRUE(
      (*journal)->replay([](uint64_t, std::span<const std::byte>) -> Result<void> { return {}; }));
  constexpr int kThreads = 4, kEach = 8;
  std::vector<std::unique_ptr<Tx>> txs;
  for (int i = 0; i < kThreads * kEach; ++i) txs.push_back(std::make_unique<Tx>(i + 1, 1));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto seq = (*journal)->commit(txs[t * kEach + i]->blocks());
        EXPECT_TRUE(seq) << seq.error().message;
      }
    });
  }
  for (auto& th : threads) th.join();
  const JournalStats stats = (*journal)->stats();
  EXPECT_EQ(stats.transactions, uint64_t{kThreads * kEach});
  EXPECT_LT(stats.batches, stats.transactions) << "no commit was grouped";
  auto back = replay(media);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->size(), size_t{kThreads * kEach});
}

TEST(Journal, WrapsAroundWithCheckpointsAndRefusesWhenFull) {
  Fixture f(16);  // 15 log blocks: three 2-block transactions (4 blocks each) fit
  std::vector<std::unique_ptr<Tx>> txs;
  for (unsigned i = 1; i <= 40; ++i) {
    txs.push_back(std::make_unique<Tx>(i, 2));
    auto seq = f.journal->commit(txs.back()->blocks());
    ASSERT_TRUE(seq) << "transaction " << i << ": " << seq.error().message;
    ASSERT_TRUE(f.journal->checkpoint(*seq));
  }
  EXPECT_EQ(f.journal->used_blocks(), 0u);
  Tx x(100, 2), y(101, 2), z(102, 2), w(103, 2);
  ASSERT_TRUE(f.journal->commit(x.blocks()));
  ASSERT_TRUE(f.journal->commit(y.blocks()));
  ASSERT_TRUE(f.journal->commit(z.blocks()));
  auto full = f.journal->commit(w.blocks());
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ENOSPC);
  auto back = replay(f.media);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, expected({&x, &y, &z})) << "exactly the live transactions, across the wrap";
  ASSERT_TRUE(f.journal->checkpoint(41));  // x
  ASSERT_TRUE(f.journal->commit(w.blocks()));
  back = replay(f.media);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, expected({&y, &z, &w}));
}

// Replay reads the whole log, a piece at a time, for the highest sequence anything in it
// carries: a valid-looking transaction left behind a torn one (here: behind a format that
// reset the log) must not be followed by a new one of a sequence at or below its own, even
// when it sits in the log's last piece.
TEST(Journal, NewSequencesStartAboveAnythingInTheWholeLog) {
  constexpr uint64_t kBlocks = 701;  // 700 log blocks: more than two 1 MiB pieces
  // The device ends where the log does: a scan reading whole pieces past it would fail.
  MemoryMember media("journal-dev", kBlocks * kJournalBlockSize);
  ASSERT_TRUE(Journal::format(media, 0, kBlocks, kArray));
  const auto nothing = [](uint64_t, std::span<const std::byte>) -> Result<void> {
    ADD_FAILURE() << "nothing to replay";
    return {};
  };
  uint64_t last = 0;
  {
    auto opened = Journal::open(media, 0, kArray);
    ASSERT_TRUE(opened) << opened.error().message;
    ASSERT_TRUE((*opened)->replay(nothing));
    std::vector<std::unique_ptr<Tx>> txs;
    for (unsigned i = 1; i <= 58; ++i) {  // 58 transactions of 12 blocks: to log block 696
      txs.push_back(std::make_unique<Tx>(i, 10));
      auto seq = (*opened)->commit(txs.back()->blocks());
      ASSERT_TRUE(seq) << "transaction " << i << ": " << seq.error().message;
      ASSERT_TRUE((*opened)->checkpoint(*seq));
      last = *seq;
    }
  }
  ASSERT_TRUE(Journal::format(media, 0, kBlocks, kArray));  // tail and sequence start over
  auto journal = Journal::open(media, 0, kArray);
  ASSERT_TRUE(journal) << journal.error().message;
  auto replayed = (*journal)->replay(nothing);
  ASSERT_TRUE(replayed) << replayed.error().message;
  Tx next(100, 1);
  auto seq = (*journal)->commit(next.blocks());
  ASSERT_TRUE(seq) << seq.error().message;
  EXPECT_GT(*seq, last) << "transaction " << last << " is still in the log's last blocks";
}

// On a RAID5/6 volume the log is written in whole stripes: every group commit is padded to
// end on an alignment boundary (of the device's bytes, wherever the area starts), the
// next starts on one, and replay skips the padding, across wrap-arounds too.
TEST(Journal, AlignedBatchesEndOnBoundariesAndReplayAcrossPadding) {
  constexpr uint64_t kAlign = 8 * kJournalBlockSize;
  constexpr uint64_t kArea = 3 * kJournalBlockSize;  // not aligned: block 4 is the first log block
  MemoryMember media{"journal-dev", kDeviceSize};
  FaultyMember device(media);
  ASSERT_TRUE(Journal::format(device, kArea, 61, kArray));  // 60 log blocks: wraps often
  auto opened = Journal::open(device, kArea, kArray, kAlign);
  ASSERT_TRUE(opened) << opened.error().message;
  auto& journal = **opened;
  ASSERT_TRUE(
      journal.replay([](uint64_t, std::span<const std::byte>) -> Result<void> { return {}; }));
  std::mt19937_64 rng(11);
  std::vector<std::unique_ptr<Tx>> txs;
  std::deque<const Tx*> live;
  uint64_t padded = 0;
  bool previous_aligned = false;
  for (unsigned i = 1; i <= 60; ++i) {
    txs.push_back(std::make_unique<Tx>(i, 1 + static_cast<unsigned>(rng() % 9)));
    device.set_logging(true);
    auto seq = journal.commit(txs.back()->blocks());
    device.set_logging(false);
    ASSERT_TRUE(seq) << "transaction " << i << ": " << seq.error().message;
    live.push_back(txs.back().get());
    // One batch: its writes are contiguous (but for a wrap) and end on a boundary, or at
    // the end of the area (the wrap).
    uint64_t lo = UINT64_MAX, hi = 0, bytes = 0;
    for (const LoggedIo& io : device.take_log()) {
      if (io.op != MemberOp::write) continue;
      lo = std::min(lo, io.offset);
      hi = std::max(hi, io.offset + io.length);
      bytes += io.length;
    }
    const uint64_t area_end = kArea + 61 * kJournalBlockSize;
    if (hi - lo == bytes) {  // did not wrap
      // Padding is written unless it would more than double the batch.
      const bool small = (kAlign - hi % kAlign) % kAlign > bytes;
      EXPECT_TRUE(hi % kAlign == 0 || hi == area_end || small)
          << "transaction " << i << " ends at " << hi;
      if (previous_aligned) {
        EXPECT_TRUE(lo % kAlign == 0 || lo == kArea + kJournalBlockSize)
            << "transaction " << i << " starts at " << lo;
      }
      previous_aligned = hi % kAlign == 0;
    } else {
      previous_aligned = false;
    }
    padded = journal.stats().padding_blocks;
    if (live.size() == 3) {  // keep three live, so replay crosses padding and wraps
      ASSERT_TRUE(journal.checkpoint(*seq - 2));
      live.pop_front();
    }
    auto back = [&] {
      auto again = Journal::open(media, kArea, kArray);  // replay needs no alignment
      Replayed out;
      EXPECT_TRUE(
          (*again)->replay([&](uint64_t target, std::span<const std::byte> data) -> Result<void> {
            out.emplace_back(target, std::vector<std::byte>(data.begin(), data.end()));
            return {};
          }));
      return out;
    }();
    EXPECT_EQ(back, expected(std::vector<const Tx*>(live.begin(), live.end())))
        << "after transaction " << i;
  }
  EXPECT_GT(padded, 0u);
}

TEST(Journal, AlignmentThatCannotFitIsRefused) {
  MemoryMember media{"journal-dev", kDeviceSize};
  ASSERT_TRUE(Journal::format(media, 0, 16, kArray));
  auto odd = Journal::open(media, 0, kArray, 1000);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("alignment 1000"), std::string::npos) << odd.error().message;
  auto big = Journal::open(media, 0, kArray, 8 * kJournalBlockSize);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("two aligned units"), std::string::npos)
      << big.error().message;
}

// Past one descriptor's 254 blocks, a transaction chains descriptors and is still replayed
// whole or not at all.
TEST(Journal, LargeTransactionsChainDescriptorsAndStayAtomic) {
  Fixture f(1024);
  Tx small(1, 3), large(2, 600);
  ASSERT_TRUE(f.journal->commit(small.blocks()));
  const auto before = f.snapshot();
  ASSERT_TRUE(f.journal->commit(large.blocks()));
  const auto after = f.snapshot();
  auto back = replay(f.media);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, expected({&small, &large}));
  // Lose any one block of the large transaction (a middle descriptor, data, the commit).
  const uint64_t begin = (1 + 5) * kJournalBlockSize;
  const uint64_t blocks = 600 + 3 + 1;
  for (uint64_t lost : {uint64_t{0}, uint64_t{100}, uint64_t{255}, uint64_t{509}, blocks - 1}) {
    auto image = after;
    const uint64_t at = begin + lost * kJournalBlockSize;
    std::copy(before.begin() + at, before.begin() + at + kJournalBlockSize, image.begin() + at);
    f.restore(image);
    back = replay(f.media);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, expected({&small})) << "block " << lost << " of the transaction lost";
  }
}

TEST(Journal, DamagedSuperblockIsRefusedNamingDeviceAndField) {
  Fixture f;
  f.media.contents()[100] ^= std::byte{1};
  auto refused = Journal::open(f.media, 0, kArray);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("journal-dev"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("checksum"), std::string::npos) << refused.error().message;
  Uuid other = kArray;
  other[0] ^= 1;
  f.media.contents()[100] ^= std::byte{1};
  EXPECT_FALSE(Journal::open(f.media, 0, other)) << "another array's journal";
}

TEST(Journal, CommitBeforeReplayAndBadTransactionsAreRefused) {
  MemoryMember media("journal-dev", kDeviceSize);
  ASSERT_TRUE(Journal::format(media, 0, 64, kArray));
  auto journal = Journal::open(media, 0, kArray);
  Tx a(1, 1);
  auto early = (*journal)->commit(a.blocks());
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message.find("replay"), std::string::npos);
  ASSERT_TRUE(
      (*journal)->replay([](uint64_t, std::span<const std::byte>) -> Result<void> { return {}; }));
  auto empty = (*journal)->commit(std::vector<JournalBlock>{});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, EINVAL);
  EXPECT_FALSE(Journal::format(media, 0, 4, kArray)) << "too small";
}

}  // namespace
}  // namespace stripefs
