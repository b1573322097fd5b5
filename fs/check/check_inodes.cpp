// Pass 1: every inode the inode bitmap says is in use. An inode table block has no header
// of its own; each inode carries its crc32c, so a damaged inode costs its file only.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "fs/check/checker.hpp"

namespace stripefs::fs {

namespace {

std::string describe(const Extent& e) {
  return fmt::format("extent at file block {} (volume blocks {}+{})", e.logical, e.physical,
                     e.length);
}

}  // namespace

Result<void> Checker::check_inodes() {
  const std::string pass = "Pass 1: inodes, extents and blocks";
  progress(pass, 0, sb_.inode_count);
  inodes_.assign(sb_.inode_count + 1, InodeInfo{});
  AlignedBuffer block = fresh_block();
  uint64_t loaded = 0;  // the table block in `block` (0: none)
  for (uint64_t ino = 1; ino <= sb_.inode_count; ++ino) {
    if (ino % 65536 == 0) progress(pass, ino, sb_.inode_count);
    if (!inode_bits_[ino - 1]) continue;
    const uint64_t table = table_block(ino);
    if (table != loaded) {
      if (auto r = load_table_block(table, block, true); !r) return r;
      loaded = table;
    }
    if (auto r = check_inode(ino, block, table); !r) return r;
  }
  return {};
}

Result<void> Checker::check_inode(uint64_t ino, AlignedBuffer& block, uint64_t table) {
  (void)table;
  auto decoded =
      decode_inode(std::span<const std::byte>(block.data() + slot_offset(ino), kInodeSize), ino);
  if (!decoded) {
    found(fmt::format("{}; {}", decoded.error().message,
                      options_.repair ? "cleared (the names of it go in pass 2)" : "left as it is"),
          options_.repair, false);
    return clear_inode(ino);
  }
  DiskInode disk = *decoded;
  if (disk.mode == 0) {
    found(fmt::format("inode {}: marked in use in the inode bitmap, but its slot is free{}", ino,
                      options_.repair ? "; marked free" : ""),
          options_.repair);
    return {};
  }
  const uint32_t type = disk.mode & S_IFMT;
  if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFIFO &&
      type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK) {
    found(fmt::format("inode {}: field mode: {:#o} is no file type{}", ino, disk.mode,
                      options_.repair ? "; cleared" : ""),
          options_.repair, false);
    return clear_inode(ino);
  }

  // Extents: inline, or a tree whose blocks the inode holds too.
  std::vector<Extent> extents;
  Runs tree;  // extent-tree blocks
  Runs held;  // xattr blocks, bad extents' blocks left in place
  bool rewrite = false;
  if (disk.tree_depth == 0) {
    extents = disk.inline_extents;
  } else if (auto r = read_extent_tree(ino, disk.tree_root, disk.tree_depth, extents, tree); !r) {
    if (r.error().code != EUCLEAN) return r;  // an I/O error proves no damage
    found(fmt::format("inode {}: extent tree: {}; {}", ino, r.error().message,
                      options_.repair ? "the inode is cleared" : "left as it is"),
          options_.repair, false);
    return clear_inode(ino);
  }
  std::vector<Extent> kept;
  bool left_bad = false;  // a bad extent left (checking only): the block count is not judged
  bool retree = false;    // a bad extent removed from a tree: written again after pass 1
  // A directory's overflow buckets live from file block kOverflowBase (2^32) on, past where
  // a file may reach; no directory takes another 2^32 of them.
  const uint64_t last_block = type == S_IFDIR ? 2 * kOverflowBase : kMaxFileSize / kBlockSize;
  for (const Extent& e : extents) {
    std::string wrong;
    if (e.length == 0 || e.length > kMaxExtentLength) {
      wrong = fmt::format("length {}", e.length);
    } else if (!in_data_area(e.physical, e.length)) {
      wrong = "outside the data area";
    } else if (!kept.empty() && e.logical < kept.back().logical_end()) {
      wrong = fmt::format("overlaps the extent at file block {}", kept.back().logical);
    } else if (e.logical + e.length > last_block) {
      wrong = type == S_IFDIR ? "past the last overflow block" : "past the largest file";
    }
    if (wrong.empty()) {
      kept.push_back(e);
      continue;
    }
    const bool fixable = options_.repair;
    found(fmt::format("inode {}: {}: {}{}", ino, describe(e), wrong,
                      fixable ? "; removed" : "; left as it is"),
          fixable, false);
    rewrite = rewrite || (fixable && disk.tree_depth == 0);
    retree = retree || (fixable && disk.tree_depth != 0);
    left_bad = left_bad || !fixable;
    if (!fixable && e.length != 0) {
      // Left in place, it still points at its blocks: those in the data area stay in use, so
      // that a repaired bitmap does not hand them out again.
      const uint64_t a = std::max(e.physical, sb_.data_start);
      const uint64_t b =
          std::min<uint64_t>(e.physical + std::min(e.length, kMaxExtentLength), sb_.total_blocks);
      if (e.physical < sb_.total_blocks && a < b) held.emplace_back(a, b - a);
    }
  }
  if (rewrite) disk.inline_extents = kept;
  extents = kept;  // a bad extent is not file data to check

  if (disk.xattr_block != 0) {
    const uint64_t x = disk.xattr_block;
    const uint32_t n = std::max<uint32_t>(disk.xattr_blocks, 1);
    Result<void> ok = fail(EUCLEAN, "field xattr_block: {} (+{}) outside the data area", x, n);
    if (in_data_area(x, n)) {
      auto attrs = read_xattrs(ino, disk);
      ok = attrs ? Result<void>() : fail(attrs.error());
    }
    if (!ok && ok.error().code != EUCLEAN) return ok;
    if (ok) {
      held.emplace_back(x, n);
    } else {
      found(fmt::format("inode {}: xattr block {}: {}{}", ino, x, ok.error().message,
                        options_.repair ? "; its xattrs are dropped" : ""),
            options_.repair, false);
      disk.xattr_block = 0;
      disk.xattr_blocks = 0;
      rewrite = true;
    }
  }

  if (type == S_IFLNK && disk.inline_symlink.empty()) {
    const auto target = std::find_if(extents.begin(), extents.end(),
                                     [](const Extent& e) { return e.logical == 0; });
    AlignedBuffer bytes = fresh_block();
    Result<void> ok =
        target == extents.end()
            ? fail(EUCLEAN, "no target block")
            : read_verified(target->physical, bytes, fmt::format("inode {}: symlink target", ino),
                            [&](Image i) -> Result<void> {
                              auto d = decode_symlink(i, ino, disk.size, disk.symlink_crc);
                              return d ? Result<void>() : fail(d.error());
                            });
    if (!ok && ok.error().code != EUCLEAN) return ok;
    if (!ok) {
      found(fmt::format("inode {}: symlink: {}{}", ino, ok.error().message,
                        options_.repair ? "; cleared" : ""),
            options_.repair, false);
      return clear_inode(ino);
    }
  }

  bool past_eof = false;
  if (type == S_IFREG) {
    const uint64_t size_blocks = (disk.size + kBlockSize - 1) / kBlockSize;
    for (const Extent& e : extents) {
      // Left by a truncate cut short, or a size not yet grown over data that landed: the
      // mount after a crash frees them (so the filesystem is not marked clean here).
      if (!e.unwritten && e.logical_end() > size_blocks) past_eof = true;
    }
  }

  uint64_t held_blocks = 0;
  for (const Extent& e : extents) held_blocks += e.length;
  for (const auto& [first, count] : tree) held_blocks += count;
  for (const auto& [first, count] : held) held_blocks += count;
  if (held_blocks != disk.blocks && !left_bad && !retree) {
    found(fmt::format("inode {}: field blocks: {}, but it holds {}{}", ino, disk.blocks,
                      held_blocks, options_.repair ? "; set" : ""),
          options_.repair);
    disk.blocks = held_blocks;
    rewrite = true;
  }
  if (rewrite && options_.repair) {
    if (auto r = rewrite_inode(ino, disk); !r) return r;
  }

  InodeInfo& info = inodes_[ino];
  info.mode = disk.mode;
  info.nlink = disk.nlink;
  info.parent = disk.parent;
  info.past_eof = past_eof;
  info.size = disk.size;
  switch (type) {
    case S_IFREG:
      ++report_.files;
      break;
    case S_IFDIR:
      ++report_.directories;
      break;
    case S_IFLNK:
      ++report_.symlinks;
      break;
    default:
      ++report_.others;
      break;
  }
  extents_[ino] = std::move(extents);
  if (!tree.empty()) tree_runs_[ino] = std::move(tree);
  if (!held.empty()) meta_runs_[ino] = std::move(held);
  if (retree) retree_.push_back(ino);  // its block count is set then
  hold(ino);
  return {};
}

Result<void> Checker::rewrite_trees() {
  for (uint64_t ino : retree_) {
    if (inodes_[ino].mode == 0) continue;
    if (auto r = set_extents(ino, extents_[ino]); !r) return r;
  }
  retree_.clear();
  return {};
}

Result<void> Checker::read_extent_tree(uint64_t ino, uint64_t block, uint32_t levels,
                                       std::vector<Extent>& out, Runs& tree_blocks) {
  if (levels == 0 || levels > 8) return fail(EUCLEAN, "field tree_depth: {}", levels);
  if (!in_data_area(block, 1)) {
    return fail(EUCLEAN, "block {} outside the data area", block);
  }
  tree_blocks.emplace_back(block, 1);
  AlignedBuffer image = fresh_block();
  const std::string what = fmt::format("inode {}: extent tree block", ino);
  if (levels == 1) {
    std::vector<Extent> leaf;
    auto ok = read_verified(block, image, what, [&](Image i) -> Result<void> {
      auto d = decode_extent_leaf(i, block);
      if (!d) return fail(d.error());
      leaf = std::move(*d);
      return {};
    });
    if (!ok) return ok;
    out.insert(out.end(), leaf.begin(), leaf.end());
    return {};
  }
  std::vector<IndexEntry> entries;
  uint32_t level = 0;
  auto ok = read_verified(block, image, what, [&](Image i) -> Result<void> {
    auto d = decode_extent_index(i, block, &level);
    if (!d) return fail(d.error());
    entries = std::move(*d);
    return {};
  });
  if (!ok) return ok;
  if (level != levels - 1) {
    return fail(EUCLEAN, "index block {}: field level: {}, expected {}", block, level, levels - 1);
  }
  for (const IndexEntry& e : entries) {
    if (auto r = read_extent_tree(ino, e.block, levels - 1, out, tree_blocks); !r) return r;
  }
  return {};
}

Result<void> Checker::load_table_block(uint64_t table, AlignedBuffer& out, bool report) {
  if (auto r = read(table, out); !r) return r;
  if (journal_images_.contains(table)) return {};  // the journal's image is the truth
  const uint64_t first = (table - sb_.inode_table_start) * kInodesPerBlock + 1;
  bool patched = false;
  AlignedBuffer other = fresh_block();
  for (uint64_t n = first; n < first + kInodesPerBlock && n <= sb_.inode_count; ++n) {
    const bool in_use = inode_bits_[n - 1] || (n < inodes_.size() && inodes_[n].mode != 0);
    const auto slot = [n](std::span<const std::byte> bytes) {
      return decode_inode(bytes.subspan(slot_offset(n), kInodeSize), n);
    };
    auto decoded = slot(out.span().first(kBlockSize));
    if (!in_use || decoded) continue;
    // This inode alone, looked for in redundancy (the other copies, parity), nothing written:
    // only its own slot is taken, so a neighbour wrong on another copy is not taken along.
    auto recovered = volume_.recover_block(
        table * kBlockSize, other.span().first(kBlockSize),
        [&](std::span<const std::byte> bytes) { return slot(bytes).has_value(); }, false);
    if (!recovered) continue;  // damaged everywhere: judged by check_inode
    std::memcpy(out.data() + slot_offset(n), other.data() + slot_offset(n), kInodeSize);
    patched = true;
    if (!report) continue;
    std::string members;
    for (unsigned m : recovered->rewritten) {
      members += (members.empty() ? "" : ", ") + std::to_string(m);
    }
    found(fmt::format("inode {} (volume block {}): wrong on member {} ({}); right in "
                      "redundancy{}",
                      n, table, members, decoded.error().message,
                      options_.repair ? ", rewritten" : ""),
          options_.repair);
  }
  if (patched && report && options_.repair) return write(table, out.span().first(kBlockSize));
  return {};
}

Result<void> Checker::rewrite_inode(uint64_t ino, const DiskInode& disk) {
  AlignedBuffer block = fresh_block();
  const uint64_t table = table_block(ino);
  if (auto r = load_table_block(table, block, false); !r) return r;
  encode_inode(disk, std::span<std::byte>(block.data() + slot_offset(ino), kInodeSize));
  return write(table, block.span().first(kBlockSize));
}

Result<void> Checker::clear_inode(uint64_t ino) {
  inodes_[ino] = InodeInfo{};
  extents_.erase(ino);
  tree_runs_.erase(ino);
  meta_runs_.erase(ino);
  if (!options_.repair) return {};
  DiskInode empty;
  AlignedBuffer block = fresh_block();
  if (auto r = load_table_block(table_block(ino), block, false); !r) return r;
  if (auto old = decode_inode(
          std::span<const std::byte>(block.data() + slot_offset(ino), kInodeSize), ino)) {
    empty.generation = old->generation;
  }
  return rewrite_inode(ino, empty);
}

}  // namespace stripefs::fs
