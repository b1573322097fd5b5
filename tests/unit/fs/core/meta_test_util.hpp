// A MetaStore on a RAID5 Volume of memory members, with its journal, and nothing else: what
// the filesystem core's pieces (directory index, allocator) stand on, without a Filesystem.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "fs/core/meta_store.hpp"
#include "fs/core/volume_device.hpp"
#include "journal/journal.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs::test {

struct MetaFixture {
  static constexpr uint64_t kJournalBlocks = 1024;  // volume blocks [0, 1024)
  static constexpr uint64_t kFirstFree = kJournalBlocks;
  MemoryArray array;
  std::unique_ptr<Volume> volume;
  std::unique_ptr<fs::VolumeDevice> device;
  std::unique_ptr<Journal> journal;
  std::unique_ptr<fs::MetaStore> meta;

  explicit MetaFixture(uint64_t member_size = 32ull << 20) : array(4, member_size) {
    auto g = Geometry::create(RaidLevel::raid5, 4, 64 * 1024, member_size);
    EXPECT_TRUE(g.has_value());
    auto v = Volume::create(*g, array.members(), 0);
    EXPECT_TRUE(v.has_value());
    volume = std::move(*v);
    device = std::make_unique<fs::VolumeDevice>(*volume, 0, kJournalBlocks * fs::kBlockSize);
    const Uuid uuid = generate_uuid();
    EXPECT_TRUE(Journal::format(*device, fs::kBlockSize, kJournalBlocks - 1, uuid));
    auto j = Journal::open(*device, fs::kBlockSize, uuid);
    EXPECT_TRUE(j.has_value()) << j.error().message;
    journal = std::move(*j);
    EXPECT_TRUE(
        journal->replay([](uint64_t, std::span<const std::byte>) -> Result<void> { return {}; }));
    meta = std::make_unique<fs::MetaStore>(*volume, *journal, 1u << 14);
  }
  // Commits the running transaction and writes it home, as the filesystem does.
  void commit_and_checkpoint() {
    auto snapshot = meta->take_snapshot();
    auto sequence = meta->write_snapshot(snapshot);
    ASSERT_TRUE(sequence) << sequence.error().message;
    meta->committed(snapshot, *sequence);
    ASSERT_TRUE(meta->checkpoint());
  }
};

}  // namespace stripefs::test
