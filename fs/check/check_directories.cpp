// Pass 2: every directory's blocks and entries. A directory whose shape is damaged (header,
// bucket, chain, an entry where lookups would not find it) is laid out again, repairing.
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "fs/check/checker.hpp"
#include "fs/core/directory_index.hpp"

namespace stripefs::fs {

namespace {

std::string bad_name(const std::string& name) {
  if (name.empty()) return "empty";
  if (name.size() > kMaxNameLength) return "too long";
  if (name == "." || name == "..") return "reserved";
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) {
    return "holds '/' or NUL";
  }
  return {};
}

}  // namespace

Result<void> Checker::check_directories() {
  const std::string pass = "Pass 2: directories";
  uint64_t done = 0;
  progress(pass, 0, report_.directories);
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    if ((inodes_[ino].mode & S_IFMT) != S_IFDIR) continue;
    if (++done % 4096 == 0) progress(pass, done, report_.directories);
    if (auto r = check_directory(ino); !r) return r;
  }
  while (!adopted_dirs_.empty()) {
    const uint64_t dir = adopted_dirs_.back();
    adopted_dirs_.pop_back();
    if (auto r = check_directory(dir); !r) return r;
  }
  return {};
}

Result<bool> Checker::adopt(uint64_t ino) {
  if (ino == 0 || ino > sb_.inode_count || inode_bits_[ino - 1]) return false;
  AlignedBuffer block = fresh_block();
  if (auto r = load_table_block(table_block(ino), block, false); !r) return fail(r.error());
  auto disk =
      decode_inode(std::span<const std::byte>(block.data() + slot_offset(ino), kInodeSize), ino);
  if (!disk || disk->mode == 0) return false;
  if (auto r = check_inode(ino, block, table_block(ino)); !r) return fail(r.error());
  if (inodes_[ino].mode == 0) return false;
  // Its bits are set in pass 4; directories it holds are read once this pass gets to them.
  if ((inodes_[ino].mode & S_IFMT) == S_IFDIR) adopted_dirs_.push_back(ino);
  return true;
}

uint64_t Checker::map_block(uint64_t ino, uint64_t file_block) const {
  auto found = extents_.find(ino);
  if (found == extents_.end()) return 0;
  const std::vector<Extent>& extents = found->second;
  auto it = std::upper_bound(extents.begin(), extents.end(), file_block,
                             [](uint64_t b, const Extent& e) { return b < e.logical; });
  if (it == extents.begin()) return 0;
  --it;
  return file_block < it->logical_end() ? it->physical + (file_block - it->logical) : 0;
}

Result<void> Checker::check_directory(uint64_t dir) {
  const auto map = [&](uint64_t file_block) { return map_block(dir, file_block); };
  const uint64_t header_block = map(0);
  AlignedBuffer block = fresh_block();
  DirHeader header;
  Result<void> ok = header_block == 0 ? fail(EUCLEAN, "no header block")
                                      : read_verified(header_block, block,
                                                      fmt::format("directory {}: header", dir),
                                                      [&](Image i) -> Result<void> {
                                                        auto d = decode_dir_header(i, header_block);
                                                        if (!d) return fail(d.error());
                                                        header = *d;
                                                        return {};
                                                      });
  if (!ok && ok.error().code != EUCLEAN) return ok;  // an I/O error proves no damage
  // Damage to the directory's shape (its header, a bucket, a chain): repairing, it is laid
  // out again from every entry that can be read (what the rest named is reconnected in pass
  // 3); checking, its entries are judged as far as they can be read.
  const std::string again = "; the directory is laid out again from the entries that can be read";
  bool rebuild = false;
  if (!ok) {
    if (!options_.repair) {
      found(fmt::format("directory {}: header: {}; its entries are not read (what they name is "
                        "reported unreachable)",
                        dir, ok.error().message),
            false, false);
      incomplete_.push_back(dir);
      return {};
    }
    found(fmt::format("directory {}: header: {}{}", dir, ok.error().message, again), true, false);
    rebuild = true;
  }
  const auto damaged = [&](const std::string& what, const char* unread) {
    found(what + (options_.repair ? again : unread), options_.repair, false);
    rebuild = true;
  };
  // The buckets' blocks as read: from their chains, then (laying out again) every other
  // block of the directory that passes as a bucket.
  constexpr uint64_t kSalvaged = ~uint64_t{0};
  struct Read {
    uint64_t bucket;
    uint64_t self;
    DirBucket contents;
    bool changed = false;
  };
  std::vector<Read> reads;
  std::unordered_set<uint64_t> read_blocks;
  for (uint64_t bucket = 0; ok && bucket < header.buckets(); ++bucket) {
    std::unordered_set<uint64_t> seen;  // file blocks of this chain
    for (uint64_t file_block = 1 + bucket; file_block != 0;) {
      if (!seen.insert(file_block).second || seen.size() > 1'000'000) {
        damaged(fmt::format("directory {}: bucket {}: its overflow chain loops", dir, bucket), "");
        break;
      }
      const uint64_t self = map(file_block);
      if (self == 0) {
        damaged(fmt::format("directory {}: bucket {}: file block {} is not mapped", dir, bucket,
                            file_block),
                "");
        break;
      }
      DirBucket contents;
      auto got = read_verified(self, block, fmt::format("directory {}: bucket {}", dir, bucket),
                               [&](Image i) -> Result<void> {
                                 auto d = decode_dir_bucket(i, self);
                                 if (!d) return fail(d.error());
                                 contents = std::move(*d);
                                 return {};
                               });
      if (!got && got.error().code != EUCLEAN) return got;
      if (!got) {
        damaged(fmt::format("directory {}: bucket {}: {}", dir, bucket, got.error().message),
                "; its entries are not read");
        break;
      }
      file_block = contents.overflow;
      read_blocks.insert(self);
      reads.push_back({bucket, self, std::move(contents)});
    }
  }
  if (rebuild && options_.repair) {
    for (const Extent& e : extents_[dir]) {
      for (uint64_t i = 0; i < e.length; ++i) {
        const uint64_t self = e.physical + i;
        if (e.logical + i == 0 || read_blocks.contains(self)) continue;
        DirBucket contents;
        auto got = read_verified(self, block,
                                 fmt::format("directory {}: file block {}", dir, e.logical + i),
                                 [&](Image image) -> Result<void> {
                                   auto d = decode_dir_bucket(image, self);
                                   if (!d) return fail(d.error());
                                   contents = std::move(*d);
                                   return {};
                                 });
        if (!got && got.error().code != EUCLEAN) return got;
        if (got) reads.push_back({kSalvaged, self, std::move(contents)});
      }
    }
  }

  std::set<std::string> names;
  std::vector<DirEntry> all;  // every entry kept
  for (Read& read : reads) {
    std::vector<DirEntry> kept;
    for (DirEntry& e : read.contents.entries) {
      const std::string where = fmt::format("directory {}: entry '{}'", dir, e.name);
      std::string wrong = bad_name(e.name);
      if (wrong.empty() && !names.insert(e.name).second) wrong = "a second entry of that name";
      if (wrong.empty() && (e.ino == 0 || e.ino >= inodes_.size() || inodes_[e.ino].mode == 0)) {
        auto adopted = adopt(e.ino);
        if (!adopted) return fail(adopted.error());
        if (!*adopted) wrong = fmt::format("names inode {}, which is not in use", e.ino);
      }
      // Lookups would not find it where it is; laid out again, it is.
      const char* moved = options_.repair ? "; the directory is laid out again" : "";
      if (wrong.empty() && e.key != DirectoryIndex::name_key(e.name, sb_.hash_seed)) {
        found(fmt::format("{}: field key: {:#x} is not its name's{}", where, e.key, moved),
              options_.repair);
        rebuild = rebuild || options_.repair;
      } else if (wrong.empty() && read.bucket != kSalvaged &&
                 bucket_of(header, e.key) != read.bucket) {
        found(fmt::format("{}: in bucket {}, but its key belongs in {}{}", where, read.bucket,
                          bucket_of(header, e.key), moved),
              options_.repair);
        rebuild = rebuild || options_.repair;
      }
      InodeInfo* target = wrong.empty() ? &inodes_[e.ino] : nullptr;
      const bool is_dir = target != nullptr && (target->mode & S_IFMT) == S_IFDIR;
      if (is_dir && (target->names > 0 || e.ino == kRootInode)) {
        wrong = fmt::format("a second name of directory {}", e.ino);
      }
      if (!wrong.empty()) {
        found(fmt::format("{}: {}{}", where, wrong, options_.repair ? "; removed" : ""),
              options_.repair, false);
        read.changed = true;
        continue;
      }
      const auto type = static_cast<uint8_t>((target->mode & S_IFMT) >> 12);
      if (e.type != type) {
        found(fmt::format("{}: field type: {}, but inode {} is of type {}{}", where, e.type, e.ino,
                          type, options_.repair ? "; set" : ""),
              options_.repair);
        e.type = type;
        read.changed = true;
      }
      ++target->names;
      children_.emplace_back(dir, e.ino);
      if (dir == kRootInode && e.name == "lost+found") {
        lost_found_ = is_dir ? e.ino : 0;
        lost_found_taken_ = !is_dir;
      }
      if (is_dir) {
        ++inodes_[dir].subdirs;
        if (auto r = set_parent(e.ino, dir); !r) return r;
      }
      kept.push_back(e);
    }
    all.insert(all.end(), kept.begin(), kept.end());
    read.contents.entries = std::move(kept);
  }
  if (rebuild && options_.repair) return write_directory(dir, std::move(all));
  if (rebuild) {
    incomplete_.push_back(dir);  // its entry count, and link counts, are not judged
    return {};
  }
  for (Read& read : reads) {
    if (!read.changed || !options_.repair) continue;
    encode_dir_bucket(read.contents, read.self,
                      std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
    if (auto r = write(read.self, block.span().first(kBlockSize)); !r) return r;
  }
  if (header.entries != all.size()) {
    found(fmt::format("directory {}: header: field entries: {}, but it holds {}{}", dir,
                      header.entries, all.size(), options_.repair ? "; set" : ""),
          options_.repair);
    if (options_.repair) {
      header.entries = all.size();
      encode_dir_header(header, header_block,
                        std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
      if (auto r = write(header_block, block.span().first(kBlockSize)); !r) return r;
    }
  }
  return {};
}

Result<void> Checker::set_parent(uint64_t ino, uint64_t dir) {
  InodeInfo& target = inodes_[ino];
  if (target.parent == dir) return {};
  found(fmt::format("directory {}: field parent: {}, but directory {} names it{}", ino,
                    target.parent, dir, options_.repair ? "; set" : ""),
        options_.repair);
  target.parent = dir;
  if (!options_.repair) return {};
  AlignedBuffer slot = fresh_block();
  if (auto r = load_table_block(table_block(ino), slot, false); !r) return r;
  auto disk =
      decode_inode(std::span<const std::byte>(slot.data() + slot_offset(ino), kInodeSize), ino);
  if (!disk) return fail(disk.error());
  disk->parent = dir;
  return rewrite_inode(ino, *disk);
}

}  // namespace stripefs::fs
