// The array's scrub, told what file data should hold. Redundancy alone cannot say which of
// two copies, or whether a RAID5 data chunk or its parity, is wrong; the checksum of every
// block of file data can.
//
// Which blocks have a checksum that describes them: those of regular files' written
// extents. A walk of every inode in use finds them when the scrub starts (ZFS and btrfs scrub
// by walking their metadata too), in steps that each hold the filesystem lock briefly. From
// then on the block allocator reports every run it releases or hands out, and those blocks
// are no longer checked: their contents may have changed hands. Blocks written after the
// walk are simply not checked (a block's checksum is set as its data lands, so none is ever
// checked against a checksum for other contents).
//
// Each batch looks its checksums up before the scrub locks the batch's stripes (a lookup may
// read the table through the Volume) and holds a read epoch until it is gone: a block freed
// meanwhile is not reused before the scrub has read it.
#include <cstring>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"
#include "raid/ondisk.hpp"

namespace stripefs::fs {

// A batch's expected checksums, by volume block from `first_`.
class ChecksumBatch final : public ScrubBatch {
 public:
  ChecksumBatch(Filesystem& fs, uint64_t first, uint64_t count)
      : fs_(fs), first_(first), expected_(count, 0), known_(count, false) {}
  ~ChecksumBatch() override {
    if (holding_) fs_.finish_read(epoch_);
  }
  ChecksumBatch(const ChecksumBatch&) = delete;
  ChecksumBatch& operator=(const ChecksumBatch&) = delete;

  uint32_t block_size() const override { return kBlockSize; }
  Verdict check(uint64_t offset, std::span<const std::byte> block) const override {
    const uint64_t b = offset / kBlockSize;
    if (b < first_ || b - first_ >= known_.size() || !known_[b - first_]) return Verdict::unknown;
    return data_checksum(block) == expected_[b - first_] ? Verdict::good : Verdict::bad;
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

 private:
  Filesystem& fs_;
  uint64_t first_;
  std::vector<uint32_t> expected_;
  std::vector<bool> known_;
  uint64_t epoch_ = 0;
  bool holding_ = false;
};

class DataScrubChecker final : public ScrubChecker {
 public:
  explicit DataScrubChecker(Filesystem& fs) : fs_(fs) {}
  ~DataScrubChecker() override { end(); }
  DataScrubChecker(const DataScrubChecker&) = delete;
  DataScrubChecker& operator=(const DataScrubChecker&) = delete;

  Result<void> begin(const std::atomic<bool>& stop) override {
    constexpr uint64_t kInodesPerStep = 256;
    {
      Filesystem::Lock lock(fs_.mutex_);
      written_ = IntervalSet{};
      changed_ = IntervalSet{};
      fs_.blocks_->watch(&changed_);
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
            fs_log().warn("scrub: inode {}: {}; its data goes unchecked", ino,
                          inode.error().message);
          }
          continue;
        }
        Inode& file = **inode;
        if (file.is_reg()) {
          if (auto r = fs_.load_extents(file); r) {
            for (const auto& [first, mapped] : file.extents) {
              if (mapped.pending || mapped.extent.unwritten) continue;
              written_.add(mapped.extent.physical, mapped.extent.physical + mapped.extent.length);
            }
          } else if (unreadable++ == 0) {
            fs_log().warn("scrub: inode {}: {}; its data goes unchecked", ino, r.error().message);
          }
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
    uint64_t table = 0;
    std::span<const std::byte> image;
    bool table_bad = false;
    written_.for_each(first, last, [&](uint64_t a, uint64_t b) {
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
        if (!table_bad) made->expect(block, ondisk::get_le<uint32_t>(image, offset));
      }
    });
    return std::unique_ptr<ScrubBatch>(std::move(made));
  }

  void end() override {
    Filesystem::Lock lock(fs_.mutex_);
    fs_.blocks_->watch(nullptr);
    written_ = IntervalSet{};
    changed_ = IntervalSet{};
  }

 private:
  Filesystem& fs_;
  IntervalSet written_;  // volume blocks of written file data, as the walk found them
  IntervalSet changed_;  // released or reserved since the walk began (under the fs lock)
};

std::unique_ptr<ScrubChecker> Filesystem::scrub_checker() {
  if (!sb_.has_checksums()) return nullptr;
  return std::make_unique<DataScrubChecker>(*this);
}

}  // namespace stripefs::fs
