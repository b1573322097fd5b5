// The check's run, its access to blocks, and pass 0: the superblock and the journal.
#include "fs/check/checker.hpp"

#include <algorithm>
#include <cstring>

#include "fs/core/volume_device.hpp"
#include "journal/journal.hpp"

namespace stripefs::fs {

uint64_t CheckReport::fixed() const {
  uint64_t n = 0;
  for (const Finding& f : findings) n += f.fixed ? 1 : 0;
  return n;
}

uint64_t CheckReport::unfixed() const {
  return findings.size() - fixed();
}

int CheckReport::exit_code() const {
  if (unfixed() > 0) return 4;
  return findings.empty() ? 0 : 1;
}

Result<CheckReport> check_filesystem(Volume& volume, const CheckOptions& options) {
  Checker checker(volume, options);
  return checker.run();
}

Checker::Checker(Volume& volume, const CheckOptions& options)
    : volume_(volume), options_(options) {}

Result<void> Checker::read(uint64_t b, AlignedBuffer& out) {
  if (auto it = journal_images_.find(b); it != journal_images_.end()) {
    std::memcpy(out.data(), it->second.data(), kBlockSize);
    return {};
  }
  if (auto r = volume_.read(b * kBlockSize, out.span().first(kBlockSize)); !r) {
    return fail(r.error().code, "volume block {}: {}", b, r.error().message);
  }
  return {};
}

Result<void> Checker::read_run(uint64_t first, uint64_t count, std::span<std::byte> out) {
  if (auto r = volume_.read(first * kBlockSize, out.first(count * kBlockSize)); !r) {
    return fail(r.error().code, "volume blocks {} to {}: {}", first, first + count - 1,
                r.error().message);
  }
  if (journal_images_.empty()) return {};
  for (uint64_t b = first; b < first + count; ++b) {
    if (auto it = journal_images_.find(b); it != journal_images_.end()) {
      std::memcpy(out.data() + (b - first) * kBlockSize, it->second.data(), kBlockSize);
    }
  }
  return {};
}

Result<void> Checker::read_verified(uint64_t b, AlignedBuffer& out, const std::string& what,
                                    const Verify& verify) {
  if (auto r = read(b, out); !r) return r;
  Result<void> checked = verify(image(out));
  if (checked || journal_images_.contains(b)) return checked;
  // Wrong on a member, perhaps: the other copies or parity may hold it right.
  auto recovered = volume_.recover_block(
      b * kBlockSize, out.span().first(kBlockSize),
      [&](std::span<const std::byte> bytes) {
        return verify(Image(bytes.data(), kBlockSize)).has_value();
      },
      options_.repair);
  if (!recovered) return checked;
  std::string members;
  for (unsigned m : recovered->rewritten) {
    members += (members.empty() ? "" : ", ") + std::to_string(m);
  }
  found(fmt::format("{} (volume block {}): wrong on member {} ({}); right in redundancy{}", what, b,
                    members, checked.error().message, options_.repair ? ", rewritten" : ""),
        options_.repair);
  return {};
}

Result<std::vector<Xattr>> Checker::read_xattrs(uint64_t ino, const DiskInode& disk) {
  const uint64_t first = disk.xattr_block;
  const uint32_t blocks = std::max<uint32_t>(disk.xattr_blocks, 1);
  std::vector<std::byte> run(static_cast<size_t>(blocks) * kBlockSize);
  AlignedBuffer block = fresh_block();
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint64_t at = first + b;
    auto ok = read_verified(at, block, fmt::format("inode {}: xattr block", ino),
                            [at, blocks](Image i) -> Result<void> {
                              if (blocks >= 2) return verify_xattr_run_block(i, at);
                              auto d = decode_xattrs(i, at);
                              return d ? Result<void>() : fail(d.error());
                            });
    if (!ok) return fail(ok.error());
    std::memcpy(run.data() + b * kBlockSize, block.data(), kBlockSize);
  }
  if (blocks == 1) return decode_xattrs(Image(run.data(), kBlockSize), first);
  return decode_xattr_run(run, first);
}

Result<void> Checker::write(uint64_t b, std::span<const std::byte> image) {
  AlignedBuffer aligned(kBlockSize);
  std::memcpy(aligned.data(), image.data(), kBlockSize);
  if (auto r = volume_.write(b * kBlockSize, aligned.span().first(kBlockSize)); !r) {
    return fail(r.error().code, "writing volume block {}: {}", b, r.error().message);
  }
  return {};
}

void Checker::found(std::string what, bool fixed, bool safe) {
  report_.findings.push_back({std::move(what), fixed, safe});
}

Result<void> Checker::read_superblock() {
  AlignedBuffer block = fresh_block();
  if (auto r = read_verified(0, block, "filesystem superblock",
                             [](Image i) -> Result<void> {
                               auto d = decode_fs_superblock(i);
                               return d ? Result<void>() : fail(d.error());
                             });
      !r) {
    return r;
  }
  auto sb = decode_fs_superblock(image(block));
  if (!sb) return fail(sb.error());
  if (auto r = check_fits(*sb, volume_.size()); !r) return r;
  sb_ = *sb;
  report_.was_clean = sb_.state == FsState::clean;
  report_.inodes = sb_.inode_count;
  report_.blocks = sb_.total_blocks;
  return {};
}

// As a mount does, except that a read-only check keeps the images in memory and reads
// through them.
Result<void> Checker::replay_journal() {
  VolumeDevice device(volume_, 0, (sb_.journal_start + sb_.journal_blocks) * kBlockSize);
  auto journal = Journal::open(device, sb_.journal_start * kBlockSize, sb_.uuid,
                               journal_alignment(volume_, sb_.journal_blocks));
  if (!journal) {
    found(fmt::format("metadata journal: {}; not replayed", journal.error().message), false);
    return {};
  }
  const Journal::Apply apply = [&](uint64_t target,
                                   std::span<const std::byte> data) -> Result<void> {
    if (auto r = check_journal_target(sb_, target); !r) return r;
    ++report_.journal_blocks;
    if (!options_.repair) {
      journal_images_[target].assign(data.begin(), data.end());
      return {};
    }
    return write(target, data);
  };
  // Read-only, the log is only read (replay() may persist a jump of its sequence).
  auto last = options_.repair ? (*journal)->replay(apply) : (*journal)->read_durable(apply);
  if (!last) {
    found(fmt::format("metadata journal: {}; not replayed", last.error().message), false);
    return {};
  }
  if (*last != 0 && options_.repair) {
    if (auto r = volume_.flush(); !r) return r;
    if (auto r = (*journal)->checkpoint(*last); !r) return r;
  }
  return {};
}

Result<std::vector<bool>> Checker::read_bitmap(uint64_t start, uint64_t blocks, uint64_t count,
                                               const char* what, std::vector<uint64_t>& damaged) {
  std::vector<bool> bits(count, false);
  AlignedBuffer block = fresh_block();
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t self = start + b;
    auto ok = read_verified(self, block, fmt::format("{} bitmap block {}", what, b),
                            [self](Image i) { return verify_block(i, BlockKind::bitmap, self); });
    if (!ok && ok.error().code != EUCLEAN) return fail(ok.error());
    if (!ok) {
      damaged.push_back(self);
      found(fmt::format("{} bitmap block {} (volume block {}): {}; {}", what, b, self,
                        ok.error().message,
                        options_.repair ? "rewritten from what the inodes hold" : "left as it is"),
            options_.repair);
      continue;
    }
    const uint64_t first = b * kBitsPerBitmapBlock;
    for (uint64_t i = 0; i < kBitsPerBitmapBlock && first + i < count; ++i) {
      const auto byte = std::to_integer<uint8_t>(block.data()[kHeaderSize + i / 8]);
      bits[first + i] = ((byte >> (i % 8)) & 1) != 0;
    }
  }
  return bits;
}

Result<CheckReport> Checker::run() {
  if (auto r = read_superblock(); !r) return fail(r.error());
  const bool check = !report_.was_clean || options_.force;
  if (check) {
    progress("Pass 0: superblock and metadata journal", 0, 1);
    if (auto r = replay_journal(); !r) return fail(r.error());
  }
  auto inode_bits = read_bitmap(sb_.inode_bitmap_start, sb_.inode_bitmap_blocks, sb_.inode_count,
                                "inode", damaged_bitmap_blocks_);
  if (!inode_bits) return fail(inode_bits.error());
  inode_bits_ = std::move(*inode_bits);
  auto block_bits = read_bitmap(sb_.block_bitmap_start, sb_.block_bitmap_blocks, sb_.total_blocks,
                                "block", damaged_bitmap_blocks_);
  if (!block_bits) return fail(block_bits.error());
  block_bits_ = std::move(*block_bits);
  if (sb_.has_orphan_list()) {
    auto orphan_bits = read_bitmap(sb_.orphan_start, sb_.orphan_blocks, sb_.inode_count, "orphan",
                                   damaged_orphan_blocks_);
    if (!orphan_bits) return fail(orphan_bits.error());
    orphan_bits_ = std::move(*orphan_bits);
  }
  if (!check && report_.findings.empty()) {
    // Clean: counted from the bitmaps, as e2fsck does without -f. (A damaged bitmap block
    // gets the whole check.)
    for (bool used : inode_bits_) report_.inodes_used += used ? 1 : 0;
    for (bool used : block_bits_) report_.blocks_used += used ? 1 : 0;
    return report_;
  }
  report_.checked = true;
  if (auto r = check_inodes(); !r) return fail(r.error());
  if (auto r = rewrite_trees(); !r) return fail(r.error());
  if (auto r = check_shared_blocks(); !r) return fail(r.error());
  if (auto r = check_directories(); !r) return fail(r.error());
  if (auto r = rewrite_trees(); !r) return fail(r.error());            // of inodes pass 2 took in
  if (auto r = check_shared_blocks(true); !r) return fail(r.error());  // what they claim
  if (auto r = check_connectivity(); !r) return fail(r.error());
  if (auto r = check_space(); !r) return fail(r.error());
  if (auto r = check_checksums(); !r) return fail(r.error());
  // Written blocks past a file's size left (listed): the mount after a crash frees them.
  const bool past_eof = std::any_of(inodes_.begin(), inodes_.end(),
                                    [](const InodeInfo& i) { return i.mode != 0 && i.past_eof; });
  if (options_.repair && report_.unfixed() == 0 && sb_.state != FsState::clean && !past_eof) {
    // Replayed, orphans freed, everything put right: as a clean unmount leaves it.
    sb_.state = FsState::clean;
    AlignedBuffer block = fresh_block();
    encode_fs_superblock(sb_, std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
    if (auto r = write(0, block.span().first(kBlockSize)); !r) return fail(r.error());
  }
  if (options_.repair) {
    if (auto r = volume_.flush(); !r) return fail(r.error());
  }
  return report_;
}

}  // namespace stripefs::fs
