// The array's scrub, told what the volume's blocks should hold. Redundancy alone cannot say
// which of two copies, or whether a RAID5 data chunk or its parity, is wrong; the checksum of
// every block of file data can, and so can the checksum every metadata block and inode
// carries (scrub_metadata.hpp).
//
// Which blocks have a checksum that describes them: those of regular files' written
// extents, and the metadata: the superblock, bitmaps, inode table and checksum table by
// where they are, directory, extent-tree and xattr blocks as the inodes name them. A walk of
// every inode in use finds them when the scrub starts (ZFS and btrfs scrub by walking their
// metadata too), in steps that each hold the filesystem lock briefly. From then on the
// block and inode allocators report every run they release or hand out, and those blocks
// (and inodes) are no longer checked: their contents may have changed hands. Blocks written
// after the walk are simply not checked (a block's checksum is set as its data lands, so none
// is ever checked against a checksum for other contents), nor is a metadata block whose home
// is behind its journaled image (not yet checkpointed: what the home holds is older).
//
// Each batch looks its checksums up before the scrub locks the batch's stripes (a lookup may
// read the table through the Volume) and holds a read epoch until it is gone: a block freed
// meanwhile is not reused before the scrub has read it.
#include <cstring>
#include <unordered_map>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"
#include "fs/core/scrub_metadata.hpp"
#include "raid/ondisk.hpp"

namespace stripefs::fs {

// A batch's expected checksums, by volume block from `first_`.
class ChecksumBatch final : public ScrubBatch {
 public:
  ChecksumBatch(Filesystem& fs, uint64_t first, uint64_t count)
      : fs_(fs), first_(first), expected_(count, 0), known_(count, false), meta_(count) {}
  ~ChecksumBatch() override {
    if (holding_) fs_.finish_read(epoch_);
  }
  ChecksumBatch(const ChecksumBatch&) = delete;
  ChecksumBatch& operator=(const ChecksumBatch&) = delete;

  uint32_t block_size() const override { return kBlockSize; }
  Verdict check(uint64_t offset, std::span<const std::byte> block) const override {
    const uint64_t b = offset / kBlockSize;
    if (b < first_ || b - first_ >= known_.size()) return Verdict::unknown;
    const uint64_t i = b - first_;
    if (known_[i]) return data_checksum(block) == expected_[i] ? Verdict::good : Verdict::bad;
    if (meta_[i] == MetaKind::none) return Verdict::unknown;
    const auto found = slots_.find(b);
    return metadata_verdict(meta_[i], b, block, found == slots_.end() ? 0 : found->second,
                            fs_.sb_.inode_table_start);
  }

  // With the filesystem's lock held.
  void hold_epoch() {
    epoch_ = fs_.start_read_locked();
    holding_ = true;
  }
  void expect(uint64_t block, uint32_t crc) {
    expected_[block - first_] = crc;
    known_[block - first_] = true;
  }
  void expect_meta(uint64_t block, MetaKind kind) { meta_[block - first_] = kind; }
  // Inode table block `block`: its slots in use (bit i: slot i).
  void expect_inodes(uint64_t block, uint16_t slots) {
    meta_[block - first_] = MetaKind::inode_table;
    slots_[block] = slots;
  }
  uint64_t first() const { return first_; }
  uint64_t end() const { return first_ + known_.size(); }

 private:
  Filesystem& fs_;
  uint64_t first_;
  std::vector<uint32_t> expected_;
  std::vector<bool> known_;
  std::vector<MetaKind> meta_;
  std::unordered_map<uint64_t, uint16_t> slots_;
  uint64_t epoch_ = 0;
  bool holding_ = false;
};

class FsScrubChecker final : public ScrubChecker {
 public:
  explicit FsScrubChecker(Filesystem& fs) : fs_(fs) {}
  ~FsScrubChecker() override { end(); }
  FsScrubChecker(const FsScrubChecker&) = delete;
  FsScrubChecker& operator=(const FsScrubChecker&) = delete;

  Result<void> begin(const std::atomic<bool>& stop) override {
    constexpr uint64_t kInodesPerStep = 256;
    {
      Filesystem::Lock lock(fs_.mutex_);
      forget();
      fs_.blocks_->watch(&changed_);
      fs_.inodes_->watch(&changed_inodes_);
    }
    uint64_t unreadable = 0;
    for (uint64_t index = 0; index < fs_.sb_.inode_count && !stop.load();) {
      Filesystem::Lock lock(fs_.mutex_);
      for (const uint64_t end = std::min(index + kInodesPerStep, fs_.sb_.inode_count); index < end;
           ++index) {
        if (!fs_.inodes_->busy(index)) continue;
        const uint64_t ino = index + 1;
        const bool cached = fs_.table_->find(ino) != nullptr;
        auto inode = fs_.get_inode(ino);
        if (!inode) {
          if (unreadable++ == 0) {
            fs_log().warn("scrub: inode {}: {}; what it holds goes unchecked", ino,
                          inode.error().message);
          }
          continue;
        }
        Inode& file = **inode;
        // An inode changed since it was last stored (one made before the walk and not yet
        // committed, above all) is not what its slot holds: its slot goes unchecked.
        if (!file.dirty) inodes_.add(index, index + 1);
        if (auto r = learn(file); !r && unreadable++ == 0) {
          fs_log().warn("scrub: inode {}: {}; what it holds goes unchecked", ino,
                        r.error().message);
        }
        // The walk leaves the inode table as it found it (an unlinked inode stays for its
        // owner to free).
        if (!cached && file.disk.nlink > 0) fs_.maybe_evict(file, lock);
      }
      fs_.meta_->trim();
    }
    if (unreadable > 1) fs_log().warn("scrub: {} inodes could not be read", unreadable);
    return {};
  }

  Result<std::unique_ptr<ScrubBatch>> batch(uint64_t begin, uint64_t end) override {
    const uint64_t first = begin / kBlockSize, last = (end + kBlockSize - 1) / kBlockSize;
    auto made = std::make_unique<ChecksumBatch>(fs_, first, last - first);
    Filesystem::Lock lock(fs_.mutex_);
    made->hold_epoch();
    if (fs_.sb_.has_checksums()) expect_data(*made);
    expect_metadata(*made);
    return std::unique_ptr<ScrubBatch>(std::move(made));
  }

  void end() override {
    Filesystem::Lock lock(fs_.mutex_);
    fs_.blocks_->watch(nullptr);
    fs_.inodes_->watch(nullptr);
    forget();
  }

 private:
  // What the walk learns of one inode in use: where its file data and its metadata blocks are.
  Result<void> learn(Inode& file) {
    if (const uint64_t x = file.disk.xattr_block; x != 0) {
      xattrs_.add(x, x + std::max<uint32_t>(file.disk.xattr_blocks, 1));
    }
    if (!file.is_reg() && !file.is_dir()) return {};
    if (auto r = fs_.load_extents(file); !r) return r;
    for (uint64_t b : file.tree.blocks()) trees_.add(b, b + 1);
    for (const auto& [first, mapped] : file.extents) {
      if (mapped.pending) continue;
      const Extent& e = mapped.extent;
      if (file.is_dir()) {
        directories_.add(e.physical, e.physical + e.length);
      } else if (!e.unwritten) {
        written_.add(e.physical, e.physical + e.length);
      }
    }
    return {};
  }

  void expect_data(ChecksumBatch& made) {
    uint64_t table = 0;
    std::span<const std::byte> image;
    bool table_bad = false;
    written_.for_each(made.first(), made.end(), [&](uint64_t a, uint64_t b) {
      for (uint64_t block = a; block < b; ++block) {
        if (changed_.count(block, block + 1) != 0) continue;
        const auto [where, offset] = fs_.checksum_slot(block);
        if (where != table) {
          table = where;
          auto got = fs_.meta_->read_checked(where, [where](std::span<const std::byte> bytes) {
            return verify_block(std::span<const std::byte, kBlockSize>(bytes.data(), kBlockSize),
                                BlockKind::checksums, where)
                .has_value();
          });
          table_bad = !got;
          if (!got) {
            fs_log().error(
                "scrub: checksum table block {}: {}; the data it describes goes "
                "unchecked",
                where, got.error().message);
          } else {
            image = *got;
          }
        }
        if (!table_bad) made.expect(block, ondisk::get_le<uint32_t>(image, offset));
      }
    });
  }

  // The batch's metadata blocks whose homes hold their last image (under the lock).
  void expect_metadata(ChecksumBatch& made) {
    const FsSuperblock& sb = fs_.sb_;
    const uint64_t first = made.first(), end = made.end();
    auto fixed = [&](uint64_t start, uint64_t count, MetaKind kind) {
      for (uint64_t b = std::max(first, start); b < std::min(end, start + count); ++b) {
        if (!fs_.meta_->home_behind(b)) made.expect_meta(b, kind);
      }
    };
    fixed(0, 1, MetaKind::superblock);
    fixed(sb.inode_bitmap_start, sb.inode_bitmap_blocks, MetaKind::bitmap);
    fixed(sb.block_bitmap_start, sb.block_bitmap_blocks, MetaKind::bitmap);
    fixed(sb.orphan_start, sb.orphan_blocks, MetaKind::bitmap);
    fixed(sb.checksum_start, sb.checksum_blocks, MetaKind::checksums);
    const uint64_t table_end = sb.inode_table_start + sb.inode_table_blocks();
    for (uint64_t b = std::max(first, sb.inode_table_start); b < std::min(end, table_end); ++b) {
      if (fs_.meta_->home_behind(b)) continue;
      const uint64_t slot0 = (b - sb.inode_table_start) * kInodesPerBlock;
      uint16_t slots = 0;
      inodes_.for_each(slot0, slot0 + kInodesPerBlock, [&](uint64_t a, uint64_t z) {
        for (uint64_t i = a; i < z; ++i) {
          if (changed_inodes_.count(i, i + 1) == 0) slots |= uint16_t(1u << (i - slot0));
        }
      });
      if (slots != 0) made.expect_inodes(b, slots);
    }
    auto named = [&](const IntervalSet& set, MetaKind kind) {
      set.for_each(first, end, [&](uint64_t a, uint64_t z) {
        for (uint64_t b = a; b < z; ++b) {
          if (changed_.count(b, b + 1) == 0 && !fs_.meta_->home_behind(b))
            made.expect_meta(b, kind);
        }
      });
    };
    named(directories_, MetaKind::directory);
    named(trees_, MetaKind::extent_tree);
    named(xattrs_, MetaKind::xattr);
  }

  void forget() {
    written_ = directories_ = trees_ = xattrs_ = inodes_ = IntervalSet{};
    changed_ = changed_inodes_ = IntervalSet{};
  }

  Filesystem& fs_;
  IntervalSet written_;      // volume blocks of written file data, as the walk found them
  IntervalSet directories_;  // volume blocks of directories
  IntervalSet trees_;        // extent-tree blocks
  IntervalSet xattrs_;       // xattr blocks
  IntervalSet inodes_;       // inodes (by index) in use when the walk read them
  IntervalSet changed_;      // blocks released or reserved since the walk began (under the fs lock)
  IntervalSet changed_inodes_;  // inodes (by index) likewise
};

std::unique_ptr<ScrubChecker> Filesystem::scrub_checker() {
  return std::make_unique<FsScrubChecker>(*this);
}

}  // namespace stripefs::fs
