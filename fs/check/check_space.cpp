// Pass 4: the bitmaps against what the inodes hold; pass 5: the checksum table, and with
// CheckOptions::data every block of file data against its checksum.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "fs/check/checker.hpp"
#include "fs/core/interval_set.hpp"
#include "raid/ondisk.hpp"

namespace stripefs::fs {

namespace {

// "N blocks (volume blocks a, b, c, ...)": the count and the first few.
std::string some(const std::vector<uint64_t>& items, const char* noun) {
  std::string list;
  for (size_t i = 0; i < std::min<size_t>(items.size(), 5); ++i) {
    list += (i == 0 ? "" : ", ") + std::to_string(items[i]);
  }
  return fmt::format("{} {} ({}{})", items.size(), noun, list, items.size() > 5 ? ", ..." : "");
}

}  // namespace

Result<void> Checker::free_unlisted_past_eof() {
  if (!sb_.has_orphan_list()) return {};  // the mount after a crash looks at every inode
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    InodeInfo& info = inodes_[ino];
    if (info.mode == 0 || !info.past_eof || info.nlink == 0 || orphan_bits_[ino - 1]) continue;
    const uint64_t list_block = sb_.orphan_start + (ino - 1) / kBitsPerBitmapBlock;
    if (std::find(damaged_orphan_blocks_.begin(), damaged_orphan_blocks_.end(), list_block) !=
        damaged_orphan_blocks_.end()) {
      continue;  // what the list held is lost: pass 4 lists it
    }
    const uint64_t eof = (info.size + kBlockSize - 1) / kBlockSize;
    std::vector<Extent> kept;
    uint64_t past = 0;
    for (Extent e : extents_[ino]) {
      if (e.unwritten || e.logical_end() <= eof) {
        kept.push_back(e);
        continue;
      }
      past += e.logical_end() - std::max(e.logical, eof);
      if (e.logical >= eof) continue;
      e.length = static_cast<uint32_t>(eof - e.logical);
      kept.push_back(e);
    }
    found(fmt::format("inode {}: {} written blocks past its size ({} bytes), and the orphan list "
                      "does not name it{}",
                      ino, past, info.size, options_.repair ? "; freed" : ""),
          options_.repair);
    if (!options_.repair) continue;
    if (auto r = set_extents(ino, std::move(kept)); !r) return r;
    info.past_eof = false;
  }
  return {};
}

Result<void> Checker::check_space() {
  progress("Pass 4: block and inode bitmaps", 0, 1);
  if (auto r = free_unlisted_past_eof(); !r) return r;
  // What the inodes hold, the fixed metadata areas before the data.
  std::vector<bool> used(sb_.total_blocks, false);
  std::fill(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(sb_.data_start), true);
  const auto claim = [&](uint64_t ino, const Runs& runs) {
    std::vector<uint64_t> twice;
    for (const auto& [first, count] : runs) {
      for (uint64_t b = first; b < first + count; ++b) {
        if (used[b]) twice.push_back(b);
        used[b] = true;
      }
    }
    // Pass 1b (run again after pass 2 took inodes in) reported, and repairing copied, those
    // claimed twice; any left are reported here rather than counted twice.
    if (!options_.repair) {
      std::erase_if(twice, [&](uint64_t b) { return shared_seen_.contains(b); });
    }
    if (!twice.empty()) {
      found(fmt::format("inode {}: {} claimed by another inode too; left as they are", ino,
                        some(twice, "blocks")),
            false);
    }
  };
  for (const auto& [ino, extents] : extents_) {
    Runs runs;
    for (const Extent& e : extents) runs.emplace_back(e.physical, e.length);
    claim(ino, runs);
  }
  for (const auto& [ino, runs] : tree_runs_) claim(ino, runs);
  for (const auto& [ino, runs] : meta_runs_) claim(ino, runs);

  std::vector<uint64_t> marked_free, leaked;
  for (uint64_t b = 0; b < sb_.total_blocks; ++b) {
    if (used[b] && !block_bits_[b]) marked_free.push_back(b);
    if (!used[b] && block_bits_[b]) leaked.push_back(b);
  }
  const char* fix = options_.repair ? "; marked" : "";
  if (!marked_free.empty()) {
    found(
        fmt::format("block bitmap: {} in use are marked free{}", some(marked_free, "blocks"), fix),
        options_.repair);
  }
  if (!leaked.empty()) {
    found(fmt::format("block bitmap: {} marked in use hold nothing{}", some(leaked, "blocks"),
                      options_.repair ? "; freed" : ""),
          options_.repair);
  }
  std::vector<bool> in_use(sb_.inode_count, false);
  std::vector<uint64_t> inodes_marked_free, inodes_leaked;
  for (uint64_t ino = 1; ino <= sb_.inode_count; ++ino) {
    in_use[ino - 1] = inodes_[ino].mode != 0;
    report_.inodes_used += in_use[ino - 1] ? 1 : 0;
    if (in_use[ino - 1] && !inode_bits_[ino - 1]) inodes_marked_free.push_back(ino);
    if (!in_use[ino - 1] && inode_bits_[ino - 1]) inodes_leaked.push_back(ino);
  }
  if (!inodes_marked_free.empty()) {
    found(fmt::format("inode bitmap: {} in use are marked free{}",
                      some(inodes_marked_free, "inodes"), fix),
          options_.repair);
  }
  if (!inodes_leaked.empty()) {
    // Each was reported already, as it was found; only the bitmap is left to put right.
    if (!options_.repair) inodes_leaked.clear();
  }
  // The orphan list: every inode a mount after a crash must look at (no links, written
  // blocks past its size) is listed, or that mount would leave it as it is. Listed inodes
  // that need nothing are no damage (the mount unlists them).
  std::vector<bool> listed;
  std::vector<uint64_t> unlisted;
  if (sb_.has_orphan_list()) {
    listed = orphan_bits_;
    for (uint64_t ino = 1; ino <= sb_.inode_count; ++ino) {
      const InodeInfo& info = inodes_[ino];
      const bool needed = info.mode != 0 && (info.nlink == 0 || info.past_eof);
      // (Blocks past the size of a file not listed were reported above.)
      if (needed && !listed[ino - 1] && info.nlink == 0) unlisted.push_back(ino);
      listed[ino - 1] = needed || (listed[ino - 1] && info.mode != 0);
    }
  }
  if (!unlisted.empty()) {
    found(fmt::format("orphan list: {} a mount after a crash must look at are not listed{}",
                      some(unlisted, "inodes"), options_.repair ? "; listed" : ""),
          options_.repair);
  }
  for (bool b : used) report_.blocks_used += b ? 1 : 0;
  if (!options_.repair) return {};
  // (Also when orphans were freed: their bits go with them.)
  if (sb_.has_orphan_list() && (!damaged_orphan_blocks_.empty() || listed != orphan_bits_)) {
    if (auto r = rewrite_bitmap(sb_.orphan_start, sb_.orphan_blocks, sb_.inode_count, listed); !r)
      return r;
  }
  const bool damaged = !damaged_bitmap_blocks_.empty();
  if (damaged || !marked_free.empty() || !leaked.empty()) {
    if (auto r =
            rewrite_bitmap(sb_.block_bitmap_start, sb_.block_bitmap_blocks, sb_.total_blocks, used);
        !r)
      return r;
  }
  if (damaged || !inodes_marked_free.empty() || !inodes_leaked.empty()) {
    if (auto r = rewrite_bitmap(sb_.inode_bitmap_start, sb_.inode_bitmap_blocks, sb_.inode_count,
                                in_use);
        !r)
      return r;
  }
  return {};
}

Result<void> Checker::rewrite_bitmap(uint64_t start, uint64_t blocks, uint64_t count,
                                     const std::vector<bool>& bits) {
  AlignedBuffer block = fresh_block();
  for (uint64_t b = 0; b < blocks; ++b) {
    std::memset(block.data(), 0, kBlockSize);
    const uint64_t first = b * kBitsPerBitmapBlock;
    for (uint64_t i = 0; i < kBitsPerBitmapBlock; ++i) {
      // Items past the end stay marked, so they are never handed out.
      if (first + i >= count || bits[first + i]) {
        block.data()[kHeaderSize + i / 8] |= std::byte{static_cast<uint8_t>(1u << (i % 8))};
      }
    }
    seal_block(std::span<std::byte, kBlockSize>(block.data(), kBlockSize), BlockKind::bitmap,
               start + b);
    if (auto r = write(start + b, block.span().first(kBlockSize)); !r) return r;
  }
  return {};
}

Result<void> Checker::check_checksums() {
  if (!sb_.has_checksums()) return {};
  const std::string pass = "Pass 5: data checksums";
  progress(pass, 0, sb_.checksum_blocks);
  // Blocks of file data: what the table describes.
  IntervalSet data;
  for (const auto& [ino, extents] : extents_) {
    if ((inodes_[ino].mode & S_IFMT) != S_IFREG) continue;
    for (const Extent& e : extents) {
      if (!e.unwritten) data.add(e.physical, e.physical + e.length);
    }
  }
  std::vector<AlignedBuffer> table;  // every table block, as checked
  std::vector<bool> table_ok(sb_.checksum_blocks, true);
  table.reserve(sb_.checksum_blocks);
  for (uint64_t t = 0; t < sb_.checksum_blocks; ++t) {
    const uint64_t self = sb_.checksum_start + t;
    table.push_back(fresh_block());
    auto ok =
        read_verified(self, table.back(), fmt::format("checksum table block {}", t),
                      [self](Image i) { return verify_block(i, BlockKind::checksums, self); });
    if (ok) continue;
    if (ok.error().code != EUCLEAN) return ok;
    const uint64_t first = sb_.data_start + t * kChecksumsPerBlock;
    if (options_.repair && volume_.missing_members() == 0 &&
        data.overlaps(first, first + kChecksumsPerBlock)) {
      // Checksums made from the data must not bless a copy that is wrong: the stripes it
      // describes are checked against their redundancy first.
      const uint64_t sds = volume_.geometry().stripe_data_size();
      const uint64_t s0 = first * kBlockSize / sds;
      const uint64_t s1 = std::min((first + kChecksumsPerBlock) * kBlockSize, volume_.size()) / sds;
      Volume::ScrubCounts counts;
      if (auto r = volume_.scrub_stripes(s0, s1 - s0 + 1, false, counts); !r) return r;
      if (counts.mismatched > 0) {
        table_ok[t] = false;
        found(fmt::format("checksum table block {} (volume block {}): {}; left as it is: the "
                          "data it describes disagrees with its redundancy (scrub it first)",
                          t, self, ok.error().message),
              false, false);
        continue;
      }
    }
    table_ok[t] = options_.repair;
    found(
        fmt::format("checksum table block {} (volume block {}): {}{}", t, self, ok.error().message,
                    options_.repair ? "; made again from the data as it is" : ""),
        options_.repair, false);
    if (!options_.repair) continue;
    AlignedBuffer& image = table.back();
    std::memset(image.data(), 0, kBlockSize);
    AlignedBuffer bytes = fresh_block();
    Result<void> status;
    data.for_each(first, first + kChecksumsPerBlock, [&](uint64_t a, uint64_t z) {
      for (uint64_t b = a; b < z && status; ++b) {
        status = read(b, bytes);
        ondisk::put_le<uint32_t>(std::span<std::byte>(image.data(), kBlockSize),
                                 kHeaderSize + (b - first) * 4,
                                 data_checksum(bytes.span().first(kBlockSize)));
      }
    });
    if (!status) return status;
    seal_block(std::span<std::byte, kBlockSize>(image.data(), kBlockSize), BlockKind::checksums,
               self);
    if (auto r = write(self, image.span().first(kBlockSize)); !r) return r;
  }
  if (!options_.data) return {};

  const std::string data_pass = "Pass 5: file data against its checksums";
  progress(data_pass, 0, data.size());
  // Extents are read a piece of up to kDataPiece blocks at a time, then checked block by
  // block. A piece that cannot be read whole is read again a block at a time, only where a
  // block is checked, so a read error stops the check where it did when every block was
  // read alone, naming that block.
  constexpr uint64_t kDataPiece = 256;  // 1 MiB
  AlignedBuffer piece(kDataPiece * kBlockSize), one = fresh_block();
  bool piece_read = false;
  for (const auto& [ino, extents] : extents_) {
    if ((inodes_[ino].mode & S_IFMT) != S_IFREG) continue;
    for (const Extent& e : extents) {
      if (e.unwritten) continue;
      for (uint64_t i = 0; i < e.length; ++i) {
        const uint64_t b = e.physical + i;
        const uint64_t in_piece = i % kDataPiece;
        if (in_piece == 0) {
          const uint64_t count = std::min(kDataPiece, e.length - i);
          piece_read = read_run(b, count, piece.span()).has_value();
        }
        const uint64_t index = b - sb_.data_start;
        if (!table_ok[index / kChecksumsPerBlock]) continue;  // reported, nothing to check by
        const auto expected = ondisk::get_le<uint32_t>(
            std::span<const std::byte>(table[index / kChecksumsPerBlock].data(), kBlockSize),
            kHeaderSize + (index % kChecksumsPerBlock) * 4);
        std::span<std::byte> bytes = piece.span().subspan(in_piece * kBlockSize, kBlockSize);
        if (!piece_read) {
          if (auto r = read(b, one); !r) return r;
          bytes = one.span().first(kBlockSize);
        }
        if (++report_.data_blocks_checked % 65536 == 0) {
          progress(data_pass, report_.data_blocks_checked, data.size());
        }
        if (data_checksum(bytes) == expected) continue;
        auto recovered = volume_.recover_block(
            b * kBlockSize, bytes,
            [expected](std::span<const std::byte> got) { return data_checksum(got) == expected; },
            options_.repair);
        const std::string where =
            fmt::format("inode {}: file block {} (volume block {})", ino, e.logical + i, b);
        if (!recovered) {
          found(fmt::format("{}: no copy passes its checksum; the file holds wrong data there",
                            where),
                false);
          continue;
        }
        std::string members;
        for (unsigned m : recovered->rewritten) {
          members += (members.empty() ? "" : ", ") + std::to_string(m);
        }
        found(fmt::format("{}: wrong on member {}; right in redundancy{}", where, members,
                          options_.repair ? ", rewritten" : ""),
              options_.repair);
      }
    }
  }
  return {};
}

}  // namespace stripefs::fs
