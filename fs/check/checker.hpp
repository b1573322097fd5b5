// The check's state, shared by its passes (check.hpp says what each pass does):
// checker.cpp (blocks, pass 0, the run), check_inodes.cpp (pass 1),
// check_shared.cpp (pass 1b: blocks claimed twice), check_directories.cpp (pass 2),
// check_connectivity.cpp (pass 3),
// check_space.cpp (passes 4 and 5), and check_rewrite.cpp (what the repairs that move
// blocks share: space, extents, a directory laid out again).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fs/check/check.hpp"
#include "fs/core/format.hpp"
#include "fs/core/xattr_format.hpp"
#include "raid/aligned_buffer.hpp"

namespace stripefs::fs {

class Checker {
 public:
  Checker(Volume& volume, const CheckOptions& options);
  Result<CheckReport> run();

 private:
  using Image = std::span<const std::byte, kBlockSize>;
  using Verify = std::function<Result<void>(Image)>;
  // What pass 1 learned of an inode in use.
  struct InodeInfo {
    uint32_t mode = 0;
    uint32_t nlink = 0;
    uint64_t parent = 0;
    uint32_t names = 0;     // directory entries naming it (pass 2)
    uint32_t subdirs = 0;   // a directory's entries that are directories (pass 2)
    bool reached = false;   // from the root (pass 3)
    bool past_eof = false;  // written blocks past its size: the orphan list must name it
    uint64_t size = 0;
  };
  using Runs = std::vector<std::pair<uint64_t, uint64_t>>;  // volume blocks: first, count

  // ---- blocks (checker.cpp) ----
  AlignedBuffer fresh_block() const { return AlignedBuffer(kBlockSize); }
  static Image image(const AlignedBuffer& b) { return Image(b.data(), kBlockSize); }
  // Volume block `b` as the filesystem sees it: a journal image not yet home (read-only
  // check), else the volume's.
  Result<void> read(uint64_t b, AlignedBuffer& out);
  // Blocks [first, first + count) the same way, in one volume read (the file data pass:
  // a request per block made it ~100 MiB/s on loop devices). `out` holds count blocks.
  Result<void> read_run(uint64_t first, uint64_t count, std::span<std::byte> out);
  // Reads a metadata block and checks it; one that fails is looked for in redundancy (and,
  // repairing, rewritten there). Fails when no copy passes, with `verify`'s error.
  Result<void> read_verified(uint64_t b, AlignedBuffer& out, const std::string& what,
                             const Verify& verify);
  Result<void> write(uint64_t b, std::span<const std::byte> image);  // repair only
  // Inode `ino`'s xattrs (xattr_block, in either form), each block read_verified.
  Result<std::vector<Xattr>> read_xattrs(uint64_t ino, const DiskInode& disk);
  void found(std::string what, bool fixed, bool safe = true);
  bool in_data_area(uint64_t first, uint64_t count) const {
    return first >= sb_.data_start && first <= sb_.total_blocks &&
           count <= sb_.total_blocks - first;
  }
  void progress(const std::string& pass, uint64_t done, uint64_t total) const {
    if (options_.progress) options_.progress(pass, done, total);
  }

  // ---- pass 0 (checker.cpp) ----
  Result<void> read_superblock();
  Result<void> replay_journal();
  Result<std::vector<bool>> read_bitmap(uint64_t start, uint64_t blocks, uint64_t count,
                                        const char* what, std::vector<uint64_t>& damaged);

  // ---- pass 1 (check_inodes.cpp) ----
  Result<void> check_inodes();
  // One inode in use at `slot` of table block `table` (its image in `block`).
  Result<void> check_inode(uint64_t ino, AlignedBuffer& block, uint64_t table);
  Result<void> read_extent_tree(uint64_t ino, uint64_t block, uint32_t levels,
                                std::vector<Extent>& out, Runs& tree_blocks);
  // The trees pass 1 found bad extents in, written again without them (repair only).
  Result<void> rewrite_trees();
  // Clears inode `ino`'s slot (its generation kept) when repairing; it no longer counts as
  // in use either way.
  Result<void> clear_inode(uint64_t ino);
  // Rewrites inode `ino` in its table block, the rest of the block as load_table_block
  // makes it.
  Result<void> rewrite_inode(uint64_t ino, const DiskInode& disk);
  // Table block `table` with every inode in use in it as right as redundancy has it: an
  // inode that does not decode is taken, slot by slot, from a copy (or a rebuild) where it
  // does. With `report`, each is a finding and, repairing, the block is written back whole.
  Result<void> load_table_block(uint64_t table, AlignedBuffer& out, bool report);
  uint64_t table_block(uint64_t ino) const {
    return sb_.inode_table_start + (ino - 1) / kInodesPerBlock;
  }
  static size_t slot_offset(uint64_t ino) { return ((ino - 1) % kInodesPerBlock) * kInodeSize; }
  // The bucket a key belongs in (linear hashing: directory_index.cpp).
  static uint64_t bucket_of(const DirHeader& h, uint64_t key) {
    const uint64_t b = key & ((uint64_t{1} << h.level) - 1);
    return b < h.split ? key & ((uint64_t{1} << (h.level + 1)) - 1) : b;
  }

  // ---- pass 1b (check_shared.cpp) ----
  // Blocks two inodes (or one, twice) claim: reported; repairing, every claimant after the
  // first gets copies of its own, as e2fsck's passes 1b-1d clone them.
  Result<void> check_shared_blocks(bool again = false);  // again: after pass 2, unannounced
  Result<void> give_copies(uint64_t ino, const std::vector<uint64_t>& shared);
  // Volume block `from`'s contents written at `to`: a directory's blocks, sealed with the
  // block they live in, are sealed again; a file's data carries its checksum along.
  Result<void> copy_block(uint64_t ino, uint64_t file_block, uint64_t from, uint64_t to);

  // ---- repairs that move blocks (check_rewrite.cpp) ----
  // `count` blocks no inode holds, the bitmap's free ones first; never handed out twice
  // in one run. ENOSPC when there are not that many.
  Result<Runs> allocate(uint64_t count);
  // Marks `ino`'s blocks as held for allocate (an inode taken in after it started).
  void hold(uint64_t ino);
  // Rewrites inode `ino`'s extents as `extents` (sorted, not overlapping): inline, or in a
  // fresh tree; the old tree's blocks are let go, the block count follows. `change` may
  // change the inode (its size) before it is written.
  Result<void> set_extents(uint64_t ino, std::vector<Extent> extents,
                           const std::function<void(DiskInode&)>& change = {});
  // Lays directory `dir` out again holding `entries` (names checked, keys recomputed): a
  // header and as many buckets as keep them about half full, in the blocks it has where
  // they are mapped and in new ones where not.
  Result<void> write_directory(uint64_t dir, std::vector<DirEntry> entries);
  // Sets volume block `b`'s entry in the checksum table.
  Result<void> set_checksum(uint64_t b, uint32_t crc);
  Result<uint32_t> get_checksum(uint64_t b);
  // Reads (verified) the checksum table block holding volume block `b`'s entry into
  // `table`: that block's number and the entry's byte offset in it.
  Result<std::pair<uint64_t, size_t>> load_checksum_slot(uint64_t b, AlignedBuffer& table);

  // ---- pass 2 (check_directories.cpp), pass 3 (check_connectivity.cpp) ----
  Result<void> check_directories();
  Result<void> check_directory(uint64_t dir);
  // Directory `ino` is named in `dir`: its parent field says so (a finding when it did not).
  Result<void> set_parent(uint64_t ino, uint64_t dir);
  // An inode a name leads to but the inode bitmap marks free: checked as pass 1 would, and
  // in use from now on if its slot holds one. Whether it is.
  Result<bool> adopt(uint64_t ino);
  Result<void> check_connectivity();
  // Gives `ino`, which no name from the root reaches, the name "#ino" in /lost+found (or
  // the root, when there is none), as e2fsck does.
  Result<void> reconnect(uint64_t ino);
  // Directory `dir`, named only inside directories the root does not reach (a loop):
  // those names removed, reconnected.
  Result<void> break_loop(uint64_t dir);
  // Adds an entry to directory `dir`, in its bucket's chain where a block has room, else
  // laying the directory out again with it. False when it cannot be read (not added).
  Result<bool> add_entry(uint64_t dir, const std::string& name, uint64_t ino, uint8_t type);
  // Every entry of directory `dir` (its chains whole). False when it cannot be read.
  Result<bool> read_entries(uint64_t dir, std::vector<DirEntry>& out);
  // Removes `dir`'s entries naming `ino`; how many.
  Result<uint64_t> remove_entries(uint64_t dir, uint64_t ino);
  // Makes /lost+found (repair only): the root gets a directory to reconnect into. Fails
  // (nothing left behind) when it cannot: no free inode or space, the root unreadable, the
  // name taken.
  Result<void> make_lost_found();
  // The volume block of `ino`'s file block (0: not mapped).
  uint64_t map_block(uint64_t ino, uint64_t file_block) const;
  // Marks what `dir` reaches, through children_ (sorted).
  void reach(uint64_t dir);

  // ---- passes 4 and 5 (check_space.cpp) ----
  Result<void> check_space();
  // Written blocks past a file's size that the orphan list does not name (the mount after
  // a crash would never free them): reported, and freed as that mount would.
  Result<void> free_unlisted_past_eof();
  Result<void> rewrite_bitmap(uint64_t start, uint64_t blocks, uint64_t count,
                              const std::vector<bool>& bits);
  Result<void> check_checksums();

  Volume& volume_;
  const CheckOptions options_;
  CheckReport report_;
  FsSuperblock sb_;
  std::unordered_map<uint64_t, std::vector<std::byte>> journal_images_;  // read-only check
  std::vector<bool> inode_bits_, block_bits_;                            // the bitmaps as found
  std::vector<uint64_t> damaged_bitmap_blocks_;
  std::vector<bool> orphan_bits_;  // the orphan list as found (empty: the filesystem has none)
  std::vector<uint64_t> damaged_orphan_blocks_;
  std::vector<InodeInfo> inodes_;                    // by inode number; mode 0: not in use
  std::map<uint64_t, std::vector<Extent>> extents_;  // by inode: every file's extents
  std::map<uint64_t, Runs> tree_runs_;               // by inode: extent-tree blocks
  std::map<uint64_t, Runs> meta_runs_;  // by inode: xattr blocks, and bad extents' left in place
  std::vector<uint64_t> retree_;        // inodes whose trees lose bad extents (repair)
  std::vector<bool> taken_;             // blocks allocate() may not hand out (empty: not yet)
  uint64_t next_free_ = 0;              // where allocate() looks first
  std::vector<std::pair<uint64_t, uint64_t>> children_;  // (directory, what it names)
  std::vector<uint64_t> adopted_dirs_;        // directories adopt() took in, still to check
  uint64_t lost_found_ = 0;                   // the root's "lost+found", when a directory
  bool lost_found_taken_ = false;             // the root names something else "lost+found"
  std::unordered_set<uint64_t> shared_seen_;  // blocks pass 1b found claimed twice
  std::vector<uint64_t> incomplete_;          // directories not read whole (pass 2)
};

}  // namespace stripefs::fs
