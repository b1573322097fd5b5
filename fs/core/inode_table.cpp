// Inodes: the table on disk and the cache in memory.
#include <ctime>

#include "fs/core/inode.hpp"

namespace stripefs::fs {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Timespec Filesystem::now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return {ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

namespace {
uint64_t table_block(const FsSuperblock& sb, uint64_t ino) {
  return sb.inode_table_start + (ino - 1) / kInodesPerBlock;
}
size_t table_offset(uint64_t ino) {
  return ((ino - 1) % kInodesPerBlock) * kInodeSize;
}
}  // namespace

Result<Filesystem::Inode*> Filesystem::get_inode(uint64_t ino) {
  if (auto it = inode_cache_.find(ino); it != inode_cache_.end()) return it->second.get();
  if (ino == 0 || ino > sb_.inode_count) return fail(ESTALE, "inode {}: out of range", ino);
  if (!inodes_->busy(ino - 1)) return fail(ESTALE, "inode {}: not in use", ino);
  auto block = meta_->read(table_block(sb_, ino));
  if (!block) return fail(block.error());
  auto disk = decode_inode(block->subspan(table_offset(ino), kInodeSize), ino);
  if (!disk) {
    fs_log().error("{}", disk.error().message);
    return fail(EIO, "{}", disk.error().message);
  }
  if (disk->mode == 0) return fail(ESTALE, "inode {}: not in use", ino);
  auto inode = std::make_unique<Inode>();
  inode->ino = ino;
  inode->disk = std::move(*disk);
  inode->stored_size = inode->disk.size;
  Inode* raw = inode.get();
  inode_cache_.emplace(ino, std::move(inode));
  return raw;
}

Result<Filesystem::Inode*> Filesystem::new_inode(uint32_t mode, const Caller& caller,
                                                 uint64_t parent) {
  auto run = inodes_->reserve(1, 0, 1);
  if (!run) return fail(ENOSPC, "no free inodes");
  const uint64_t ino = run->first + 1;
  auto block = meta_->read(table_block(sb_, ino));
  if (!block) {
    inodes_->unreserve(run->first, 1);
    return fail(block.error());
  }
  // The slot keeps its generation across uses, so an old NFS handle goes stale. A damaged
  // free slot only loses its generation; bump from the block's raw value regardless.
  auto old = decode_inode(block->subspan(table_offset(ino), kInodeSize), ino);
  inodes_->mark_used(*meta_, run->first, 1);
  auto inode = std::make_unique<Inode>();
  inode->ino = ino;
  DiskInode& d = inode->disk;
  d.mode = mode;
  d.uid = caller.uid;
  d.gid = caller.gid;
  d.nlink = 1;
  d.atime = d.mtime = d.ctime = now();
  d.generation = (old ? old->generation : static_cast<uint32_t>(ino)) + 1;
  d.parent = parent;
  inode->extents_loaded = true;
  Inode* raw = inode.get();
  inode_cache_[ino] = std::move(inode);
  dirty(*raw);
  return raw;
}

Result<void> Filesystem::store_inode(Inode& inode) {
  if (inode.extents_dirty) {
    if (auto r = store_extents(inode); !r) return r;
  }
  auto block = meta_->read(table_block(sb_, inode.ino));
  if (!block) return fail(block.error());
  auto out = meta_->modify(table_block(sb_, inode.ino));
  DiskInode stored = inode.disk;
  if (inode.is_reg()) stored.size = size_to_store(inode);
  encode_inode(stored, std::span(out).subspan(table_offset(inode.ino), kInodeSize));
  inode.stored_size = stored.size;
  inode.dirty = false;  // short of the size, it is dirtied again as that data leaves the cache
  return {};
}

// As ext4's i_disksize: the size grows on disk only over data that is on the members. Data
// still in the cache (dirty or in flight) that reaches past the stored size holds the stored
// size at its first byte; data below the stored size (an overwrite) does not hold it back.
// Extents written back past the stored size are on disk but past EOF: after a crash the
// mount frees them (free_past_eof). Whatever takes data out of the cache (writeback_done,
// drop_ranges) dirties an inode stored short, so the next commit stores it again.
uint64_t Filesystem::size_to_store(const Inode& inode) const {
  const uint64_t was = inode.stored_size;
  uint64_t unwritten = UINT64_MAX;  // the first byte of data past `was` not yet written back
  if (auto range = inode.cache.range_after(was)) unwritten = range->first;
  // In flight but no longer cached: a newer write or a truncate took its range.
  const uint64_t block = inode.inflight.first_run_reaching(was / kBlockSize);
  if (block != UINT64_MAX) unwritten = std::min(unwritten, block * kBlockSize);
  return std::min(inode.disk.size, std::max(was, unwritten));
}

void Filesystem::restore_size_later(Inode& inode) {
  if (inode.is_reg() && inode.stored_size != inode.disk.size) dirty(inode);
}

Attr Filesystem::attr_of(const Inode& inode) const {
  const DiskInode& d = inode.disk;
  Attr a;
  a.ino = inode.ino;
  a.mode = d.mode;
  a.nlink = d.nlink;
  a.uid = d.uid;
  a.gid = d.gid;
  a.size = d.size;
  a.blocks512 = d.blocks * (kBlockSize / 512);
  // Dirty data not yet allocated still counts, as on ext4 with delayed allocation.
  if (inode.is_reg()) a.blocks512 += (inode.cache.dirty_bytes() / kBlockSize) * (kBlockSize / 512);
  a.rdev = d.rdev;
  a.atime = d.atime;
  a.mtime = d.mtime;
  a.ctime = d.ctime;
  a.generation = d.generation;
  return a;
}

// Drops an inode nobody refers to; frees it for good when it has no links either.
void Filesystem::maybe_evict(Inode& inode, Lock& lock) {
  if (inode.lookups > 0 || inode.opens > 0 || inode.ino == kRootInode || inode.in_steps) return;
  // With writebacks in flight it stays: writeback_done comes back here when they are done.
  if (inode.writebacks > 0) return;
  if (inode.disk.nlink == 0) {
    if (auto r = destroy_inode(inode, lock); !r) {
      fs_log().error("inode {}: freeing failed: {}", inode.ino, r.error().message);
    }
    return;
  }
  if (inode.dirty || inode.extents_dirty || !inode.cache.empty() || inode.writebacks > 0) return;
  inode_cache_.erase(inode.ino);
}

// destroy_inode for an inode whose blocks may be more than one transaction frees: they go
// in steps first. Only where committing is allowed (the scan after a crash, unmount).
Result<void> Filesystem::destroy_inode_in_steps(Inode& inode, Lock& lock) {
  drop_ranges(inode, 0, UINT64_MAX);
  if (auto r = free_range_in_steps(inode, 0, UINT64_MAX, lock); !r) return r;
  if (auto r = destroy_inode(inode, lock); !r) return r;
  return commit_while_large(lock);  // so the next one starts afresh
}

// Frees an unlinked inode's blocks and its table slot. Never waits: the caller made sure no
// writeback is in flight (so no completion can still find this inode).
Result<void> Filesystem::destroy_inode(Inode& inode, Lock& lock) {
  (void)lock;
  if (inode.writebacks > 0) return fail(EBUSY, "inode {}: writeback in flight", inode.ino);
  drop_ranges(inode, 0, UINT64_MAX);
  if (auto r = load_extents(inode); !r) return r;
  if (auto r = free_range(inode, 0, UINT64_MAX); !r) return r;
  for (uint64_t b : inode.tree_blocks) free_blocks(b, 1);
  inode.tree_blocks.clear();
  if (inode.disk.xattr_block != 0) free_blocks(inode.disk.xattr_block, 1);
  const uint32_t generation = inode.disk.generation;
  inode.disk = DiskInode{};
  inode.disk.generation = generation;
  inode.extents_dirty = false;
  if (auto r = store_inode(inode); !r) return r;
  inodes_->release(*meta_, inode.ino - 1, 1);
  inode_cache_.erase(inode.ino);
  return {};
}

}  // namespace stripefs::fs
