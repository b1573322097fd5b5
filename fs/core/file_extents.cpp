// A file's extents: loaded from and stored to disk (up to kInlineExtents in the inode, else a
// tree of leaf and index blocks, of which a commit writes what changed: extent_tree.hpp), and the
// filesystem's changes to a file's ExtentMap that allocate or free blocks: metadata files' blocks,
// frees of any size in steps.
#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

namespace {

// Reads the subtree at `block` (`levels` levels, 1 = a leaf) into `out`, and its blocks into
// `tree`.
Result<void> read_tree(MetaStore& meta, uint64_t block, uint32_t levels, uint64_t ino,
                       std::vector<Extent>& out, ExtentTree& tree) {
  if (levels == 1) {
    auto leaf = meta.read_as(block, [block](std::span<const std::byte, kBlockSize> image) {
      return decode_extent_leaf(image, block);
    });
    if (!leaf) return fail(EIO, "inode {}: {}", ino, leaf.error().message);
    tree.add_leaf(block, *leaf);
    out.insert(out.end(), leaf->begin(), leaf->end());
    return {};
  }
  tree.add_index(block);
  uint32_t level = 0;
  auto index = meta.read_as(block, [block, &level](std::span<const std::byte, kBlockSize> image) {
    return decode_extent_index(image, block, &level);
  });
  if (!index) return fail(EIO, "inode {}: {}", ino, index.error().message);
  if (level != levels - 1) {
    return fail(EIO, "inode {}: extent index at volume block {}: field level: {}, expected {}", ino,
                block, level, levels - 1);
  }
  for (const IndexEntry& e : *index) {
    if (auto r = read_tree(meta, e.block, levels - 1, ino, out, tree); !r) return r;
  }
  return {};
}

}  // namespace

Result<void> Filesystem::load_extents(Inode& inode) {
  if (inode.extents_loaded) return {};
  std::vector<Extent> extents;
  if (inode.disk.tree_depth == 0) {
    extents = inode.disk.inline_extents;
  } else {
    inode.tree = ExtentTree{};
    inode.tree.set_root({inode.disk.tree_depth, inode.disk.tree_root});
    if (auto r = read_tree(*meta_, inode.disk.tree_root, inode.disk.tree_depth, inode.ino, extents,
                           inode.tree);
        !r) {
      fs_log().error("{}", r.error().message);
      return r;
    }
  }
  for (const Extent& e : extents) {
    if (!inode.extents.empty() && e.logical < inode.extents.end_block()) {
      return fail(EIO, "inode {}: extent tree: field logical: {} overlaps {}", inode.ino, e.logical,
                  std::prev(inode.extents.end())->first);
    }
    if (e.physical < sb_.data_start || e.physical + e.length > sb_.total_blocks) {
      return fail(EIO,
                  "inode {}: extent at file block {}: field physical: {} outside the data area",
                  inode.ino, e.logical, e.physical);
    }
    inode.extents.add(MemExtent{e, false});
  }
  inode.extents.loaded(extents.size());
  inode.extents_loaded = true;
  return {};
}

Result<void> Filesystem::store_extents(Inode& inode) {
  // A tree lists only the leaves its changes meet; inline, the few extents there are.
  ExtentTree::Plan plan = inode.tree.plan(
      [&inode](uint64_t from, uint64_t to) { return inode.extents.on_disk(from, to); },
      inode.tree.empty() ? std::nullopt : inode.extents.changed());
  const auto release = [&](uint64_t b) {
    free_blocks(b, 1);
    --inode.disk.blocks;
  };
  if (plan.extents <= kInlineExtents) {
    inode.tree.release_all(release);
    inode.disk.tree_depth = 0;
    inode.disk.tree_root = 0;
    inode.disk.inline_extents = plan.listed_all ? std::move(plan.listed) : inode.extents.on_disk();
    inode.extents_dirty = false;
    inode.extents.stored();
    return {};
  }
  const ExtentTree::Blocks blocks{
      .allocate = [&]() -> Result<uint64_t> {
        auto run = blocks_->reserve(1, 0, 1);
        if (!run) return fail(ENOSPC, "inode {}: no space for the extent tree", inode.ino);
        blocks_->mark_used(*meta_, run->first, 1);
        ++inode.disk.blocks;
        return run->first;
      },
      .release = release,
      .image = [&](uint64_t b) { return meta_->fresh(b); },
  };
  ExtentTree::Written written;
  auto root = inode.tree.store(std::move(plan), blocks, &written);
  inode.extents.stored();  // (after a failure the tree is empty: the next store lists all)
  if (!root) return fail(root.error());
  stats_.extent_leaves_written += written.leaves;
  stats_.extent_index_blocks_written += written.index_blocks;
  inode.disk.inline_extents.clear();
  inode.disk.tree_depth = root->depth;
  inode.disk.tree_root = root->block;
  inode.extents_dirty = false;
  return {};
}

Result<uint64_t> Filesystem::map_block(Inode& inode, uint64_t file_block) {
  if (auto r = load_extents(inode); !r) return fail(r.error());
  return inode.extents.map(file_block);
}

Result<uint64_t> Filesystem::ensure_block(Inode& inode, uint64_t file_block) {
  auto mapped = map_block(inode, file_block);
  if (!mapped || *mapped != 0) return mapped;
  uint64_t goal = 0;
  if (const MemExtent* previous = inode.extents.at(file_block).previous) {
    goal = previous->extent.physical + previous->extent.length;
  }
  if (!room_for(1)) return fail(ENOSPC, "no space left on the filesystem");
  auto run = blocks_->reserve(1, goal, 1);
  if (!run) return fail(ENOSPC, "no space left on the volume");
  blocks_->mark_used(*meta_, run->first, 1);
  insert_extent(inode, Extent{file_block, run->first, 1, false});
  ++inode.disk.blocks;
  dirty(inode);
  return run->first;
}

void Filesystem::insert_extent(Inode& inode, Extent extent) {
  inode.extents.insert(extent);
  inode.extents_dirty = true;
  table_->mark_dirty(inode.ino);
}

// Removes the mappings of file blocks [first, end), freeing their volume blocks.
Result<void> Filesystem::free_range(Inode& inode, uint64_t first, uint64_t end) {
  if (auto r = load_extents(inode); !r) return r;
  const std::vector<RemovedRun> removed = inode.extents.remove(first, end);
  for (const RemovedRun& run : removed) {
    if (run.pending) {
      // Writeback waits are done before freeing, so this is a logic error worth a log.
      fs_log().error("inode {}: freeing blocks still in flight", inode.ino);
    }
    free_blocks(run.physical, run.count);
    inode.disk.blocks -= run.count;
  }
  if (!removed.empty()) {
    inode.extents_dirty = true;
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
  return free_range_steps(inode, first, end, lock);
}

Result<void> Filesystem::free_range_steps(Inode& inode, uint64_t first, uint64_t end, Lock& lock) {
  if (auto r = load_extents(inode); !r) return r;
  if (inode.extents.empty()) return {};
  uint64_t stop = std::min(end, inode.extents.end_block());
  // Each extent may sit in a bitmap block of its own: a step frees at most an eighth of the
  // journal's worth of them.
  const uint64_t step_extents = std::max<uint64_t>(1, journal_->capacity_blocks() / 8);
  Result<void> result;
  while (stop > first) {
    uint64_t from = inode.extents.start_of_last(first, stop, step_extents);
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
  // In steps from the first range to the last commit: a commit stores the inode, and one
  // that nothing else holds (as after a crash) would be evicted under us.
  InSteps steps(*this, inode, lock);
  for (auto [a, b] : written) {
    if (auto r = free_range_steps(inode, a, b, lock); !r) return r;
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
