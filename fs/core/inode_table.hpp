// The inode table: the inodes in memory and their slots on disk (kInodeSize bytes each,
// kInodesPerBlock per block from the superblock's inode_table_start; inode number = slot +
// 1). An inode is loaded once, from its slot, and stays in memory until the filesystem lets
// it go; the table remembers which inodes changed since the last commit. A slot taken for a
// new inode gets a generation one past what the slot held, so that an NFS file handle of an
// earlier file there goes stale instead of reaching the new one.
//
// Slots are read and written through the MetaStore, in its running transaction, and taken
// and given back through the inode allocator. Not thread-safe: under the filesystem lock.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fs/core/allocator.hpp"
#include "fs/core/inode.hpp"
#include "fs/core/meta_store.hpp"

namespace stripefs::fs {

class InodeTable {
 public:
  using Map = std::unordered_map<uint64_t, std::unique_ptr<Inode>>;

  // The table of `count` inodes from volume block `table_start`; `slots` is the inode
  // allocator. Both must outlive it.
  InodeTable(MetaStore& meta, BitmapAllocator& slots, uint64_t table_start, uint64_t count)
      : meta_(meta), slots_(slots), start_(table_start), count_(count) {}

  // The inode if it is in memory, else null.
  Inode* find(uint64_t ino) const;
  // The inode, loaded from its slot if it is not in memory: ESTALE for a number out of range
  // or a slot not in use, EIO for a damaged slot (the message names the inode and field).
  Result<Inode*> get(uint64_t ino);
  // A new inode in a free slot: `mode`, owner, one link, times `now`, `parent` (directories),
  // the slot's next generation. It is dirty; its extents are loaded (there are none).
  Result<Inode*> create(uint32_t mode, uint32_t uid, uint32_t gid, uint64_t parent, Timespec now);
  // Writes `disk` into the slot of `ino`, in the running transaction.
  Result<void> write(uint64_t ino, const DiskInode& disk);
  // The inode leaves memory (its slot stays as it is).
  void erase(uint64_t ino) { inodes_.erase(ino); }
  // Frees the slot of `ino` (reusable after the checkpoint that covers this transaction) and
  // drops the inode from memory. Write its cleared fields first.
  void release(uint64_t ino);

  // Changed since the last commit: stored then.
  void mark_dirty(uint64_t ino) { dirty_.insert(ino); }
  size_t dirty_count() const { return dirty_.size(); }
  // The inodes marked since the last call, and a fresh start.
  std::vector<uint64_t> take_dirty();

  // Table block `block` (cached) still holds, in the slot of every inode in memory, what was
  // last read from or written to that slot: bytes put there by anything else (memory
  // overwritten from elsewhere) must not be committed. EIO naming the block and inode if not.
  Result<void> check_slots(uint64_t block);
  // The table's blocks: [first_block(), end_block()).
  uint64_t first_block() const { return start_; }
  uint64_t end_block() const { return start_ + (count_ + kInodesPerBlock - 1) / kInodesPerBlock; }

  // The inodes in memory.
  size_t size() const { return inodes_.size(); }
  Map::iterator begin() { return inodes_.begin(); }
  Map::iterator end() { return inodes_.end(); }

 private:
  uint64_t block_of(uint64_t ino) const { return start_ + (ino - 1) / kInodesPerBlock; }
  // Every inode in use in `ino`'s table block but `except` decodes: checked once, and a block
  // that fails is healed (MetaStore::read_checked) before it is changed, so that damage a
  // neighbour's update would write home (parity and all) is repaired first.
  Result<void> check_block(uint64_t ino, uint64_t except);
  static size_t offset_of(uint64_t ino) { return ((ino - 1) % kInodesPerBlock) * kInodeSize; }

  MetaStore& meta_;
  BitmapAllocator& slots_;
  uint64_t start_;
  uint64_t count_;
  Map inodes_;
  std::unordered_set<uint64_t> dirty_;
};

}  // namespace stripefs::fs
