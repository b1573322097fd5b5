// The filesystem's side of inodes, over the InodeTable: what is stored of an inode (the size
// rule), when one leaves memory, and freeing one whose last link is gone.
#include <ctime>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

Timespec Filesystem::now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return {ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

Result<Inode*> Filesystem::get_inode(uint64_t ino) {
  return table_->get(ino);
}

Result<Inode*> Filesystem::new_inode(uint32_t mode, const Caller& caller, uint64_t parent) {
  return table_->create(mode, caller.uid, caller.gid, parent, now());
}

Result<void> Filesystem::store_inode(Inode& inode) {
  if (inode.extents_dirty) {
    if (auto r = store_extents(inode); !r) return r;
  }
  DiskInode stored = inode.disk;
  if (inode.is_reg()) stored.size = size_to_store(inode);
  if (auto r = table_->write(inode.ino, stored); !r) return r;
  if (orphans_) {
    // In the same transaction as the record: listed while it has no links or written
    // blocks past its size (extents not loaded have not changed, nor has that).
    bool listed = orphans_->listed(inode.ino);
    if (stored.mode == 0) {
      listed = false;
    } else if (stored.nlink == 0) {
      listed = true;
    } else if (!inode.is_reg()) {
      listed = false;
    } else if (inode.extents_loaded) {
      listed = inode.extents.written_end() > (stored.size + kBlockSize - 1) / kBlockSize;
    }
    orphans_->set(*meta_, inode.ino, listed);
  }
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
  // Blocks promised to dirty data (delayed allocation) and given to writebacks in flight
  // count too, as on ext4: a file's blocks do not dip while its data goes to the members.
  const uint64_t blocks = d.blocks + inode.delalloc.size() + inode.pending_blocks;
  a.blocks512 = blocks * (kBlockSize / 512);
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
  table_->erase(inode.ino);
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
  inode.tree.release_all([this](uint64_t b) { free_blocks(b, 1); });
  if (inode.disk.xattr_block != 0) {
    free_blocks(inode.disk.xattr_block, std::max<uint32_t>(inode.disk.xattr_blocks, 1));
  }
  const uint32_t generation = inode.disk.generation;
  inode.disk = DiskInode{};
  inode.disk.generation = generation;
  inode.extents_dirty = false;
  if (auto r = store_inode(inode); !r) return r;
  table_->release(inode.ino);
  return {};
}

}  // namespace stripefs::fs
