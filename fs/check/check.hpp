// fsck.stripefs's engine: an offline check of a stripefs filesystem on a Volume, and, when
// asked, the repair of what can be put right, in e2fsck's passes:
//   0. the superblock, and the metadata journal (replayed; a read-only check reads through
//      the images it holds instead of writing them home);
//   1. every inode in use: its checksum, its extents (inline or tree: in the data area,
//      ordered, not overlapping), xattr and symlink blocks, its block count;
//  1b. blocks claimed twice: each later claimant gets copies of its own;
//   2. every directory: header, buckets and overflow chains, each entry's name, key, bucket,
//      target and type, the entry count, each subdirectory's parent; a directory whose
//      shape is damaged is laid out again from the entries that can be read;
//   3. connectivity and link counts: inodes no name reaches (orphans: unlinked while open
//      when the daemon stopped; the rest go to /lost+found), directory loops, nlink against
//      the names found;
//   4. the block and inode bitmaps and the orphan list against what the inodes hold;
//   5. the checksum table, and with `data` every block of file data against its checksum.
// A metadata block that fails its checks is looked for in the array's redundancy first
// (Volume::recover_block): damage on one member is only that member's, and a repair
// rewrites it. The volume must not be in use by anything else.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "raid/result.hpp"
#include "raid/volume.hpp"

namespace stripefs::fs {

struct CheckOptions {
  bool repair = false;  // put right what can be (else nothing is written)
  bool force = false;   // check a filesystem that was cleanly unmounted too
  bool data = false;    // read every block of file data and check it against its checksum
  // At the start of each pass (done 0) and now and then within it: the pass's title, and
  // how far it got (done of total, in the pass's own units).
  std::function<void(const std::string& pass, uint64_t done, uint64_t total)> progress;
};

// One problem found: a line naming the object and what is wrong with it, whether the repair
// put it right, and whether a preen may.
struct Finding {
  std::string what;
  bool fixed = false;
  // Its repair loses nothing a user could miss (a count, a bitmap, a copy taken from
  // redundancy), so preening (-p) may make it; the others (clearing an inode, removing a
  // name) wait for -y.
  bool safe = true;
};

struct CheckReport {
  std::vector<Finding> findings;
  bool checked = false;         // false: clean and not forced, so only counted
  bool was_clean = false;       // the superblock said it was cleanly unmounted
  uint64_t journal_blocks = 0;  // block images the journal held (replayed with repair)
  uint64_t inodes = 0, inodes_used = 0, blocks = 0, blocks_used = 0;
  uint64_t files = 0, directories = 0, symlinks = 0, others = 0;
  uint64_t data_blocks_checked = 0;
  uint64_t fixed() const;
  uint64_t unfixed() const;
  // e2fsck's: 0 nothing wrong, 1 everything found was put right, 4 something left.
  int exit_code() const;
};

// Runs the check. Fails (an operational error, e2fsck's 8) only when it cannot run at all:
// the superblock unreadable, an I/O error.
Result<CheckReport> check_filesystem(Volume& volume, const CheckOptions& options);

}  // namespace stripefs::fs
