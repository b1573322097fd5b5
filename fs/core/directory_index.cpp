#include "fs/core/directory_index.hpp"

#include <dirent.h>

#include <algorithm>

#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

namespace {

constexpr uint64_t kKeyMask = (uint64_t{1} << kKeyBits) - 1;
constexpr uint64_t kSplitLoad = 64;  // entries per bucket before the next split

uint64_t reverse_bits(uint64_t value, unsigned bits) {
  uint64_t out = 0;
  for (unsigned i = 0; i < bits; ++i) {
    out = (out << 1) | (value & 1);
    value >>= 1;
  }
  return out;
}

// Bucket of `key` and how many low key bits choose it.
std::pair<uint64_t, unsigned> bucket_of(const DirHeader& h, uint64_t key) {
  uint64_t b = key & ((uint64_t{1} << h.level) - 1);
  if (b < h.split) return {key & ((uint64_t{1} << (h.level + 1)) - 1), h.level + 1};
  return {b, h.level};
}

}  // namespace

uint64_t DirectoryIndex::name_key(std::string_view name, uint64_t hash_seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ hash_seed;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;  // splitmix64's finalizer spreads FNV's weak low bits
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h & kKeyMask;
}

Result<DirHeader> DirectoryIndex::read_header() {
  if (header_) return *header_;
  auto block = blocks_.map(0);
  if (!block) return fail(block.error());
  if (*block == 0) return fail(EIO, "directory {}: no header block", ino_);
  auto header =
      meta_.read_as(*block, [self = *block](std::span<const std::byte, kBlockSize> image) {
        return decode_dir_header(image, self);
      });
  if (!header) {
    fs_log().error("directory {}: {}", ino_, header.error().message);
    return fail(EIO, "directory {}: {}", ino_, header.error().message);
  }
  header_ = *header;
  return *header;
}

namespace {
struct ChainBlock {
  uint64_t file_block;
  uint64_t volume_block;
  DirBucket bucket;
};

// Every block of bucket `b`'s chain, decoded.
Result<std::vector<ChainBlock>> read_chain(uint64_t b, const DirectoryIndex::MapBlock& map,
                                           MetaStore& meta, uint64_t ino) {
  std::vector<ChainBlock> chain;
  uint64_t file_block = 1 + b;
  while (file_block != 0) {
    if (chain.size() > 100000) return fail(EIO, "directory {}: bucket {}: chain loops", ino, b);
    auto block = map(file_block);
    if (!block) return fail(block.error());
    if (*block == 0) {
      return fail(EIO, "directory {}: bucket {}: file block {} is not mapped", ino, b, file_block);
    }
    auto bucket =
        meta.read_as(*block, [self = *block](std::span<const std::byte, kBlockSize> image) {
          return decode_dir_bucket(image, self);
        });
    if (!bucket) {
      fs_log().error("directory {}: {}", ino, bucket.error().message);
      return fail(EIO, "directory {}: {}", ino, bucket.error().message);
    }
    const uint64_t next = bucket->overflow;
    chain.push_back({file_block, *block, std::move(*bucket)});
    file_block = next;
  }
  return chain;
}

}  // namespace

Result<void> DirectoryIndex::init() {
  auto header_block = blocks_.ensure(0);
  if (!header_block) return fail(header_block.error());
  auto bucket_block = blocks_.ensure(1);
  if (!bucket_block) return fail(bucket_block.error());
  DirHeader header;
  encode_dir_header(header, *header_block, meta_.fresh(*header_block));
  encode_dir_bucket(DirBucket{}, *bucket_block, meta_.fresh(*bucket_block));
  header_ = header;
  size_ = 2 * kBlockSize;
  return {};
}

Result<std::optional<DirEntry>> DirectoryIndex::find(std::string_view name) {
  auto header = read_header();
  if (!header) return fail(header.error());
  const uint64_t key = name_key(name, seed_);
  uint64_t file_block = 1 + bucket_of(*header, key).first;
  for (int hops = 0; file_block != 0; ++hops) {
    if (hops > 100000) return fail(EIO, "directory {}: overflow chain loops", ino_);
    auto block = blocks_.map(file_block);
    if (!block) return fail(block.error());
    if (*block == 0) {
      return fail(EIO, "directory {}: file block {} is not mapped", ino_, file_block);
    }
    auto found =
        meta_.read_as(*block, [&, self = *block](std::span<const std::byte, kBlockSize> image) {
          return find_in_dir_bucket(image, self, key, name, &file_block);
        });
    if (!found) {
      fs_log().error("directory {}: {}", ino_, found.error().message);
      return fail(EIO, "directory {}: {}", ino_, found.error().message);
    }
    if (*found) return found;
  }
  return std::optional<DirEntry>();
}

namespace {
void write_header(MetaStore& meta, uint64_t block, const DirHeader& header) {
  encode_dir_header(header, block, meta.modify(block));
}
}  // namespace

Result<void> DirectoryIndex::add(std::string_view name, uint64_t ino, uint8_t type) {
  auto header = read_header();
  if (!header) return fail(header.error());
  auto header_block = blocks_.map(0);
  if (!header_block) return fail(header_block.error());
  // Split first, so the new entry goes straight to its final bucket; a split that fails
  // changes nothing a reader could see.
  if (header->entries + 1 > header->buckets() * kSplitLoad) {
    if (auto r = split(*header); !r) return r;
    write_header(meta_, *header_block, *header);
    header_ = *header;
  }
  DirEntry entry{name_key(name, seed_), ino, type, std::string(name)};
  const size_t need = DirBucket::entry_bytes(name.size());
  auto chain = read_chain(bucket_of(*header, entry.key).first, blocks_.map, meta_, ino_);
  if (!chain) return fail(chain.error());
  ChainBlock* room = nullptr;
  for (ChainBlock& c : *chain) {
    if (c.bucket.bytes() + need <= kBucketCapacity) {
      room = &c;
      break;
    }
  }
  if (room == nullptr) {
    // A new overflow block at the end of the chain: a released one, or the next unused
    // (allocated before anything changes).
    uint64_t file_block = header->free_overflow;
    uint64_t volume_block = 0;
    if (file_block != 0) {
      auto mapped = blocks_.map(file_block);
      if (!mapped) return fail(mapped.error());
      auto freed =
          meta_.read_as(*mapped, [self = *mapped](std::span<const std::byte, kBlockSize> image) {
            return decode_dir_bucket(image, self);
          });
      if (!freed) return fail(EIO, "directory {}: {}", ino_, freed.error().message);
      header->free_overflow = freed->overflow;
      volume_block = *mapped;
    } else {
      file_block = header->next_overflow;
      auto mapped = blocks_.ensure(file_block);
      if (!mapped) return fail(mapped.error());
      ++header->next_overflow;
      volume_block = *mapped;
      meta_.fresh(volume_block);
    }
    ChainBlock& last = chain->back();
    last.bucket.overflow = file_block;
    encode_dir_bucket(last.bucket, last.volume_block, meta_.modify(last.volume_block));
    chain->push_back({file_block, volume_block, DirBucket{}});
    room = &chain->back();
  }
  room->bucket.entries.push_back(std::move(entry));
  encode_dir_bucket(room->bucket, room->volume_block, meta_.modify(room->volume_block));
  ++header->entries;
  write_header(meta_, *header_block, *header);
  header_ = *header;
  return {};
}

// Splits bucket `split` into itself and `split + 2^level` (linear hashing). Every block it
// needs is allocated before any is written: on ENOSPC the directory is as it was (blocks
// allocated meanwhile stay mapped at the same file blocks, for the next attempt).
Result<void> DirectoryIndex::split(DirHeader& header) {
  const uint64_t from = header.split;
  const uint64_t to = from + (uint64_t{1} << header.level);
  const uint64_t mask = (uint64_t{1} << (header.level + 1)) - 1;
  auto chain = read_chain(from, blocks_.map, meta_, ino_);
  if (!chain) return fail(chain.error());
  std::vector<DirEntry> stay, move;
  for (ChainBlock& c : *chain) {
    for (DirEntry& e : c.bucket.entries) {
      ((e.key & mask) == from ? stay : move).push_back(std::move(e));
    }
  }
  auto packed = [](std::vector<DirEntry>& entries) {
    std::vector<DirBucket> buckets(1);
    for (DirEntry& e : entries) {
      if (buckets.back().bytes() + DirBucket::entry_bytes(e.name.size()) > kBucketCapacity) {
        buckets.emplace_back();
      }
      buckets.back().entries.push_back(std::move(e));
    }
    return buckets;
  };
  std::vector<DirBucket> stay_buckets = packed(stay), move_buckets = packed(move);

  // Blocks: the old chain's head, then its overflow blocks, then new ones.
  auto new_head = blocks_.ensure(1 + to);
  if (!new_head) return fail(new_head.error());
  std::vector<std::pair<uint64_t, uint64_t>> spare;  // (file block, volume block)
  for (size_t i = chain->size(); i-- > 1;) {
    spare.emplace_back((*chain)[i].file_block, (*chain)[i].volume_block);
  }
  const size_t overflow_needed = (stay_buckets.size() - 1) + (move_buckets.size() - 1);
  uint64_t next = header.next_overflow;
  while (spare.size() < overflow_needed) {
    auto vb = blocks_.ensure(next);
    if (!vb) return fail(vb.error());
    spare.insert(spare.begin(), {next++, *vb});
  }
  header.next_overflow = next;

  auto write_chain = [&](std::vector<DirBucket>& buckets, uint64_t head_vb) {
    std::vector<std::pair<uint64_t, uint64_t>> blocks{{0, head_vb}};
    for (size_t i = 1; i < buckets.size(); ++i) {
      blocks.push_back(spare.back());
      spare.pop_back();
    }
    for (size_t i = 0; i < buckets.size(); ++i) {
      buckets[i].overflow = i + 1 < buckets.size() ? blocks[i + 1].first : 0;
      encode_dir_bucket(buckets[i], blocks[i].second, meta_.fresh(blocks[i].second));
    }
  };
  write_chain(stay_buckets, chain->front().volume_block);
  write_chain(move_buckets, *new_head);
  for (auto [fb, vb] : spare) {  // left over: onto the free list
    DirBucket freed;
    freed.overflow = header.free_overflow;
    encode_dir_bucket(freed, vb, meta_.fresh(vb));
    header.free_overflow = fb;
  }
  size_ = std::max<uint64_t>(size_, (2 + to) * kBlockSize);
  if (++header.split == (uint64_t{1} << header.level)) {
    ++header.level;
    header.split = 0;
  }
  return {};
}

Result<void> DirectoryIndex::remove(std::string_view name) {
  auto header = read_header();
  if (!header) return fail(header.error());
  const uint64_t key = name_key(name, seed_);
  auto chain = read_chain(bucket_of(*header, key).first, blocks_.map, meta_, ino_);
  if (!chain) return fail(chain.error());
  for (size_t i = 0; i < chain->size(); ++i) {
    ChainBlock& c = (*chain)[i];
    auto it = std::find_if(c.bucket.entries.begin(), c.bucket.entries.end(),
                           [&](const DirEntry& e) { return e.key == key && e.name == name; });
    if (it == c.bucket.entries.end()) continue;
    c.bucket.entries.erase(it);
    if (i > 0 && c.bucket.entries.empty()) {
      // An empty overflow block leaves the chain for the free list.
      ChainBlock& prev = (*chain)[i - 1];
      prev.bucket.overflow = c.bucket.overflow;
      encode_dir_bucket(prev.bucket, prev.volume_block, meta_.modify(prev.volume_block));
      c.bucket.overflow = header->free_overflow;
      header->free_overflow = c.file_block;
    }
    encode_dir_bucket(c.bucket, c.volume_block, meta_.modify(c.volume_block));
    --header->entries;
    write_header(meta_, *blocks_.map(0), *header);
    header_ = *header;
    return {};
  }
  return fail(ENOENT, "no entry '{}'", name);
}

// Points an existing entry at another inode (rename over an existing name).
Result<void> DirectoryIndex::set(std::string_view name, uint64_t ino, uint8_t type) {
  auto header = read_header();
  if (!header) return fail(header.error());
  const uint64_t key = name_key(name, seed_);
  auto chain = read_chain(bucket_of(*header, key).first, blocks_.map, meta_, ino_);
  if (!chain) return fail(chain.error());
  for (ChainBlock& c : *chain) {
    for (DirEntry& e : c.bucket.entries) {
      if (e.key == key && e.name == name) {
        e.ino = ino;
        e.type = type;
        encode_dir_bucket(c.bucket, c.volume_block, meta_.modify(c.volume_block));
        return {};
      }
    }
  }
  return fail(ENOENT, "no entry '{}'", name);
}

Result<bool> DirectoryIndex::empty() {
  auto header = read_header();
  if (!header) return fail(header.error());
  return header->entries == 0;
}

Result<void> DirectoryIndex::list(uint64_t cookie, const Filler& add) {
  auto header = read_header();
  if (!header) return fail(header.error());
  // Positions are bit-reversed keys: every bucket is one contiguous range of them.
  uint64_t position = cookie <= 2 ? 0 : cookie - 3 + 1;
  const uint64_t end = uint64_t{1} << kKeyBits;
  while (position < end) {
    const uint64_t key = reverse_bits(position, kKeyBits);
    auto [bucket, depth] = bucket_of(*header, key);
    auto chain = read_chain(bucket, blocks_.map, meta_, ino_);
    if (!chain) return fail(chain.error());
    std::vector<std::pair<uint64_t, const DirEntry*>> entries;
    for (const ChainBlock& c : *chain) {
      for (const DirEntry& e : c.bucket.entries) {
        const uint64_t p = reverse_bits(e.key, kKeyBits);
        if (p >= position) entries.emplace_back(p, &e);
      }
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < entries.size();) {
      // Entries that share a position go out together, or not at all: a cookie between
      // them could not say where to resume.
      size_t j = i;
      while (j < entries.size() && entries[j].first == entries[i].first) ++j;
      // Should the buffer fill inside a group, the cookies before its last entry resume at
      // the group's start: a name may then come twice, but none is lost.
      for (size_t k = i; k < j; ++k) {
        const DirEntry& e = *entries[k].second;
        const uint64_t next = entries[k].first + (k + 1 == j ? 3 : 2);
        if (!add(e.name, e.ino, e.type, next)) return {};
      }
      i = j;
    }
    const uint64_t prefix = reverse_bits(bucket, depth);
    position = (prefix + 1) << (kKeyBits - depth);
  }
  return {};
}

}  // namespace stripefs::fs
