// The check's state, shared by its passes (check.hpp says what each pass does):
// checker.cpp (blocks, pass 0, the run), check_inodes.cpp (pass 1),
// check_directories.cpp (passes 2 and 3), check_space.cpp (passes 4 and 5).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fs/check/check.hpp"
#include "fs/core/format.hpp"
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
    uint32_t names = 0;    // directory entries naming it (pass 2)
    uint32_t subdirs = 0;  // a directory's entries that are directories (pass 2)
    bool reached = false;  // from the root (pass 3)
  };
  using Runs = std::vector<std::pair<uint64_t, uint64_t>>;  // volume blocks: first, count

  // ---- blocks (checker.cpp) ----
  AlignedBuffer fresh_block() const { return AlignedBuffer(kBlockSize); }
  static Image image(const AlignedBuffer& b) { return Image(b.data(), kBlockSize); }
  // Volume block `b` as the filesystem sees it: a journal image not yet home (read-only
  // check), else the volume's.
  Result<void> read(uint64_t b, AlignedBuffer& out);
  // Reads a metadata block and checks it; one that fails is looked for in redundancy (and,
  // repairing, rewritten there). Fails when no copy passes, with `verify`'s error.
  Result<void> read_verified(uint64_t b, AlignedBuffer& out, const std::string& what,
                             const Verify& verify);
  Result<void> write(uint64_t b, std::span<const std::byte> image);  // repair only
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

  // ---- passes 2 and 3 (check_directories.cpp) ----
  Result<void> check_directories();
  Result<void> check_directory(uint64_t dir);
  // An inode a name leads to but the inode bitmap marks free: checked as pass 1 would, and
  // in use from now on if its slot holds one. Whether it is.
  Result<bool> adopt(uint64_t ino);
  Result<void> check_connectivity();
  // Gives `ino`, which no name from the root reaches, the name "#ino" in /lost+found (or
  // the root, when there is none), as e2fsck does.
  Result<void> reconnect(uint64_t ino);
  // Adds an entry to directory `dir`, in its bucket's chain where a block has room. False
  // when none has (the entry is not added).
  Result<bool> add_entry(uint64_t dir, const std::string& name, uint64_t ino, uint8_t type);
  // The volume block of `ino`'s file block (0: not mapped).
  uint64_t map_block(uint64_t ino, uint64_t file_block) const;
  // Marks what `dir` reaches, through children_ (sorted).
  void reach(uint64_t dir);

  // ---- passes 4 and 5 (check_space.cpp) ----
  Result<void> check_space();
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
  std::vector<InodeInfo> inodes_;                        // by inode number; mode 0: not in use
  std::map<uint64_t, std::vector<Extent>> extents_;      // by inode: every file's extents
  std::map<uint64_t, Runs> meta_runs_;                   // by inode: extent-tree and xattr blocks
  std::vector<std::pair<uint64_t, uint64_t>> children_;  // (directory, what it names)
  std::vector<uint64_t> adopted_dirs_;  // directories adopt() took in, still to check
  uint64_t lost_found_ = 0;             // the root's "lost+found", when a directory
  std::vector<uint64_t> incomplete_;    // directories not read whole (pass 2)
  bool past_eof_ = false;               // written extents past a file's size (pass 1)
};

}  // namespace stripefs::fs
