// A directory's names: linear hashing over the directory's own blocks (the block formats are
// in format.hpp). Names hash (seeded FNV-1a, then splitmix64's finalizer) to 62-bit keys
// whose low bits pick the bucket; file block 0 is the header, file block 1 + b holds bucket
// b, and full buckets chain overflow blocks (freed ones go on a free list). The next bucket
// in turn splits while there are more than 64 entries per bucket, before an insert, with
// every block it needs allocated before any is written. A lookup reads one bucket (rarely
// more: an overflow chain), so no operation touches more than a few blocks, however large
// the directory. Listing walks keys bit-reversed: each bucket is one contiguous range of
// positions that a split only halves, so cookies survive splits.
//
// Not thread-safe: used under the filesystem lock, for one operation at a time. Blocks are
// read and changed through the MetaStore, in its running transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "fs/core/format.hpp"
#include "fs/core/meta_store.hpp"

namespace stripefs::fs {

class DirectoryIndex {
 public:
  // The volume block of one of the directory's file blocks: `map` gives 0 when none is
  // mapped; `ensure` maps one, allocating it.
  using MapBlock = std::function<Result<uint64_t>(uint64_t file_block)>;
  struct Blocks {
    MapBlock map;
    MapBlock ensure;
  };
  // Calls `add(name, ino, type, next_cookie)` per entry until it returns false.
  using Filler =
      std::function<bool(std::string_view name, uint64_t ino, uint8_t type, uint64_t next)>;

  // The index of directory `ino` over `blocks`. `header` caches its header between
  // operations (the inode keeps it); `size` is the directory's size in bytes, which grows
  // with its buckets. All four must outlive the index.
  DirectoryIndex(MetaStore& meta, Blocks blocks, uint64_t hash_seed, uint64_t ino,
                 std::optional<DirHeader>& header, uint64_t& size)
      : meta_(meta),
        blocks_(std::move(blocks)),
        seed_(hash_seed),
        ino_(ino),
        header_(header),
        size_(size) {}

  static uint64_t name_key(std::string_view name, uint64_t hash_seed);

  // A new, empty directory: its header and first bucket.
  Result<void> init();
  Result<std::optional<DirEntry>> find(std::string_view name);
  // The name must not be there yet (find first).
  Result<void> add(std::string_view name, uint64_t ino, uint8_t type);
  Result<void> remove(std::string_view name);  // ENOENT when absent
  // Points an existing entry at another inode (rename over an existing name).
  Result<void> set(std::string_view name, uint64_t ino, uint8_t type);
  Result<bool> empty();
  // The entries from `cookie` on. Cookies: 0 start, 1 after ".", 2 after ".." (the caller
  // lists those two), then entry positions + 3.
  Result<void> list(uint64_t cookie, const Filler& add);
  Result<DirHeader> read_header();

 private:
  Result<void> split(DirHeader& header);

  MetaStore& meta_;
  Blocks blocks_;
  uint64_t seed_;
  uint64_t ino_;
  std::optional<DirHeader>& header_;
  uint64_t& size_;
};

}  // namespace stripefs::fs
