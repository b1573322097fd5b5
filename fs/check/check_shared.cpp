// Pass 1b: blocks claimed twice. Nothing says which claimant is right, so none loses: the
// first (by inode number) keeps the block, every later one gets a copy of its own, as
// e2fsck's passes 1b-1d clone multiply-claimed blocks. It runs again once pass 2 has taken
// in inodes the bitmap did not list, for the blocks they claim.
#include <sys/stat.h>

#include <algorithm>

#include "fs/check/checker.hpp"

namespace stripefs::fs {

Result<void> Checker::check_shared_blocks(bool again) {
  if (!again) progress("Pass 1b: blocks claimed twice", 0, 1);  // once: a pass, not a step
  std::vector<bool> used(sb_.total_blocks, false);
  std::map<uint64_t, std::vector<uint64_t>> shared;  // by inode: the blocks it claims second
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    if (inodes_[ino].mode == 0) continue;
    std::vector<uint64_t> twice;
    const auto claim = [&](uint64_t first, uint64_t count) {
      for (uint64_t b = first; b < first + count && b < used.size(); ++b) {
        if (used[b]) twice.push_back(b);
        used[b] = true;
      }
    };
    if (auto it = extents_.find(ino); it != extents_.end()) {
      for (const Extent& e : it->second) claim(e.physical, e.length);
    }
    for (const auto* runs : {&tree_runs_, &meta_runs_}) {
      if (auto it = runs->find(ino); it != runs->end()) {
        for (const auto& [first, count] : it->second) claim(first, count);
      }
    }
    if (!twice.empty()) shared[ino] = std::move(twice);
  }
  for (auto& [ino, blocks] : shared) {
    // Run again after pass 2 took inodes in: repairing, what the first run found has its
    // copies already, so whatever is found is new; checking only, the blocks the first run
    // reported are not reported twice.
    if (!options_.repair) {
      std::erase_if(blocks, [&](uint64_t b) { return shared_seen_.contains(b); });
      if (blocks.empty()) continue;
    }
    shared_seen_.insert(blocks.begin(), blocks.end());
    std::string list;
    for (size_t i = 0; i < std::min<size_t>(blocks.size(), 5); ++i) {
      list += (i == 0 ? "" : ", ") + std::to_string(blocks[i]);
    }
    found(fmt::format("inode {}: {} blocks ({}{}) claimed more than once{}", ino, blocks.size(),
                      list, blocks.size() > 5 ? ", ..." : "",
                      options_.repair ? "; given copies of its own" : "; left as they are"),
          options_.repair, false);
    if (!options_.repair) continue;
    if (auto r = give_copies(ino, blocks); !r) return r;
  }
  return {};
}

Result<void> Checker::give_copies(uint64_t ino, const std::vector<uint64_t>& shared) {
  std::vector<uint64_t> sorted = shared;
  std::sort(sorted.begin(), sorted.end());
  const auto is_shared = [&](uint64_t b) {
    return std::binary_search(sorted.begin(), sorted.end(), b);
  };
  // The xattr block: copied and sealed where it now lives.
  Runs& meta = meta_runs_[ino];
  AlignedBuffer slot = fresh_block();
  if (auto r = load_table_block(table_block(ino), slot, false); !r) return r;
  auto disk =
      decode_inode(std::span<const std::byte>(slot.data() + slot_offset(ino), kInodeSize), ino);
  if (!disk) return fail(disk.error());
  const uint32_t xattr_blocks = std::max<uint32_t>(disk->xattr_blocks, 1);
  bool xattrs_shared = false;
  for (uint32_t b = 0; disk->xattr_block != 0 && b < xattr_blocks; ++b) {
    xattrs_shared = xattrs_shared || is_shared(disk->xattr_block + b);
  }
  Runs space_for_xattrs;
  Result<std::vector<Xattr>> attrs = std::vector<Xattr>{};
  if (xattrs_shared) {
    auto space = allocate(xattr_blocks);
    if (!space) return fail(space.error().code, "inode {}: {}", ino, space.error().message);
    space_for_xattrs = *space;
    attrs = read_xattrs(ino, *disk);
    if (!attrs) return fail(attrs.error());
    if (space->size() != 1) {
      // A run must be contiguous, and the free blocks handed out are not: the inode gives
      // its xattrs up rather than the repair stopping halfway (the blocks it was given stay
      // free on disk).
      found(fmt::format("inode {}: its xattr run shares blocks, and no {} free blocks in a row "
                        "take a copy; its xattrs are dropped",
                        ino, xattr_blocks),
            true, false);
      std::erase_if(meta, [&](const auto& run) { return run.first == disk->xattr_block; });
      disk->blocks -= std::min<uint64_t>(disk->blocks, xattr_blocks);
      disk->xattr_block = 0;
      disk->xattr_blocks = 0;
      if (auto r = rewrite_inode(ino, *disk); !r) return r;
    }
  }
  if (xattrs_shared && disk->xattr_block != 0) {
    const uint64_t to = space_for_xattrs.front().first;
    std::vector<std::byte> images(static_cast<size_t>(xattr_blocks) * kBlockSize);
    if (xattr_blocks == 1) {
      encode_xattrs(*attrs, to, std::span<std::byte, kBlockSize>(images.data(), kBlockSize));
    } else {
      encode_xattr_run(*attrs, to, xattr_blocks, images);
    }
    for (uint32_t b = 0; b < xattr_blocks; ++b) {
      if (auto r = write(to + b, std::span(images).subspan(b * kBlockSize, kBlockSize)); !r) {
        return r;
      }
    }
    for (auto& [first, count] : meta) {
      if (first == disk->xattr_block && count == xattr_blocks) first = to;
    }
    disk->xattr_block = to;
    if (auto r = rewrite_inode(ino, *disk); !r) return r;
  }
  if (meta.empty()) meta_runs_.erase(ino);

  // File data: each run of shared blocks moves to blocks of its own, copied.
  std::vector<Extent> extents;
  bool moved = false;
  for (const Extent& e : extents_[ino]) {
    for (uint64_t i = 0; i < e.length;) {
      uint64_t n = 1;
      const bool copy = is_shared(e.physical + i);
      while (i + n < e.length && is_shared(e.physical + i + n) == copy) ++n;
      if (!copy) {
        extents.push_back({e.logical + i, e.physical + i, static_cast<uint32_t>(n), e.unwritten});
        i += n;
        continue;
      }
      auto space = allocate(n);
      if (!space) return fail(space.error().code, "inode {}: {}", ino, space.error().message);
      for (const auto& [first, count] : *space) {
        for (uint64_t k = 0; k < count; ++k) {
          if (auto r = copy_block(ino, e.logical + i + k, e.physical + i + k, first + k); !r) {
            return r;
          }
        }
        extents.push_back({e.logical + i, first, static_cast<uint32_t>(count), e.unwritten});
        i += count;
      }
      moved = true;
    }
  }
  bool tree_shared = false;
  if (auto it = tree_runs_.find(ino); it != tree_runs_.end()) {
    for (const auto& [first, count] : it->second) {
      for (uint64_t b = first; b < first + count; ++b) tree_shared = tree_shared || is_shared(b);
    }
  }
  // A tree (shared or over moved data) is written afresh, in blocks of its own.
  if (moved || tree_shared) return set_extents(ino, std::move(extents));
  return {};
}

Result<void> Checker::copy_block(uint64_t ino, uint64_t file_block, uint64_t from, uint64_t to) {
  AlignedBuffer block = fresh_block();
  if (auto r = read(from, block); !r) return r;
  const uint32_t type = inodes_[ino].mode & S_IFMT;
  const auto out = std::span<std::byte, kBlockSize>(block.data(), kBlockSize);
  if (type == S_IFDIR && file_block == 0) {
    if (auto h = decode_dir_header(image(block), from)) encode_dir_header(*h, to, out);
  } else if (type == S_IFDIR) {
    if (auto d = decode_dir_bucket(image(block), from)) encode_dir_bucket(*d, to, out);
  }
  // (A directory block that does not decode is copied as it is: pass 2 lays the directory
  // out again.)
  if (auto r = write(to, block.span().first(kBlockSize)); !r) return r;
  if (type != S_IFREG || !sb_.has_checksums()) return {};
  auto crc = get_checksum(from);
  if (!crc && crc.error().code != EUCLEAN) return fail(crc.error());
  // The source's table block passes nowhere (pass 5 makes it again from the data): the
  // copy's checksum is made from the data too.
  auto r = set_checksum(to, crc ? *crc : data_checksum(block.span().first(kBlockSize)));
  return !r && r.error().code == EUCLEAN ? Result<void>() : r;
}

}  // namespace stripefs::fs
