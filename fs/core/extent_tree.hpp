// A file's extent tree on disk, as the core keeps track of it between commits: its leaves in
// order (each one's block, the first file block it holds and a fingerprint of its extents)
// and its index blocks.
//
// store() writes only what changed since the tree was last read or stored: a leaf whose
// extents are the same is left alone, a changed one is rewritten in place (the metadata
// journal makes the commit atomic, so no copy is needed), one that outgrew its block is
// split, one left empty is freed, and the index (a block per 254 leaves) is rewritten only
// when the leaves or their first blocks changed. (Measured: fsyncs after 4 KiB writes into
// a 512 MiB file rewritten at random journaled 6 blocks a commit, where rewriting the whole
// tree journaled 364.) Extents belong to the leaf whose range holds their first block:
// leaf i holds [first of leaf i, first of leaf i + 1), the first leaf everything before.
// When the leaves get sparse (twice as many as a packed tree needs) the tree is built again,
// packed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "fs/core/format.hpp"
#include "raid/result.hpp"

namespace stripefs::fs {

class ExtentTree {
 public:
  // What store() needs of the filesystem: a new block for the tree (counted as the file's),
  // a block given back, and the image of a block to write in full (zeroed, in the running
  // transaction).
  struct Blocks {
    std::function<Result<uint64_t>()> allocate;
    std::function<void(uint64_t)> release;
    std::function<std::span<std::byte, kBlockSize>(uint64_t)> image;
  };
  struct Root {
    uint32_t depth;  // 1: the root is the only leaf
    uint64_t block;
  };
  // What a store() wrote, for tests and statistics.
  struct Written {
    uint64_t leaves = 0;        // leaf blocks written (rewritten, split or new)
    uint64_t index_blocks = 0;  // index blocks written
    bool rebuilt = false;       // the whole tree, packed
  };

  // Loading a tree read from disk: its root, each leaf in order with what it holds (at
  // least one extent, after the leaf before: as the decoder and load_extents check), and
  // each index block (any order).
  void set_root(Root root) { root_ = root; }
  void add_leaf(uint64_t block, std::span<const Extent> extents);
  void add_index(uint64_t block) { index_.push_back(block); }

  // The extents to store that start in file blocks [from, to), in order.
  using Lister = std::function<std::vector<Extent>(uint64_t from, uint64_t to)>;
  // Sorted, disjoint ranges of file blocks.
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  // A store worked out, nothing written yet.
  struct Plan {
    struct Share {
      size_t leaf;
      size_t begin, end;  // its extents, in `listed`
    };
    Lister list;
    std::vector<Extent> listed;  // what was listed, in order
    std::vector<Share> shares;   // the leaves listed again, in order
    bool listed_all = false;     // `listed` is every extent
    uint64_t extents = 0;        // how many the store holds
  };
  // Plans a store of the extents `list` gives (sorted by file block, not overlapping). Only
  // those starting in `changed` may differ from what the tree holds (nullopt: any may), so
  // only the leaves whose ranges meet them are listed. (Measured: 4 KiB writes with an fsync
  // after each into a fragmented 512 MiB file, 446-498 IOPS listing every extent at each
  // commit, 2,418-2,515 listing the changed leaves.)
  Plan plan(Lister list, const std::optional<Ranges>& changed) const;
  // Writes what `plan` changed (it holds more than fit in the inode): returns the new root.
  // EINVAL, with nothing written, for a plan of no extents. On an error (no space for a
  // block) part of it may be written: the caller fails the transaction, and the tree
  // forgets its blocks.
  Result<Root> store(Plan plan, const Blocks& blocks, Written* written = nullptr);
  // plan() and store() of all of `extents`.
  Result<Root> store(std::span<const Extent> extents, const Blocks& blocks,
                     Written* written = nullptr);
  // Gives back every block (the file's extents moved into its inode, or the file is gone).
  void release_all(const std::function<void(uint64_t)>& release);

  bool empty() const { return leaves_.empty() && index_.empty(); }
  size_t leaf_count() const { return leaves_.size(); }
  // Every block of the tree: leaves, then index blocks.
  std::vector<uint64_t> blocks() const;

 private:
  struct Fingerprint {
    uint64_t a = 0, b = 0;
    bool operator==(const Fingerprint&) const = default;
  };
  struct Leaf {
    uint64_t block;
    uint64_t first;  // the first file block it holds
    uint64_t count;  // extents it holds
    Fingerprint print;
  };
  static Fingerprint fingerprint(std::span<const Extent> extents);
  // The file blocks whose extents leaf `i` holds.
  std::pair<uint64_t, uint64_t> range_of(size_t i) const;
  Result<Root> store_changes(Plan& plan, const Blocks& blocks, Written& written);
  void write_leaf(Leaf& leaf, std::span<const Extent> extents, const Blocks& blocks);
  // Packs `extents` into full leaves, in the old leaves' blocks as far as they go (the rest
  // allocated, or given back).
  Result<void> rebuild(std::span<const Extent> extents, const Blocks& blocks, Written& written);
  // Writes the index over the leaves, reusing the index blocks it had.
  Result<Root> write_index(const Blocks& blocks, Written& written);

  std::vector<Leaf> leaves_;
  std::vector<uint64_t> index_;
  Root root_{0, 0};  // block 0: not known (nothing stored or loaded yet)
};

}  // namespace stripefs::fs
