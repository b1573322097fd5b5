// The orphan list: which inodes a mount after a crash must look at, so that it need not read
// every inode. An inode is listed while its record on disk has no links left (unlinked while
// open) or written blocks past its size (data written back before its size was stored, or a
// truncate cut short in its steps) — ext4's orphan file, kept as a bitmap by inode number.
// The filesystem changes it in the transaction that stores the inode (store_inode), so a
// crash never leaves an inode that needs looking at unlisted.
//
// Not thread-safe: used under the filesystem lock. Blocks go through the MetaStore, in its
// running transaction, like the other bitmaps.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "fs/core/format.hpp"
#include "fs/core/meta_store.hpp"

namespace stripefs::fs {

class OrphanList {
 public:
  // The list of `count` inodes in `blocks` bitmap blocks from volume block `start`.
  OrphanList(uint64_t start, uint64_t blocks, uint64_t count)
      : start_(start), blocks_(blocks), count_(count) {}
  // Reads every block (blocking; a block that fails its check is healed from redundancy or
  // fails the load).
  Result<void> load(MetaStore& meta);
  bool listed(uint64_t ino) const { return listed_.contains(ino); }
  // Lists or unlists `ino` in the running transaction (nothing written when unchanged).
  void set(MetaStore& meta, uint64_t ino, bool listed);
  // Every inode listed, ascending.
  std::vector<uint64_t> inodes() const;
  size_t size() const { return listed_.size(); }

 private:
  uint64_t start_, blocks_, count_;
  std::unordered_set<uint64_t> listed_;
};

}  // namespace stripefs::fs
