// File block → volume block mappings: an ordered map in memory; on disk, up to
// kInlineExtents in the inode, else a tree of leaf and index blocks that is rewritten into
// fresh blocks at commit (the old blocks are freed with the transaction).
#include "fs/core/inode.hpp"

namespace stripefs::fs {

namespace {

// Reads the subtree at `block` (`levels` levels, 1 = a leaf) into `out`.
Result<void> read_tree(MetaStore& meta, uint64_t block, uint32_t levels, uint64_t ino,
                       std::vector<Extent>& out, std::vector<uint64_t>& blocks) {
  auto image = meta.read(block);
  if (!image) return fail(image.error());
  blocks.push_back(block);
  if (levels == 1) {
    auto leaf = decode_extent_leaf(*image, block);
    if (!leaf) return fail(EIO, "inode {}: {}", ino, leaf.error().message);
    out.insert(out.end(), leaf->begin(), leaf->end());
    return {};
  }
  uint32_t level = 0;
  auto index = decode_extent_index(*image, block, &level);
  if (!index) return fail(EIO, "inode {}: {}", ino, index.error().message);
  if (level != levels - 1) {
    return fail(EIO, "inode {}: extent index at volume block {}: field level: {}, expected {}", ino,
                block, level, levels - 1);
  }
  for (const IndexEntry& e : *index) {
    if (auto r = read_tree(meta, e.block, levels - 1, ino, out, blocks); !r) return r;
  }
  return {};
}

}  // namespace

Result<void> Filesystem::load_extents(Inode& inode) {
  if (inode.extents_loaded) return {};
  std::vector<Extent> extents;
  if (inode.disk.tree_depth == 0) {
    extents = inode.disk.inline_extents;
  } else if (auto r = read_tree(*meta_, inode.disk.tree_root, inode.disk.tree_depth, inode.ino,
                                extents, inode.tree_blocks);
             !r) {
    fs_log().error("{}", r.error().message);
    return r;
  }
  for (const Extent& e : extents) {
    if (!inode.extents.empty()) {
      const auto& last = inode.extents.rbegin()->second.extent;
      if (e.logical < last.logical_end()) {
        return fail(EIO, "inode {}: extent tree: field logical: {} overlaps {}", inode.ino,
                    e.logical, last.logical);
      }
    }
    if (e.physical < sb_.data_start || e.physical + e.length > sb_.total_blocks) {
      return fail(EIO,
                  "inode {}: extent at file block {}: field physical: {} outside the data area",
                  inode.ino, e.logical, e.physical);
    }
    inode.extents.emplace(e.logical, MemExtent{e, false});
  }
  inode.extents_loaded = true;
  return {};
}

Result<void> Filesystem::store_extents(Inode& inode) {
  std::vector<Extent> extents;
  for (const auto& [first, m] : inode.extents) {
    if (!m.pending) extents.push_back(m.extent);
  }
  for (uint64_t b : inode.tree_blocks) free_blocks(b, 1);
  inode.disk.blocks -= inode.tree_blocks.size();
  inode.tree_blocks.clear();
  inode.disk.inline_extents.clear();
  inode.disk.tree_depth = 0;
  inode.disk.tree_root = 0;
  if (extents.size() <= kInlineExtents) {
    inode.disk.inline_extents = std::move(extents);
    inode.extents_dirty = false;
    return {};
  }
  auto allocate = [&]() -> Result<uint64_t> {
    auto run = blocks_->reserve(1, 0, 1);
    if (!run) return fail(ENOSPC, "inode {}: no space for the extent tree", inode.ino);
    blocks_->mark_used(*meta_, run->first, 1);
    inode.tree_blocks.push_back(run->first);
    ++inode.disk.blocks;
    return run->first;
  };
  std::vector<IndexEntry> level;
  for (size_t i = 0; i < extents.size(); i += kLeafExtents) {
    auto block = allocate();
    if (!block) return fail(block.error());
    const size_t n = std::min(kLeafExtents, extents.size() - i);
    encode_extent_leaf(std::span(extents).subspan(i, n), *block, meta_->fresh(*block));
    level.push_back({extents[i].logical, *block});
  }
  uint32_t depth = 1;
  while (level.size() > 1) {
    std::vector<IndexEntry> up;
    for (size_t i = 0; i < level.size(); i += kIndexEntries) {
      auto block = allocate();
      if (!block) return fail(block.error());
      const size_t n = std::min(kIndexEntries, level.size() - i);
      encode_extent_index(std::span(level).subspan(i, n), depth, *block, meta_->fresh(*block));
      up.push_back({level[i].first_logical, *block});
    }
    level = std::move(up);
    ++depth;
  }
  inode.disk.tree_depth = depth;
  inode.disk.tree_root = level.front().block;
  inode.extents_dirty = false;
  return {};
}

Result<uint64_t> Filesystem::map_block(Inode& inode, uint64_t file_block) {
  if (auto r = load_extents(inode); !r) return fail(r.error());
  auto it = inode.extents.upper_bound(file_block);
  if (it == inode.extents.begin()) return 0;
  --it;
  const Extent& e = it->second.extent;
  if (file_block >= e.logical_end()) return 0;
  return e.physical + (file_block - e.logical);
}

Result<uint64_t> Filesystem::ensure_block(Inode& inode, uint64_t file_block) {
  auto mapped = map_block(inode, file_block);
  if (!mapped || *mapped != 0) return mapped;
  uint64_t goal = 0;
  if (auto it = inode.extents.lower_bound(file_block); it != inode.extents.begin()) {
    --it;
    goal = it->second.extent.physical + it->second.extent.length;
  }
  auto run = blocks_->reserve(1, goal, 1);
  if (!run) return fail(ENOSPC, "no space left on the volume");
  blocks_->mark_used(*meta_, run->first, 1);
  insert_extent(inode, Extent{file_block, run->first, 1, false});
  ++inode.disk.blocks;
  dirty(inode);
  return run->first;
}

void Filesystem::insert_extent(Inode& inode, Extent extent) {
  MemExtent m{extent, false};
  auto [it, inserted] = inode.extents.insert_or_assign(extent.logical, m);
  // Merge with the previous and next extents where both are contiguous.
  if (it != inode.extents.begin()) {
    auto prev = std::prev(it);
    if (mergeable(prev->second, it->second)) {
      prev->second.extent.length += it->second.extent.length;
      inode.extents.erase(it);
      it = prev;
    }
  }
  if (auto next = std::next(it);
      next != inode.extents.end() && mergeable(it->second, next->second)) {
    it->second.extent.length += next->second.extent.length;
    inode.extents.erase(next);
  }
  inode.extents_dirty = true;
  dirty_inodes_.insert(inode.ino);
}

// Removes the mappings of file blocks [first, end), freeing their volume blocks.
Result<void> Filesystem::free_range(Inode& inode, uint64_t first, uint64_t end) {
  if (auto r = load_extents(inode); !r) return r;
  auto it = inode.extents.upper_bound(first);
  if (it != inode.extents.begin()) --it;
  while (it != inode.extents.end() && it->first < end) {
    MemExtent m = it->second;
    const Extent e = m.extent;
    if (e.logical_end() <= first) {
      ++it;
      continue;
    }
    it = inode.extents.erase(it);
    const uint64_t cut_begin = std::max(first, e.logical);
    const uint64_t cut_end = std::min(end, e.logical_end());
    if (e.logical < cut_begin) {
      MemExtent head = m;
      head.extent.length = static_cast<uint32_t>(cut_begin - e.logical);
      inode.extents.emplace(head.extent.logical, head);
    }
    if (cut_end < e.logical_end()) {
      MemExtent tail = m;
      tail.extent.logical = cut_end;
      tail.extent.physical = e.physical + (cut_end - e.logical);
      tail.extent.length = static_cast<uint32_t>(e.logical_end() - cut_end);
      it = inode.extents.emplace(tail.extent.logical, tail).first;
    }
    const uint64_t physical = e.physical + (cut_begin - e.logical);
    if (m.pending) {
      // Writeback waits are done before freeing, so this is a logic error worth a log.
      fs_log().error("inode {}: freeing blocks still in flight", inode.ino);
    }
    free_blocks(physical, cut_end - cut_begin);
    inode.disk.blocks -= cut_end - cut_begin;
    inode.extents_dirty = true;
    dirty_inodes_.insert(inode.ino);
    dirty(inode);
  }
  return {};
}

uint64_t Filesystem::step_blocks() const {
  return std::max<uint64_t>(1, journal_->capacity_blocks() / 8) * kBitsPerBitmapBlock;
}

// From the end of the range backwards, so that after a crash between steps what is left is
// the range's beginning: for a truncate, the blocks just past the new size, which the scan
// after an unclean mount frees (free_past_eof).
Result<void> Filesystem::free_range_in_steps(Inode& inode, uint64_t first, uint64_t end,
                                             Lock& lock) {
  InSteps steps(*this, inode, lock);
  if (auto r = load_extents(inode); !r) return r;
  if (inode.extents.empty()) return {};
  uint64_t stop = std::min(end, std::prev(inode.extents.end())->second.extent.logical_end());
  // Each extent may sit in a bitmap block of its own: a step frees at most an eighth of the
  // journal's worth of them.
  const uint64_t step_extents = std::max<uint64_t>(1, journal_->capacity_blocks() / 8);
  Result<void> result;
  while (stop > first) {
    uint64_t from = first;
    uint64_t counted = 0;
    for (auto it = inode.extents.lower_bound(stop); it != inode.extents.begin();) {
      --it;
      if (it->second.extent.logical_end() <= first) break;
      if (++counted == step_extents) {
        from = std::max(first, it->first);
        break;
      }
    }
    if (stop - from > step_blocks()) from = stop - step_blocks();
    if (result = free_range(inode, from, stop); !result) break;
    stop = from;
    if (stop > first) {
      if (result = commit_while_large(lock); !result) break;
    }
  }
  return result;
}

Result<void> Filesystem::free_past_eof(Inode& inode, Lock& lock) {
  if (!inode.is_reg()) return {};
  if (auto r = load_extents(inode); !r) return r;
  const uint64_t eof = (inode.disk.size + kBlockSize - 1) / kBlockSize;
  std::vector<std::pair<uint64_t, uint64_t>> written;
  for (const auto& [logical, m] : inode.extents) {
    if (m.extent.logical_end() <= eof || m.extent.unwritten) continue;
    written.emplace_back(std::max(eof, logical), m.extent.logical_end());
  }
  if (written.empty()) return {};
  fs_log().warn(
      "inode {}: freeing {} extent(s) past its size (written back after its last size was "
      "committed, or left by an interrupted truncate)",
      inode.ino, written.size());
  for (auto [a, b] : written) {
    if (auto r = free_range_in_steps(inode, a, b, lock); !r) return r;
    if (auto r = commit_while_large(lock); !r) return r;
  }
  return {};
}

void Filesystem::wait_in_steps(Inode& inode, Lock& lock) {
  while (inode.in_steps) writeback_cv_.wait(lock);
}

// Another operation in steps on the inode (perhaps one started while its caller waited for
// something else) finishes first.
Filesystem::InSteps::InSteps(Filesystem& fs, Inode& inode, Lock& lock) : fs_(fs), inode_(inode) {
  fs.wait_in_steps(inode, lock);
  inode.in_steps = true;
}

Filesystem::InSteps::~InSteps() {
  inode_.in_steps = false;
  fs_.writeback_cv_.notify_all();
}

void Filesystem::free_blocks(uint64_t first, uint64_t count) {
  blocks_->release(*meta_, first, count);
  for (uint64_t b = first; b < first + count && count <= 64; ++b) meta_->forget(b);
}

}  // namespace stripefs::fs
