// The scrub checked against the filesystem's checksums (RAID5 of memory members): a corrupted
// data chunk of a file or of a metadata block, or the parity beside file data, is named and
// repaired, where redundancy alone can only say the stripe disagrees; and blocks that change
// hands after the scrub's walk, or metadata homes behind the journal, are never checked
// against a checksum that no longer describes them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>

#include "raid/level.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {
namespace {

using fs::kBlockSize;
using fs::kRootInode;

constexpr size_t kStripe = 3 * MemoryFs::kChunk;  // whole stripes: P is not a copy of one chunk

struct Written {
  uint64_t ino;
  std::vector<std::byte> data;
};

Written write_file(MemoryFs& t, const char* name, size_t size, uint64_t seed) {
  Written w{t.create(kRootInode, name), pattern(size, seed)};
  EXPECT_TRUE(t.write(w.ino, 0, w.data).has_value());
  EXPECT_TRUE(t.fs->sync().has_value());
  return w;
}

std::span<const std::byte> block_of(const std::vector<std::byte>& data, uint64_t block) {
  return {data.data() + block * kBlockSize, kBlockSize};
}

// The volume block holding `bytes` (0: none).
uint64_t volume_block_of(MemoryFs& t, std::span<const std::byte> bytes) {
  constexpr uint64_t kPiece = 1 << 20;
  AlignedBuffer piece(kPiece);
  for (uint64_t at = 0; at < t.volume->size(); at += kPiece) {
    EXPECT_TRUE(t.volume->read(at, piece.span()).has_value());
    for (uint64_t b = 0; b < kPiece; b += kBlockSize) {
      if (std::memcmp(piece.data() + b, bytes.data(), kBlockSize) == 0) {
        return (at + b) / kBlockSize;
      }
    }
  }
  return 0;
}

// Where on the members volume block `b` lives, and the P chunk of its row.
struct Place {
  ChunkLocation data, parity;
  uint64_t within;  // bytes into the chunk
};
Place place_of(MemoryFs& t, uint64_t b) {
  const Geometry& g = t.volume->geometry();
  const uint64_t offset = b * kBlockSize;
  const uint64_t stripe = offset / g.stripe_data_size();
  const auto index = static_cast<unsigned>(offset % g.stripe_data_size() / g.chunk_size());
  const std::vector<ChunkLocation> set = Level::create(g)->redundancy_set(stripe);
  return {set[index], set[g.data_chunks()], offset % g.chunk_size()};
}

void flip(MemoryFs& t, const ChunkLocation& at, uint64_t within) {
  auto c = t.array.media[at.member]->contents();
  for (uint64_t i = 64; i < 192; ++i) c[at.member_offset + within + i] ^= std::byte{0x6b};
}

// A whole scrub of the volume, in batches as the array runs it; `checks`: with the
// filesystem's checksums.
Volume::ScrubCounts scrub(MemoryFs& t, bool repair, bool checks) {
  Volume::ScrubCounts counts;
  std::unique_ptr<ScrubChecker> checker = checks ? t.fs->scrub_checker() : nullptr;
  std::atomic<bool> stop{false};
  if (checker) {
    EXPECT_TRUE(checker->begin(stop).has_value());
  }
  const Geometry& g = t.volume->geometry();
  constexpr uint64_t kBatch = 16;
  for (uint64_t s = 0; s < g.stripes(); s += kBatch) {
    const uint64_t n = std::min(kBatch, g.stripes() - s);
    std::unique_ptr<ScrubBatch> batch;
    if (checker) {
      auto made = checker->batch(s * g.stripe_data_size(), (s + n) * g.stripe_data_size());
      EXPECT_TRUE(made.has_value());
      if (made) batch = std::move(*made);
    }
    auto r = t.volume->scrub_stripes(s, n, repair, counts, batch.get());
    EXPECT_TRUE(r.has_value()) << r.error().message;
  }
  if (checker) checker->end();
  return counts;
}

TEST(ScrubChecks, AWrongDataChunkOfAFileIsNamedByItsChecksumAndRepaired) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe * 2, 21);
  const uint64_t b = volume_block_of(t, block_of(f.data, 5));
  ASSERT_NE(b, 0u);
  const Place at = place_of(t, b);
  flip(t, at.data, at.within);

  const Volume::ScrubCounts blind = scrub(t, true, false);
  EXPECT_EQ(blind.mismatched, 1u);
  EXPECT_EQ(blind.unrepairable, 1u) << "RAID5 parity alone names nothing";

  const Volume::ScrubCounts found = scrub(t, false, true);
  EXPECT_EQ(found.mismatched, 1u);
  EXPECT_EQ(found.unrepairable, 0u);
  EXPECT_EQ(found.bad_data, 1u);
  EXPECT_EQ(found.bad_parity, 0u);
  EXPECT_EQ(found.checksum_failures, 1u);
  EXPECT_GE(found.verified_blocks, 2 * kStripe / kBlockSize);
  EXPECT_EQ(found.bad_chunks[at.data.member], 1u);

  const Volume::ScrubCounts repaired = scrub(t, true, true);
  EXPECT_EQ(repaired.repaired, 1u);
  EXPECT_EQ(volume_block_of(t, block_of(f.data, 5)), b);
  const Volume::ScrubCounts again = scrub(t, false, true);
  EXPECT_EQ(again.mismatched, 0u);
  EXPECT_EQ(again.checksum_failures, 0u);
  t.remount();
  EXPECT_TRUE(t.read(f.ino, 0, f.data.size()) == f.data);
  EXPECT_EQ(t.fs->stats().checksum_recovered, 0u) << "the read found what the scrub left";
}

// Parity that disagrees with data that passes its checksums is the bad chunk: rewritten from
// the data, never the other way round.
TEST(ScrubChecks, WrongParityBesideGoodFileDataIsNamedAndRepaired) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe * 2, 22);
  const uint64_t b = volume_block_of(t, block_of(f.data, 2));
  ASSERT_NE(b, 0u);
  const Place at = place_of(t, b);
  flip(t, at.parity, at.within);
  const Volume::ScrubCounts found = scrub(t, true, true);
  EXPECT_EQ(found.mismatched, 1u);
  EXPECT_EQ(found.unrepairable, 0u);
  EXPECT_EQ(found.bad_parity, 1u);
  EXPECT_EQ(found.bad_data, 0u);
  EXPECT_EQ(found.checksum_failures, 0u);
  EXPECT_EQ(found.bad_chunks[at.parity.member], 1u);
  EXPECT_EQ(scrub(t, false, true).mismatched, 0u);
  t.remount();
  EXPECT_TRUE(t.read(f.ino, 0, f.data.size()) == f.data);
}

// The walk sees the file's blocks; once they are released (copy on write of an overwrite)
// and new ones are handed out, neither the old nor the new are checked by this scrub.
TEST(ScrubChecks, BlocksThatChangeHandsAfterTheWalkAreNotChecked) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe, 23);
  const Written g = write_file(t, "g", kStripe, 24);
  const uint64_t old_block = volume_block_of(t, block_of(f.data, 0));
  const uint64_t g_block = volume_block_of(t, block_of(g.data, 0));
  ASSERT_NE(old_block, 0u);
  ASSERT_NE(g_block, 0u);
  std::unique_ptr<ScrubChecker> checker = t.fs->scrub_checker();
  ASSERT_TRUE(checker);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(checker->begin(stop).has_value());
  std::vector<std::byte> wrong(block_of(f.data, 0).begin(), block_of(f.data, 0).end());
  wrong[100] ^= std::byte{1};
  {
    auto batch = checker->batch(0, t.volume->size());
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ((*batch)->check(old_block * kBlockSize, block_of(f.data, 0)),
              ScrubBatch::Verdict::good);
    EXPECT_EQ((*batch)->check(old_block * kBlockSize, wrong), ScrubBatch::Verdict::bad);
    EXPECT_EQ((*batch)->check(g_block * kBlockSize, block_of(g.data, 0)),
              ScrubBatch::Verdict::good);
  }
  const std::vector<std::byte> now = pattern(kStripe, 25);
  ASSERT_TRUE(t.write(f.ino, 0, now).has_value());
  ASSERT_TRUE(t.fs->sync().has_value());
  const uint64_t new_block = volume_block_of(t, block_of(now, 0));
  ASSERT_NE(new_block, 0u);
  ASSERT_NE(new_block, old_block) << "an overwrite is copied on write";
  {
    auto batch = checker->batch(0, t.volume->size());
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ((*batch)->check(old_block * kBlockSize, block_of(f.data, 0)),
              ScrubBatch::Verdict::unknown);
    EXPECT_EQ((*batch)->check(new_block * kBlockSize, block_of(now, 0)),
              ScrubBatch::Verdict::unknown);
    EXPECT_EQ((*batch)->check(g_block * kBlockSize, block_of(g.data, 0)),
              ScrubBatch::Verdict::good);
  }
  checker->end();
  // A scrub started now walks again and checks the new blocks.
  ASSERT_TRUE(checker->begin(stop).has_value());
  auto batch = checker->batch(0, t.volume->size());
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ((*batch)->check(new_block * kBlockSize, block_of(now, 0)), ScrubBatch::Verdict::good);
  batch->reset();
  checker->end();
}

// Metadata is checked against the checksums it carries: a damaged directory bucket, inode
// or allocation bitmap block on one member is named and rewritten from the rest, where
// redundancy alone (RAID5) names nothing; a second scrub is clean and a remount finds
// nothing left to heal.
struct MetadataCase {
  const char* what;
  uint64_t (*block)(const fs::FsSuperblock&);
  uint64_t within;  // bytes into the block where the damage starts
  // The scrub reads the block itself to learn what file data holds (the checksum table):
  // that read finds the damage first and heals it as any metadata read does.
  bool healed_by_lookup = false;
};

class ScrubMetadata : public testing::TestWithParam<MetadataCase> {};

void flip_at(MemoryFs& t, const ChunkLocation& at, uint64_t within) {
  auto c = t.array.media[at.member]->contents();
  for (uint64_t i = 0; i < 64; ++i) c[at.member_offset + within + i] ^= std::byte{0x5a};
}

TEST_P(ScrubMetadata, IsNamedByItsOwnChecksumAndRepaired) {
  MemoryFs t;
  const Written f = write_file(t, "f", kStripe, 31);
  for (int i = 0; i < 20; ++i) t.create(kRootInode, "name" + std::to_string(i));
  ASSERT_TRUE(t.fs->sync().has_value());
  t.remount();  // every home current: the journal checkpointed
  const uint64_t b = GetParam().block(t.fs->superblock());
  const Place at = place_of(t, b);
  flip_at(t, at.data, at.within + GetParam().within);

  const Volume::ScrubCounts blind = scrub(t, false, false);
  EXPECT_EQ(blind.mismatched, 1u);
  EXPECT_EQ(blind.unrepairable, 1u) << "RAID5 parity alone names nothing";

  const Volume::ScrubCounts repaired = scrub(t, true, true);
  if (GetParam().healed_by_lookup) {
    EXPECT_EQ(repaired.mismatched, 0u);
    EXPECT_EQ(t.fs->meta_stats().healed_blocks, 1u);
  } else {
    EXPECT_EQ(repaired.mismatched, 1u);
    EXPECT_EQ(repaired.bad_data, 1u);
    EXPECT_EQ(repaired.checksum_failures, 1u);
    EXPECT_EQ(repaired.repaired, 1u);
    EXPECT_EQ(repaired.unrepairable, 0u);
    EXPECT_EQ(repaired.bad_chunks[at.data.member], 1u);
  }
  const Volume::ScrubCounts again = scrub(t, false, true);
  EXPECT_EQ(again.mismatched, 0u);
  EXPECT_EQ(again.checksum_failures, 0u);

  t.remount();
  EXPECT_TRUE(t.read(f.ino, 0, f.data.size()) == f.data);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(t.fs->lookup(kRootInode, "name" + std::to_string(i)).has_value()) << i;
  }
  EXPECT_EQ(t.fs->meta_stats().healed_blocks, 0u) << "the mount found what the scrub left";
}

INSTANTIATE_TEST_SUITE_P(
    Blocks, ScrubMetadata,
    testing::Values(
        MetadataCase{"DirectoryBucket",
                     [](const fs::FsSuperblock& sb) { return sb.data_start + 1; }, 512},
        MetadataCase{"DirectoryHeader", [](const fs::FsSuperblock& sb) { return sb.data_start; },
                     100},
        MetadataCase{"RootInode", [](const fs::FsSuperblock& sb) { return sb.inode_table_start; },
                     64},
        MetadataCase{"BlockBitmap",
                     [](const fs::FsSuperblock& sb) { return sb.block_bitmap_start; }, 100},
        MetadataCase{"InodeBitmap",
                     [](const fs::FsSuperblock& sb) { return sb.inode_bitmap_start; }, 100},
        MetadataCase{"ChecksumTable", [](const fs::FsSuperblock& sb) { return sb.checksum_start; },
                     200, true}),
    [](const testing::TestParamInfo<MetadataCase>& info) { return info.param.what; });

// Free inode slots may hold anything (a device that held something else): never checked.
// Neither is a metadata block whose home is behind its journaled image, nor a block that
// nothing names (a free one).
TEST(ScrubChecks, FreeInodeSlotsAndHomesBehindTheJournalAreNotChecked) {
  MemoryFs t;
  ASSERT_TRUE(t.fs->sync().has_value());
  t.remount();
  const fs::FsSuperblock sb = t.fs->superblock();
  std::unique_ptr<ScrubChecker> checker = t.fs->scrub_checker();
  std::atomic<bool> stop{false};
  ASSERT_TRUE(checker->begin(stop).has_value());
  AlignedBuffer table(kBlockSize);
  ASSERT_TRUE(t.volume->read(sb.inode_table_start * kBlockSize, table.span()).has_value());
  {
    auto batch = checker->batch(0, t.volume->size());
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ((*batch)->check(sb.inode_table_start * kBlockSize, table.span()),
              ScrubBatch::Verdict::good);
    std::vector<std::byte> wrong(table.span().begin(), table.span().end());
    for (size_t i = 5 * fs::kInodeSize; i < 6 * fs::kInodeSize; ++i) wrong[i] = std::byte{0xee};
    EXPECT_EQ((*batch)->check(sb.inode_table_start * kBlockSize, wrong), ScrubBatch::Verdict::good)
        << "slot 5 is free";
    wrong[100] ^= std::byte{1};
    EXPECT_EQ((*batch)->check(sb.inode_table_start * kBlockSize, wrong), ScrubBatch::Verdict::bad)
        << "slot 0 is the root";
    const std::vector<std::byte> zeros(kBlockSize);
    EXPECT_EQ((*batch)->check((sb.data_start + 2) * kBlockSize, zeros),
              ScrubBatch::Verdict::unknown)
        << "a free block";
    AlignedBuffer bucket(kBlockSize);
    ASSERT_TRUE(t.volume->read((sb.data_start + 1) * kBlockSize, bucket.span()).has_value());
    EXPECT_EQ((*batch)->check((sb.data_start + 1) * kBlockSize, bucket.span()),
              ScrubBatch::Verdict::good);
    bucket.data()[300] ^= std::byte{1};
    EXPECT_EQ((*batch)->check((sb.data_start + 1) * kBlockSize, bucket.span()),
              ScrubBatch::Verdict::bad)
        << "the root's bucket";
    EXPECT_EQ((*batch)->check((sb.data_start + 1) * kBlockSize, zeros),
              ScrubBatch::Verdict::unknown)
        << "a directory block that says it is none (mapped, never written: a split cut short)";
  }
  // A change not yet checkpointed: the root directory's bucket and inode are behind.
  t.create(kRootInode, "new");
  {
    auto batch = checker->batch(0, t.volume->size());
    ASSERT_TRUE(batch.has_value());
    AlignedBuffer bucket(kBlockSize);
    ASSERT_TRUE(t.volume->read((sb.data_start + 1) * kBlockSize, bucket.span()).has_value());
    bucket.data()[300] ^= std::byte{1};
    EXPECT_EQ((*batch)->check((sb.data_start + 1) * kBlockSize, bucket.span()),
              ScrubBatch::Verdict::unknown);
  }
  checker->end();
}

// Inodes made just before a scrub, not yet committed: their slots on disk hold nothing yet,
// which is no damage (nor are the table and directory blocks whose homes are behind).
TEST(ScrubChecks, InodesNotYetCommittedAreNoDamage) {
  MemoryFs t;
  ASSERT_TRUE(t.fs->sync().has_value());
  t.remount();
  for (int i = 0; i < 40; ++i) t.create(kRootInode, "fresh" + std::to_string(i));
  const Volume::ScrubCounts found = scrub(t, false, true);
  EXPECT_EQ(found.checksum_failures, 0u);
  EXPECT_EQ(found.mismatched, 0u);
}

// A filesystem without data checksums still checks its metadata.
TEST(ScrubChecks, AFilesystemWithoutDataChecksumsStillChecksItsMetadata) {
  fs::MakeFsOptions make;
  make.checksums = false;
  MemoryFs t(64ull << 20, make);
  ASSERT_TRUE(t.fs->sync().has_value());
  t.remount();
  const Place at = place_of(t, t.fs->superblock().data_start + 1);
  flip_at(t, at.data, at.within + 512);
  const Volume::ScrubCounts repaired = scrub(t, true, true);
  EXPECT_EQ(repaired.bad_data, 1u);
  EXPECT_EQ(repaired.repaired, 1u);
  EXPECT_EQ(scrub(t, false, true).mismatched, 0u);
}

}  // namespace
}  // namespace stripefs::test
