// The inode table alone: slots on a MetaStore, the inode allocator, nothing else.
#include "fs/core/inode_table.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>

#include "unit/fs/core/meta_test_util.hpp"

namespace stripefs::fs {
namespace {

constexpr uint64_t kBitmap = test::MetaFixture::kFirstFree;  // one bitmap block
constexpr uint64_t kTable = kBitmap + 1;                     // then the table
constexpr uint64_t kCount = 64;                              // 4 table blocks

struct Table {
  test::MetaFixture fixture;
  std::unique_ptr<BitmapAllocator> slots;
  std::unique_ptr<InodeTable> table;
  Table() {
    auto block = fixture.meta->fresh(kBitmap);
    seal_block(block, BlockKind::bitmap, kBitmap);
    for (uint64_t b = 0; b < 4; ++b) fixture.meta->fresh(kTable + b);  // zeroed slots
    fixture.commit_and_checkpoint();
    reopen();
  }
  // A fresh table and allocator over what is on disk: what a remount sees.
  void reopen() {
    fixture.meta->trim();
    slots = std::make_unique<BitmapAllocator>(kBitmap, 1, kCount);
    EXPECT_TRUE(slots->load(*fixture.meta));
    table = std::make_unique<InodeTable>(*fixture.meta, *slots, kTable, kCount);
  }
};

TEST(InodeTable, CreatedInodesStoreAndLoadBack) {
  Table t;
  auto made = t.table->create(S_IFREG | 0640, 1000, 100, 1, Timespec{1234, 5});
  ASSERT_TRUE(made) << made.error().message;
  Inode& n = **made;
  EXPECT_EQ(n.ino, 1u) << "the first free slot";
  EXPECT_TRUE(n.dirty);
  EXPECT_EQ(t.table->dirty_count(), 1u);
  EXPECT_EQ(n.disk.nlink, 1u);
  n.disk.size = 12345;
  ASSERT_TRUE(t.table->write(n.ino, n.disk));
  EXPECT_EQ(t.table->take_dirty(), std::vector<uint64_t>{1});
  EXPECT_EQ(t.table->dirty_count(), 0u);
  t.fixture.commit_and_checkpoint();
  const DiskInode written = n.disk;
  t.reopen();
  EXPECT_EQ(t.table->find(1), nullptr) << "nothing in memory after a remount";
  auto back = t.table->get(1);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ((*back)->disk.mode, written.mode);
  EXPECT_EQ((*back)->disk.uid, 1000u);
  EXPECT_EQ((*back)->disk.gid, 100u);
  EXPECT_EQ((*back)->disk.size, 12345u);
  EXPECT_EQ((*back)->stored_size, 12345u);
  EXPECT_EQ((*back)->disk.generation, written.generation);
  EXPECT_EQ(t.table->find(1), *back) << "loaded once, then found in memory";
}

TEST(InodeTable, SlotsNotInUseAreStale) {
  Table t;
  EXPECT_EQ(t.table->get(0).error().code, ESTALE);
  EXPECT_EQ(t.table->get(kCount + 1).error().code, ESTALE);
  EXPECT_EQ(t.table->get(5).error().code, ESTALE);
}

// A slot used again gets a newer generation: an NFS handle to the file that was there before
// goes stale rather than reaching the new one.
TEST(InodeTable, AReusedSlotGetsTheNextGeneration) {
  Table t;
  // Every slot taken, so the one freed below is the only one a new inode can have.
  for (uint64_t i = 0; i < kCount; ++i) {
    auto made = t.table->create(S_IFREG | 0600, 0, 0, 1, Timespec{});
    ASSERT_TRUE(made) << made.error().message;
    ASSERT_TRUE(t.table->write((*made)->ino, (*made)->disk));
  }
  EXPECT_EQ(t.table->create(S_IFREG | 0600, 0, 0, 1, Timespec{}).error().code, ENOSPC);
  const uint64_t ino = 10;
  const uint32_t generation = t.table->find(ino)->disk.generation;
  // The file goes: its cleared fields (keeping the generation) are written, the slot freed.
  DiskInode cleared;
  cleared.generation = generation;
  ASSERT_TRUE(t.table->write(ino, cleared));
  const uint64_t freeing = t.fixture.meta->running();
  t.table->release(ino);
  EXPECT_EQ(t.table->find(ino), nullptr);
  EXPECT_EQ(t.table->create(S_IFREG | 0600, 0, 0, 1, Timespec{}).error().code, ENOSPC)
      << "not reusable before the checkpoint that covers the free";
  t.fixture.commit_and_checkpoint();
  t.slots->checkpointed(freeing);
  auto again = t.table->create(S_IFREG | 0600, 0, 0, 1, Timespec{});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)->ino, ino);
  EXPECT_EQ((*again)->disk.generation, generation + 1);
}

TEST(InodeTable, ADamagedSlotIsAnErrorNamingTheInode) {
  Table t;
  auto made = t.table->create(S_IFDIR | 0755, 0, 0, 1, Timespec{});
  ASSERT_TRUE(made);
  const uint64_t ino = (*made)->ino;
  ASSERT_TRUE(t.table->write(ino, (*made)->disk));
  t.fixture.commit_and_checkpoint();
  t.reopen();
  t.fixture.meta->modify(kTable)[(ino - 1) * kInodeSize + 10] ^= std::byte{0xff};
  auto damaged = t.table->get(ino);
  ASSERT_FALSE(damaged);
  EXPECT_EQ(damaged.error().code, EIO);
  EXPECT_NE(damaged.error().message.find("inode " + std::to_string(ino)), std::string::npos)
      << damaged.error().message;
}

// Bytes in a slot that the table did not put there (memory overwritten from elsewhere, even
// with checksums that hold, as an XOR of three valid slots does) are found before a commit:
// for every inode in memory, loaded or written.
TEST(InodeTable, ASlotChangedBehindTheTablesBackIsFound) {
  Table t;
  std::vector<uint64_t> inos;
  for (int i = 0; i < 3; ++i) {
    auto made = t.table->create(S_IFREG | 0644, 0, 0, 1, Timespec{100 + i, 0});
    ASSERT_TRUE(made);
    inos.push_back((*made)->ino);
    ASSERT_TRUE(t.table->write((*made)->ino, (*made)->disk));
  }
  ASSERT_TRUE(t.table->check_slots(kTable)) << "what the table wrote";
  t.fixture.commit_and_checkpoint();
  t.reopen();
  ASSERT_TRUE(t.table->get(inos[0]));  // loaded: its slot as read
  ASSERT_TRUE(t.table->get(inos[1]));
  ASSERT_TRUE(t.table->check_slots(kTable)) << "what was read";
  // The XOR of three valid slots: a valid slot too (crc32c is linear), but not this one's.
  auto image = t.fixture.meta->modify(kTable);
  std::array<std::byte, kInodeSize> x{};
  for (uint64_t ino : inos) {
    for (size_t i = 0; i < kInodeSize; ++i) x[i] ^= image[(ino - 1) * kInodeSize + i];
  }
  ASSERT_TRUE(decode_inode(x, inos[1])) << "the checksum holds";
  std::copy(x.begin(), x.end(), image.begin() + (inos[1] - 1) * kInodeSize);
  auto found = t.table->check_slots(kTable);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, EIO);
  EXPECT_NE(found.error().message.find("inode " + std::to_string(inos[1])), std::string::npos)
      << found.error().message;
  // A slot of an inode not in memory is not judged.
  t.table->erase(inos[1]);
  EXPECT_TRUE(t.table->check_slots(kTable));
}

}  // namespace
}  // namespace stripefs::fs
