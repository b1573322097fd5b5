// Data checksums on the whole core (RAID5 of memory members): a block of a file corrupted on
// its member behind the filesystem's back is caught on read, the right bytes come back from
// parity and the member's chunk is rewritten; two wrong chunks of one row give EIO, never
// wrong bytes; and copy on write keeps a crash between an overwrite's data and its commit
// from leaving data that fails its checksum.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "fs/core/read_index.hpp"
#include "raid/geometry.hpp"

#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::kBlockSize;
using fs::kRootInode;

// Files are whole stripes (3 data chunks of 64 KiB): in a stripe with one data chunk
// written and the others zero, P equals that chunk, and a search would find P.
constexpr size_t kStripe = 3 * MemoryFs::kChunk;

// Where a block's bytes sit on the members: member and byte offset (the first match).
std::optional<std::pair<unsigned, uint64_t>> find_on_members(MemoryFs& t,
                                                             std::span<const std::byte> block) {
  for (unsigned m = 0; m < t.array.media.size(); ++m) {
    auto c = t.array.media[m]->contents();
    for (uint64_t at = 0; at + block.size() <= c.size(); at += kBlockSize) {
      if (std::memcmp(c.data() + at, block.data(), block.size()) == 0) return {{m, at}};
    }
  }
  return std::nullopt;
}

void flip(MemoryFs& t, unsigned member, uint64_t at) {
  auto c = t.array.media[member]->contents();
  for (uint64_t i = 64; i < 192; ++i) c[at + i] ^= std::byte{0x6b};
}

struct Written {
  uint64_t ino;
  std::vector<std::byte> data;
};

Written write_file(MemoryFs& t, const char* name, size_t size, uint64_t seed) {
  Written w{t.create(kRootInode, name), pattern(size, seed)};
  EXPECT_TRUE(t.write(w.ino, 0, w.data).has_value());
  EXPECT_TRUE(t.fs->sync().has_value());
  t.remount();  // nothing of the file is cached: reads come from the members
  return w;
}

TEST(DataChecksums, AWrongDataChunkIsCaughtRecoveredAndRewritten) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe * 2, 11);
  // Each of a few blocks, each on whichever member holds it.
  for (uint64_t block : {0, 5, 17, 40}) {
    const std::span<const std::byte> bytes(f.data.data() + block * kBlockSize, kBlockSize);
    auto where = find_on_members(t, bytes);
    ASSERT_TRUE(where) << "block " << block << " is not on any member";
    flip(t, where->first, where->second);
    const uint64_t errors = t.array.faulty[where->first]->counters().checksum_errors;
    EXPECT_TRUE(t.read(f.ino, 0, f.data.size()) == f.data) << "block " << block;
    EXPECT_EQ(t.array.faulty[where->first]->counters().checksum_errors, errors + 1);
    EXPECT_EQ(find_on_members(t, bytes), where) << "the chunk was not rewritten";
  }
  EXPECT_EQ(t.fs->stats().checksum_recovered, 4u);
  EXPECT_EQ(t.fs->stats().checksum_unrecoverable, 0u);
  EXPECT_EQ(t.volume->missing_members(), 0u);
}

// A write that fills the rest of its block from the volume (the blocking path) checks it.
TEST(DataChecksums, EdgeFillsOfWritesAreCheckedToo) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe, 12);
  const std::span<const std::byte> bytes(f.data.data() + 3 * kBlockSize, kBlockSize);
  auto where = find_on_members(t, bytes);
  ASSERT_TRUE(where);
  flip(t, where->first, where->second);
  // A 10-byte write into block 3 reads the rest of the block first.
  const std::vector<std::byte> ten(10, std::byte{0xee});
  ASSERT_TRUE(t.write(f.ino, 3 * kBlockSize + 100, ten).has_value());
  std::vector<std::byte> expected = f.data;
  std::copy(ten.begin(), ten.end(), expected.begin() + 3 * kBlockSize + 100);
  EXPECT_TRUE(t.read(f.ino, 0, expected.size()) == expected);
  EXPECT_EQ(t.fs->stats().checksum_recovered, 1u);
}

TEST(DataChecksums, TwoWrongChunksOfOneRowAreEioNotWrongBytes) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe * 3, 13);
  // Block 0 of the file and the block beside it in the same row of the stripe (another data
  // chunk's first block: chunk 64 KiB, so file block 16), both corrupted: parity cannot
  // rebuild either.
  for (uint64_t block : {0, 16}) {
    auto where = find_on_members(
        t, std::span<const std::byte>(f.data.data() + block * kBlockSize, kBlockSize));
    ASSERT_TRUE(where);
    flip(t, where->first, where->second);
  }
  auto r = t.fs->read(f.ino, 0, kBlockSize);
  ASSERT_FALSE(r.has_value()) << "wrong bytes were returned";
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_GE(t.fs->stats().checksum_unrecoverable, 1u);
  // The rest of the file still reads.
  EXPECT_TRUE(t.read(f.ino, 48 * kBlockSize, 64 << 10) ==
              std::vector<std::byte>(f.data.begin() + 48 * kBlockSize,
                                     f.data.begin() + 48 * kBlockSize + (64 << 10)));
}

// An overwrite written back but not committed when the daemon dies: the old extents and the
// old checksums are what the journal holds, and the old data is still where they point
// (copy on write), so the file reads as it was, without a checksum error.
TEST(DataChecksums, ACrashBetweenAnOverwritesDataAndItsCommitLeavesTheOldData) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe * 2, 14);
  t.fs.reset();
  fs::FsOptions eager;
  eager.writeback_delay_s = 0.01;  // written back at the next tick...
  eager.commit_interval_s = 3600;  // ...and never committed
  t.mount(eager);
  const std::vector<std::byte> other = pattern(f.data.size(), 15);
  ASSERT_TRUE(t.write(f.ino, 0, other).has_value());
  for (int i = 0; i < 500 && t.fs->stats().writeback_done_bytes < other.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(t.fs->stats().writeback_done_bytes, other.size());
  t.crash_and_mount();
  EXPECT_TRUE(t.read(f.ino, 0, f.data.size()) == f.data);
  EXPECT_EQ(t.fs->stats().checksum_recovered + t.fs->stats().checksum_unrecoverable, 0u);
}

TEST(DataChecksums, OverwritesMoveAndTheOldBlocksAreFreed) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe, 16);
  const std::span<const std::byte> first_block(f.data.data(), kBlockSize);
  const auto old_place = find_on_members(t, first_block);
  ASSERT_TRUE(old_place);
  const uint64_t free_before = t.fs->statfs().blocks_free;
  const std::vector<std::byte> other = pattern(f.data.size(), 17);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(t.write(f.ino, 0, other).has_value());
    ASSERT_TRUE(t.fs->sync().has_value());
    // The overwrite went elsewhere: the old bytes are still where they were.
    if (round == 0) {
      EXPECT_EQ(find_on_members(t, first_block), old_place) << "overwritten in place";
    }
  }
  t.remount();
  EXPECT_TRUE(t.read(f.ino, 0, other.size()) == other);
  EXPECT_EQ(t.fs->statfs().blocks_free, free_before) << "blocks replaced were not freed";
}

// A file rewritten block by block at random holds an extent per rewritten block, and its
// reads are answered from the extent map's ReadIndex (a page per 512 blocks, made by the
// reads): reads of every length, between further rewrites that change the pages, return
// what was written last. The file stays open, as it would under a workload, so its map
// (and index) lives from round to round and the rewrites change the index's pages.
TEST(DataChecksums, AFileRewrittenAtRandomReadsWhatWasWrittenLast) {
  MemoryFs t;
  constexpr size_t kBlocks = 4 * 512;
  Written f = write_file(t, "f", kBlocks * kBlockSize, 20);
  ASSERT_TRUE(t.fs->open(f.ino).has_value());
  const uint64_t pages_before = fs::ReadIndex::pages_made();
  std::mt19937_64 rng(21);
  for (int round = 0; round < 12; ++round) {
    for (int i = 0; i < 300; ++i) {
      const uint64_t b = rng() % kBlocks;
      const std::vector<std::byte> block = pattern(kBlockSize, 1000 * round + i);
      ASSERT_TRUE(t.write(f.ino, b * kBlockSize, block).has_value());
      std::copy(block.begin(), block.end(), f.data.begin() + b * kBlockSize);
    }
    ASSERT_TRUE(t.fs->sync().has_value());  // written back: reads come from the members
    if (round % 4 == 3) {
      t.remount();
      ASSERT_TRUE(t.fs->open(f.ino).has_value());
    }
    for (int r = 0; r < 200; ++r) {
      const uint64_t b = rng() % kBlocks, n = std::min<uint64_t>(kBlocks - b, 1 + rng() % 40);
      const uint64_t skew = rng() % 2 ? rng() % kBlockSize : 0;  // unaligned too
      const uint64_t offset = b * kBlockSize + skew, size = n * kBlockSize - skew;
      const auto got = t.read(f.ino, offset, size);
      ASSERT_TRUE(got.size() == size && std::equal(got.begin(), got.end(), f.data.begin() + offset))
          << "round " << round << ": " << size << " bytes at " << offset;
    }
  }
  EXPECT_GT(fs::ReadIndex::pages_made(), pages_before) << "the reads never used the index";
}

// Metadata heals the same way: a directory bucket corrupted on its member (its home copy,
// the one in the data area; parity and the journal keep theirs) fails its block checksum
// when read, is recovered from parity and rewritten, and the lookup finds the name.
TEST(DataChecksums, ADamagedDirectoryBlockIsRecoveredFromParity) {
  MemoryFs t;
  const uint64_t dir = t.create(kRootInode, "d", S_IFDIR | 0755);
  const std::string name = "needle-7f3a9c2e51";
  t.create(dir, name);
  ASSERT_TRUE(t.fs->sync().has_value());
  t.remount();
  // Where the name is in the data area, on a data chunk (not P).
  std::optional<std::pair<unsigned, uint64_t>> home;
  uint64_t home_volume = 0;
  const Geometry& g = t.volume->geometry();
  for (unsigned m = 0; m < t.array.media.size(); ++m) {
    auto c = t.array.media[m]->contents();
    const auto* needle = reinterpret_cast<const std::byte*>(name.data());
    for (auto it = c.begin();
         (it = std::search(it, c.end(), needle, needle + name.size())) != c.end(); ++it) {
      const auto at = static_cast<uint64_t>(it - c.begin());
      const auto volume_at = g.volume_offset(m, at);
      if (volume_at && *volume_at >= t.fs->superblock().data_start * kBlockSize &&
          *volume_at >= home_volume) {
        home = {{m, at}};
        home_volume = *volume_at;
      }
    }
  }
  ASSERT_TRUE(home) << "the name is not in the data area";
  auto c = t.array.media[home->first]->contents();
  c[home->second] ^= std::byte{0x20};
  c[home->second + 1] ^= std::byte{0x20};
  auto found = t.fs->lookup(dir, name);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(t.fs->meta_stats().healed_blocks, 1u);
  EXPECT_EQ(std::memcmp(c.data() + home->second, name.data(), name.size()), 0)
      << "the block was not rewritten";
  EXPECT_EQ(t.array.faulty[home->first]->counters().checksum_errors, 1u);
}

// Format 1 keeps no checksums: corruption is not caught (the reason format 2 exists).
TEST(DataChecksums, AFilesystemWithoutThemReadsWhatTheMembersHold) {
  fs::MakeFsOptions no_checksums;
  no_checksums.checksums = false;
  MemoryFs t(64ull << 20, no_checksums);
  EXPECT_FALSE(t.fs->superblock().has_checksums());
  const Written f = write_file(t, "f", kStripe, 18);
  auto where = find_on_members(t, std::span<const std::byte>(f.data.data(), kBlockSize));
  ASSERT_TRUE(where);
  flip(t, where->first, where->second);
  EXPECT_FALSE(t.read(f.ino, 0, f.data.size()) == f.data);
}

}  // namespace
}  // namespace stripefs::test
