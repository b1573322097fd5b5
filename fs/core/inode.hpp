// A file, directory or other node in memory: its on-disk fields and what the core keeps
// beside them (its block map, its cached data, its writeback state). Inodes live in the
// InodeTable, under the filesystem lock.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "fs/core/extent_map.hpp"
#include "fs/core/extent_tree.hpp"
#include "fs/core/file_cache.hpp"
#include "fs/core/format.hpp"
#include "fs/core/interval_set.hpp"

namespace stripefs::fs {

struct Inode {
  uint64_t ino = 0;
  DiskInode disk;
  bool dirty = false;  // disk fields changed since the last store
  // The size in the inode table. A file's size is stored only as far as its data has been
  // written back (size_to_store), so a crash leaves a prefix of what was written rather than
  // a file of the full size with holes where unwritten data was.
  uint64_t stored_size = 0;
  uint64_t lookups = 0;
  uint32_t opens = 0;
  bool extents_loaded = false;
  bool extents_dirty = false;
  ExtentMap extents;
  ExtentTree tree;          // the extents on disk when more than fit in the inode (once loaded)
  FileCache cache;          // data written and not yet on the members
  unsigned writebacks = 0;  // jobs in flight
  // File blocks of dirty data that have no volume blocks yet, each promised one (counted in
  // delalloc_reserved_): so writeback never meets ENOSPC after write() said yes.
  IntervalSet delalloc;
  // File blocks a writeback job has in flight. Newer data for them waits until the job is
  // done (writeback_deferred): two jobs for one block could land in either order.
  IntervalSet inflight;
  // Volume blocks writeback jobs in flight were given, not yet settled into disk.blocks.
  uint64_t pending_blocks = 0;
  bool writeback_deferred = false;
  // Blocks are being freed or allocated in steps, with commits (and the lock released) in
  // between: writers, truncates, opens and eviction wait (wait_in_steps).
  bool in_steps = false;
  std::optional<DirHeader> dir;  // cached directory header
  // Whether its attributes hold security.capability, once known (store_xattrs keeps it): a
  // write looks for the attribute to remove (kill_privs.cpp) without reading them each time.
  std::optional<bool> has_fcaps;
  // The checksum field of its table slot as this program last read or wrote it: a commit
  // checks that the slot still holds it (InodeTable::check_slots). None: never stored yet.
  std::optional<uint32_t> slot_checksum;

  bool is_dir() const { return (disk.mode & S_IFMT) == S_IFDIR; }
  bool is_reg() const { return (disk.mode & S_IFMT) == S_IFREG; }
  bool is_symlink() const { return (disk.mode & S_IFMT) == S_IFLNK; }
};

// Now, on the monotonic clock, in nanoseconds.
uint64_t monotonic_ns();

}  // namespace stripefs::fs
