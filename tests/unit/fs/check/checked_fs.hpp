// A filesystem with a bit of everything on a RAID5 of memory members, cleanly unmounted,
// and the tools the offline check's tests damage it with: blocks through the volume
// (parity follows), bytes on the one member that holds them, inodes, bitmaps and buckets.
#pragma once
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/check/check.hpp"
#include "fs/core/directory_index.hpp"
#include "raid/level.hpp"
#include "raid/ondisk.hpp"
#include "unit/fs/core/fs_test_util.hpp"

namespace stripefs::test {

using fs::DiskInode;
using fs::kBlockSize;
using fs::kRootInode;

constexpr uint64_t kMemberSize = 32ull << 20;
constexpr size_t kBig = 3 * MemoryFs::kChunk * 2;  // two whole stripes

// A filesystem with a bit of everything, cleanly unmounted: the volume is the test's.
struct Checked {
  MemoryFs t{kMemberSize};
  uint64_t dir = 0, sub = 0, big = 0, small = 0, linked = 0, long_link = 0;
  std::vector<std::byte> big_data = pattern(kBig, 31), small_data = pattern(5000, 32);
  fs::FsSuperblock sb;

  Checked() {
    dir = t.create(kRootInode, "dir", S_IFDIR | 0755);
    sub = t.create(dir, "sub", S_IFDIR | 0755);
    big = t.create(kRootInode, "big");
    small = t.create(dir, "small");
    linked = t.create(sub, "linked");
    EXPECT_TRUE(t.write(big, 0, big_data).has_value());
    EXPECT_TRUE(t.write(small, 0, small_data).has_value());
    EXPECT_TRUE(t.fs->link(linked, kRootInode, "second-name").has_value());
    EXPECT_TRUE(t.fs->symlink(kRootInode, "short", "target", t.root).has_value());
    auto l = t.fs->symlink(dir, "long", std::string(300, 'x'), t.root);
    EXPECT_TRUE(l.has_value());
    long_link = l ? l->ino : 0;
    EXPECT_TRUE(t.fs->setxattr(small, "user.colour", "blue", 0).has_value());
    for (int i = 0; i < 40; ++i) t.create(sub, ("f" + std::to_string(i)).c_str());
    unmount();
    AlignedBuffer block(kBlockSize);
    EXPECT_TRUE(t.volume->read(0, block.span()).has_value());
    sb =
        *fs::decode_fs_superblock(std::span<const std::byte, kBlockSize>(block.data(), kBlockSize));
  }
  void unmount() {
    ASSERT_TRUE(t.fs->unmount().has_value());
    t.fs.reset();
  }

  fs::CheckReport check(bool repair, bool data = false) {
    fs::CheckOptions options;
    options.repair = repair;
    options.force = true;
    options.data = data;
    auto r = fs::check_filesystem(*t.volume, options);
    EXPECT_TRUE(r.has_value()) << r.error().message;
    return r ? *r : fs::CheckReport{};
  }
  // A fingerprint of every member's bytes.
  size_t members() const {
    size_t h = 0;
    for (const auto& m : t.array.media) {
      auto c = m->contents();
      h = h * 31 + std::hash<std::string_view>{}(
                       std::string_view(reinterpret_cast<const char*>(c.data()), c.size()));
    }
    return h;
  }

  // ---- blocks, through the volume (consistent damage: parity follows) ----
  AlignedBuffer read_block(uint64_t b) {
    AlignedBuffer block(kBlockSize);
    EXPECT_TRUE(t.volume->read(b * kBlockSize, block.span()).has_value());
    return block;
  }
  void write_block(uint64_t b, const AlignedBuffer& block) {
    EXPECT_TRUE(t.volume->write(b * kBlockSize, block.span()).has_value());
  }
  std::span<std::byte, kBlockSize> span(AlignedBuffer& b) {
    return std::span<std::byte, kBlockSize>(b.data(), kBlockSize);
  }
  uint64_t inode_block(uint64_t ino) const {
    return sb.inode_table_start + (ino - 1) / fs::kInodesPerBlock;
  }
  static size_t slot(uint64_t ino) { return ((ino - 1) % fs::kInodesPerBlock) * fs::kInodeSize; }
  DiskInode inode(uint64_t ino) {
    AlignedBuffer b = read_block(inode_block(ino));
    return *fs::decode_inode(std::span<const std::byte>(b.data() + slot(ino), fs::kInodeSize), ino);
  }
  void set_inode(uint64_t ino, const DiskInode& disk) {
    AlignedBuffer b = read_block(inode_block(ino));
    fs::encode_inode(disk, std::span<std::byte>(b.data() + slot(ino), fs::kInodeSize));
    write_block(inode_block(ino), b);
  }
  // Flips bit `item` of the bitmap at `start`.
  void flip_bit(uint64_t start, uint64_t item) {
    const uint64_t self = start + item / fs::kBitsPerBitmapBlock;
    AlignedBuffer b = read_block(self);
    const uint64_t bit = item % fs::kBitsPerBitmapBlock;
    b.data()[fs::kHeaderSize + bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    fs::seal_block(span(b), fs::BlockKind::bitmap, self);
    write_block(self, b);
  }
  // The volume block of `dir`'s bucket holding `name`, and the bucket.
  std::pair<uint64_t, fs::DirBucket> bucket_with(uint64_t d, const std::string& name) {
    const DiskInode n = inode(d);
    for (const fs::Extent& e : n.inline_extents) {
      for (uint64_t i = 0; i < e.length; ++i) {
        if (e.logical + i == 0) continue;  // the header
        AlignedBuffer b = read_block(e.physical + i);
        auto bucket = fs::decode_dir_bucket(span(b), e.physical + i);
        if (!bucket) continue;
        for (const auto& entry : bucket->entries) {
          if (entry.name == name) return {e.physical + i, *bucket};
        }
      }
    }
    ADD_FAILURE() << "no bucket of " << d << " holds " << name;
    return {};
  }
  // The volume block of `d`'s file block `file_block`.
  uint64_t dir_block(uint64_t d, uint64_t file_block) {
    for (const fs::Extent& e : inode(d).inline_extents) {
      if (file_block >= e.logical && file_block < e.logical_end()) {
        return e.physical + (file_block - e.logical);
      }
    }
    ADD_FAILURE() << "directory " << d << " maps no file block " << file_block;
    return 0;
  }
  // Bytes that pass as no block (the same on every member: no copy is right).
  void scribble(uint64_t b) {
    AlignedBuffer garbage(kBlockSize);
    const auto bytes = pattern(kBlockSize, 77);
    std::copy(bytes.begin(), bytes.end(), garbage.data());
    write_block(b, garbage);
  }
  void set_bucket(uint64_t self, const fs::DirBucket& bucket) {
    AlignedBuffer b(kBlockSize);
    fs::encode_dir_bucket(bucket, self, span(b));
    write_block(self, b);
  }
  // Flips bytes of volume block `b` on the one member that holds it (damage of one disk).
  // Bytes [from, to) of volume block `b`, on the member that holds it or (`parity`) in the
  // parity chunk beside it.
  void corrupt_on_member(uint64_t b, bool parity = false, uint64_t from = 100, uint64_t to = 300) {
    const Geometry& g = t.volume->geometry();
    const uint64_t offset = b * kBlockSize;
    const uint64_t stripe = offset / g.stripe_data_size();
    const auto index = static_cast<unsigned>(offset % g.stripe_data_size() / g.chunk_size());
    const ChunkLocation at = parity ? Level::create(g)->redundancy_set(stripe)[g.data_chunks()]
                                    : geometry_locate(stripe, index);
    auto c = t.array.media[at.member]->contents();
    for (uint64_t i = from; i < to; ++i) {
      c[at.member_offset + offset % g.chunk_size() + i] ^= std::byte{0x3c};
    }
  }
  ChunkLocation geometry_locate(uint64_t stripe, unsigned index) {
    return t.volume->geometry().locate(stripe, index);
  }

  // After a repair: a second check is clean, and the filesystem mounts.
  void expect_repaired() {
    const fs::CheckReport again = check(false);
    EXPECT_EQ(again.exit_code(), 0) << (again.findings.empty() ? "" : again.findings[0].what);
    t.mount();
    ASSERT_TRUE(t.fs);
  }
};

inline std::string all(const fs::CheckReport& r) {
  std::string out;
  for (const auto& f : r.findings) out += f.what + (f.fixed ? " [fixed]\n" : "\n");
  return out;
}

}  // namespace stripefs::test
