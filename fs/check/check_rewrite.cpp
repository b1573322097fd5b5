// What the repairs that move blocks share: space no inode holds, an inode's extents written
// again (inline or a fresh tree), a directory laid out again, the checksum table's entries.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "fs/check/checker.hpp"
#include "fs/core/directory_index.hpp"
#include "raid/ondisk.hpp"

namespace stripefs::fs {

namespace {

// Entries per bucket a directory is laid out with: half of what makes the daemon split.
constexpr uint64_t kEntriesPerBucket = 32;

}  // namespace

void Checker::hold(uint64_t ino) {
  if (taken_.empty()) return;  // allocate() reads every claim when it starts
  const auto mark = [&](uint64_t first, uint64_t count) {
    for (uint64_t b = first; b < first + count && b < taken_.size(); ++b) taken_[b] = true;
  };
  if (auto it = extents_.find(ino); it != extents_.end()) {
    for (const Extent& e : it->second) mark(e.physical, e.length);
  }
  for (const auto* runs : {&tree_runs_, &meta_runs_}) {
    if (auto it = runs->find(ino); it != runs->end()) {
      for (const auto& [first, count] : it->second) mark(first, count);
    }
  }
}

Result<Checker::Runs> Checker::allocate(uint64_t count) {
  if (taken_.empty()) {
    taken_.assign(sb_.total_blocks, false);
    std::fill(taken_.begin(), taken_.begin() + static_cast<std::ptrdiff_t>(sb_.data_start), true);
    for (const auto& [ino, extents] : extents_) hold(ino);
    for (const auto& [ino, runs] : tree_runs_) hold(ino);
    for (const auto& [ino, runs] : meta_runs_) hold(ino);
    next_free_ = sb_.data_start;
  }
  Runs runs;
  uint64_t got = 0;
  // First the blocks the bitmap marks free; then those it marks in use that nothing holds
  // (a cleared inode's): a damaged bitmap must not stop a repair the space is there for.
  for (const bool bitmap_free_only : {true, false}) {
    for (uint64_t n = 0, b = next_free_; n < sb_.total_blocks - sb_.data_start && got < count;
         ++n, b = b + 1 == sb_.total_blocks ? sb_.data_start : b + 1) {
      if (taken_[b] || (bitmap_free_only && block_bits_[b])) continue;
      taken_[b] = true;
      ++got;
      if (!runs.empty() && runs.back().first + runs.back().second == b) {
        ++runs.back().second;
      } else {
        runs.emplace_back(b, 1);
      }
      next_free_ = b + 1 == sb_.total_blocks ? sb_.data_start : b + 1;
    }
  }
  if (got < count) return fail(ENOSPC, "no space for {} more blocks", count - got);
  return runs;
}

Result<void> Checker::set_extents(uint64_t ino, std::vector<Extent> extents,
                                  const std::function<void(DiskInode&)>& change) {
  AlignedBuffer slot = fresh_block();
  if (auto r = load_table_block(table_block(ino), slot, false); !r) return r;
  auto disk =
      decode_inode(std::span<const std::byte>(slot.data() + slot_offset(ino), kInodeSize), ino);
  if (!disk) return fail(disk.error());
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.logical < b.logical; });
  disk->inline_extents.clear();
  disk->tree_depth = 0;
  disk->tree_root = 0;
  Runs tree;
  if (extents.size() <= kInlineExtents) {
    disk->inline_extents = extents;
  } else {
    // The daemon's shape (file_extents.cpp): full leaves, then index levels over them.
    uint64_t blocks = 0;
    for (uint64_t n = (extents.size() + kLeafExtents - 1) / kLeafExtents;;
         n = (n + kIndexEntries - 1) / kIndexEntries) {
      blocks += n;
      if (n == 1) break;
    }
    auto space = allocate(blocks);
    if (!space) return fail(space.error());
    std::vector<uint64_t> free;
    for (const auto& [first, count] : *space) {
      for (uint64_t b = first; b < first + count; ++b) free.push_back(b);
    }
    tree = *space;
    std::reverse(free.begin(), free.end());
    AlignedBuffer node = fresh_block();
    const auto out = std::span<std::byte, kBlockSize>(node.data(), kBlockSize);
    std::vector<IndexEntry> level;
    for (size_t i = 0; i < extents.size(); i += kLeafExtents) {
      const uint64_t self = free.back();
      free.pop_back();
      encode_extent_leaf(std::span(extents).subspan(i, std::min(kLeafExtents, extents.size() - i)),
                         self, out);
      if (auto r = write(self, node.span().first(kBlockSize)); !r) return r;
      level.push_back({extents[i].logical, self});
    }
    uint32_t depth = 1;
    for (; level.size() > 1; ++depth) {
      std::vector<IndexEntry> up;
      for (size_t i = 0; i < level.size(); i += kIndexEntries) {
        const uint64_t self = free.back();
        free.pop_back();
        encode_extent_index(std::span(level).subspan(i, std::min(kIndexEntries, level.size() - i)),
                            depth, self, out);
        if (auto r = write(self, node.span().first(kBlockSize)); !r) return r;
        up.push_back({level[i].first_logical, self});
      }
      level = std::move(up);
    }
    disk->tree_depth = depth;
    disk->tree_root = level.front().block;
  }
  uint64_t held = 0;
  for (const Extent& e : extents) held += e.length;
  for (const auto& [first, count] : tree) held += count;
  if (auto it = meta_runs_.find(ino); it != meta_runs_.end()) {
    for (const auto& [first, count] : it->second) held += count;
  }
  disk->blocks = held;
  if (change) change(*disk);
  if (auto r = rewrite_inode(ino, *disk); !r) return r;
  extents_[ino] = std::move(extents);
  if (tree.empty()) {
    tree_runs_.erase(ino);
  } else {
    tree_runs_[ino] = std::move(tree);
  }
  return {};
}

Result<void> Checker::write_directory(uint64_t dir, std::vector<DirEntry> entries) {
  DirHeader header;
  while ((uint64_t{1} << header.level) * kEntriesPerBucket < entries.size()) ++header.level;
  std::vector<std::vector<DirBucket>> chains(header.buckets(), std::vector<DirBucket>(1));
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  for (DirEntry& e : entries) {
    e.key = DirectoryIndex::name_key(e.name, sb_.hash_seed);
    std::vector<DirBucket>& chain = chains[bucket_of(header, e.key)];
    if (chain.back().bytes() + DirBucket::entry_bytes(e.name.size()) > kBucketCapacity) {
      chain.emplace_back();
    }
    chain.back().entries.push_back(std::move(e));
  }
  header.entries = entries.size();
  // File blocks: the header, each bucket's first block, then overflow blocks in turn.
  std::vector<std::pair<uint64_t, const DirBucket*>> layout;  // (file block, contents)
  layout.emplace_back(0, nullptr);
  for (uint64_t b = 0; b < chains.size(); ++b) {
    for (size_t i = 0; i < chains[b].size(); ++i) {
      DirBucket& bucket = chains[b][i];
      const uint64_t file_block = i == 0 ? 1 + b : header.next_overflow++;
      layout.emplace_back(file_block, &bucket);
      if (i + 1 < chains[b].size()) bucket.overflow = header.next_overflow;
    }
  }
  // Where the directory has a file block mapped, it stays where it is.
  std::vector<uint64_t> volume_blocks(layout.size(), 0);
  uint64_t missing = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    volume_blocks[i] = map_block(dir, layout[i].first);
    missing += volume_blocks[i] == 0 ? 1 : 0;
  }
  if (missing > 0) {
    auto space = allocate(missing);
    if (!space) return fail(space.error().code, "directory {}: {}", dir, space.error().message);
    std::vector<uint64_t> fresh;
    for (const auto& [first, count] : *space) {
      for (uint64_t b = first; b < first + count; ++b) fresh.push_back(b);
    }
    std::reverse(fresh.begin(), fresh.end());
    for (uint64_t& vb : volume_blocks) {
      if (vb != 0) continue;
      vb = fresh.back();
      fresh.pop_back();
    }
  }
  AlignedBuffer block = fresh_block();
  const auto out = std::span<std::byte, kBlockSize>(block.data(), kBlockSize);
  std::vector<Extent> extents;
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].second == nullptr) {
      encode_dir_header(header, volume_blocks[i], out);
    } else {
      encode_dir_bucket(*layout[i].second, volume_blocks[i], out);
    }
    if (auto r = write(volume_blocks[i], block.span().first(kBlockSize)); !r) return r;
    Extent* last = extents.empty() ? nullptr : &extents.back();
    if (last != nullptr && last->logical_end() == layout[i].first &&
        last->physical + last->length == volume_blocks[i] && last->length < kMaxExtentLength) {
      ++last->length;
    } else {
      extents.push_back({layout[i].first, volume_blocks[i], 1, false});
    }
  }
  const uint64_t size = (1 + header.buckets()) * kBlockSize;
  return set_extents(dir, std::move(extents), [size](DiskInode& d) { d.size = size; });
}

Result<std::pair<uint64_t, size_t>> Checker::load_checksum_slot(uint64_t b, AlignedBuffer& table) {
  const uint64_t index = b - sb_.data_start;
  const uint64_t self = sb_.checksum_start + index / kChecksumsPerBlock;
  if (auto r =
          read_verified(self, table, fmt::format("checksum table block {}", self),
                        [self](Image i) { return verify_block(i, BlockKind::checksums, self); });
      !r) {
    return fail(r.error());
  }
  return std::pair{self, kHeaderSize + (index % kChecksumsPerBlock) * 4};
}

Result<uint32_t> Checker::get_checksum(uint64_t b) {
  AlignedBuffer table = fresh_block();
  auto slot = load_checksum_slot(b, table);
  if (!slot) return fail(slot.error());
  return ondisk::get_le<uint32_t>(std::span<const std::byte>(table.data(), kBlockSize),
                                  slot->second);
}

Result<void> Checker::set_checksum(uint64_t b, uint32_t crc) {
  AlignedBuffer table = fresh_block();
  auto slot = load_checksum_slot(b, table);
  if (!slot) return fail(slot.error());
  ondisk::put_le<uint32_t>(std::span<std::byte>(table.data(), kBlockSize), slot->second, crc);
  seal_block(std::span<std::byte, kBlockSize>(table.data(), kBlockSize), BlockKind::checksums,
             slot->first);
  return write(slot->first, table.span().first(kBlockSize));
}

}  // namespace stripefs::fs
