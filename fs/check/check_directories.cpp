// Pass 2: every directory's blocks and entries; pass 3: what the root reaches, orphans and
// link counts.
#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <set>
#include <unordered_set>

#include "fs/check/checker.hpp"
#include "fs/core/directory_index.hpp"

namespace stripefs::fs {

namespace {

// The bucket a key belongs in (linear hashing: directory_index.cpp).
uint64_t bucket_of(const DirHeader& h, uint64_t key) {
  const uint64_t b = key & ((uint64_t{1} << h.level) - 1);
  return b < h.split ? key & ((uint64_t{1} << (h.level + 1)) - 1) : b;
}

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
  if (!ok) {
    found(fmt::format("directory {}: header: {}; its entries are not read (what they name is "
                      "reported unreachable)",
                      dir, ok.error().message),
          false);
    incomplete_.push_back(dir);
    return {};
  }
  bool whole = true;  // every bucket read: the counts below can be trusted
  std::set<std::string> names;
  uint64_t entries = 0;
  for (uint64_t bucket = 0; bucket < header.buckets(); ++bucket) {
    std::unordered_set<uint64_t> seen;  // file blocks of this chain
    for (uint64_t file_block = 1 + bucket; file_block != 0;) {
      if (!seen.insert(file_block).second || seen.size() > 1'000'000) {
        found(fmt::format("directory {}: bucket {}: its overflow chain loops", dir, bucket), false);
        whole = false;
        break;
      }
      const uint64_t self = map(file_block);
      if (self == 0) {
        found(fmt::format("directory {}: bucket {}: file block {} is not mapped", dir, bucket,
                          file_block),
              false);
        whole = false;
        break;
      }
      DirBucket contents;
      ok = read_verified(self, block, fmt::format("directory {}: bucket {}", dir, bucket),
                         [&](Image i) -> Result<void> {
                           auto d = decode_dir_bucket(i, self);
                           if (!d) return fail(d.error());
                           contents = std::move(*d);
                           return {};
                         });
      if (!ok && ok.error().code != EUCLEAN) return ok;
      if (!ok) {
        found(fmt::format("directory {}: bucket {}: {}; its entries are not read", dir, bucket,
                          ok.error().message),
              false);
        whole = false;
        break;
      }
      bool changed = false;
      std::vector<DirEntry> kept;
      for (DirEntry& e : contents.entries) {
        const std::string where = fmt::format("directory {}: entry '{}'", dir, e.name);
        std::string wrong = bad_name(e.name);
        if (wrong.empty() && !names.insert(e.name).second) wrong = "a second entry of that name";
        if (wrong.empty() && (e.ino == 0 || e.ino >= inodes_.size() || inodes_[e.ino].mode == 0)) {
          auto adopted = adopt(e.ino);
          if (!adopted) return fail(adopted.error());
          if (!*adopted) wrong = fmt::format("names inode {}, which is not in use", e.ino);
        }
        if (wrong.empty() && e.key != DirectoryIndex::name_key(e.name, sb_.hash_seed)) {
          found(fmt::format("{}: field key: {:#x} is not its name's", where, e.key), false);
        } else if (wrong.empty() && bucket_of(header, e.key) != bucket) {
          found(fmt::format("{}: in bucket {}, but its key belongs in {}", where, bucket,
                            bucket_of(header, e.key)),
                false);
        }
        InodeInfo* target = wrong.empty() ? &inodes_[e.ino] : nullptr;
        const bool is_dir = target != nullptr && (target->mode & S_IFMT) == S_IFDIR;
        if (is_dir && (target->names > 0 || e.ino == kRootInode)) {
          wrong = fmt::format("a second name of directory {}", e.ino);
        }
        if (!wrong.empty()) {
          found(fmt::format("{}: {}{}", where, wrong, options_.repair ? "; removed" : ""),
                options_.repair, false);
          changed = true;
          continue;
        }
        const auto type = static_cast<uint8_t>((target->mode & S_IFMT) >> 12);
        if (e.type != type) {
          found(fmt::format("{}: field type: {}, but inode {} is of type {}{}", where, e.type,
                            e.ino, type, options_.repair ? "; set" : ""),
                options_.repair);
          e.type = type;
          changed = true;
        }
        ++target->names;
        children_.emplace_back(dir, e.ino);
        if (dir == kRootInode && is_dir && e.name == "lost+found") lost_found_ = e.ino;
        if (is_dir) {
          ++inodes_[dir].subdirs;
          if (target->parent != dir) {
            found(fmt::format("directory {}: field parent: {}, but directory {} names it{}", e.ino,
                              target->parent, dir, options_.repair ? "; set" : ""),
                  options_.repair);
            target->parent = dir;
            if (options_.repair) {
              AlignedBuffer slot = fresh_block();
              if (auto r = load_table_block(table_block(e.ino), slot, false); !r) return r;
              auto disk = decode_inode(
                  std::span<const std::byte>(slot.data() + slot_offset(e.ino), kInodeSize), e.ino);
              if (!disk) return fail(disk.error());
              disk->parent = dir;
              if (auto r = rewrite_inode(e.ino, *disk); !r) return r;
            }
          }
        }
        kept.push_back(std::move(e));
      }
      entries += kept.size();
      if (changed && options_.repair) {
        contents.entries = std::move(kept);
        encode_dir_bucket(contents, self,
                          std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
        if (auto r = write(self, block.span().first(kBlockSize)); !r) return r;
      }
      file_block = contents.overflow;
    }
  }
  if (!whole) {
    incomplete_.push_back(dir);  // its entry count, and link counts, are not judged
    return {};
  }
  if (header.entries != entries) {
    found(fmt::format("directory {}: header: field entries: {}, but it holds {}{}", dir,
                      header.entries, entries, options_.repair ? "; set" : ""),
          options_.repair);
    if (options_.repair) {
      header.entries = entries;
      encode_dir_header(header, header_block,
                        std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
      if (auto r = write(header_block, block.span().first(kBlockSize)); !r) return r;
    }
  }
  return {};
}

void Checker::reach(uint64_t from) {
  std::deque<uint64_t> queue{from};
  inodes_[from].reached = true;
  while (!queue.empty()) {
    const uint64_t dir = queue.front();
    queue.pop_front();
    auto it = std::lower_bound(children_.begin(), children_.end(), std::pair{dir, uint64_t{0}});
    for (; it != children_.end() && it->first == dir; ++it) {
      InodeInfo& child = inodes_[it->second];
      if (child.reached) continue;
      child.reached = true;
      if ((child.mode & S_IFMT) == S_IFDIR) queue.push_back(it->second);
    }
  }
}

Result<bool> Checker::add_entry(uint64_t dir, const std::string& name, uint64_t ino, uint8_t type) {
  const uint64_t header_block = map_block(dir, 0);
  if (header_block == 0) return false;
  AlignedBuffer block = fresh_block();
  if (auto r = read(header_block, block); !r) return fail(r.error());
  auto header = decode_dir_header(image(block), header_block);
  if (!header) return false;
  const uint64_t key = DirectoryIndex::name_key(name, sb_.hash_seed);
  const uint64_t bucket = bucket_of(*header, key);
  for (uint64_t file_block = 1 + bucket, steps = 0; file_block != 0 && steps < 1'000'000; ++steps) {
    const uint64_t self = map_block(dir, file_block);
    if (self == 0) return false;
    if (auto r = read(self, block); !r) return fail(r.error());
    auto contents = decode_dir_bucket(image(block), self);
    if (!contents) return false;
    if (contents->bytes() + DirBucket::entry_bytes(name.size()) <= kBucketCapacity) {
      contents->entries.push_back({key, ino, type, name});
      encode_dir_bucket(*contents, self,
                        std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
      if (auto r = write(self, block.span().first(kBlockSize)); !r) return fail(r.error());
      ++header->entries;
      encode_dir_header(*header, header_block,
                        std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
      if (auto r = write(header_block, block.span().first(kBlockSize)); !r) return fail(r.error());
      return true;
    }
    file_block = contents->overflow;
  }
  return false;
}

Result<void> Checker::reconnect(uint64_t ino) {
  InodeInfo& info = inodes_[ino];
  const uint64_t host = lost_found_ != 0 ? lost_found_ : kRootInode;
  const std::string where = lost_found_ != 0 ? "/lost+found" : "the root directory";
  const std::string name = "#" + std::to_string(ino);
  const std::string what = fmt::format(
      "inode {}: in use ({} links) but no name from the root reaches it", ino, info.nlink);
  if (!options_.repair) {
    found(fmt::format("{}; it would be named {} in {}", what, name, where), false, false);
    reach(ino);  // what it holds is not reported again
    return {};
  }
  const bool dir = (info.mode & S_IFMT) == S_IFDIR;
  auto added = add_entry(host, name, ino, static_cast<uint8_t>((info.mode & S_IFMT) >> 12));
  if (!added) return fail(added.error());
  if (!*added) {
    found(fmt::format("{}; {} has no room for it, left as it is", what, where), false, false);
    return {};
  }
  found(fmt::format("{}; named {} in {}", what, name, where), true, false);
  ++info.names;
  children_.insert(std::lower_bound(children_.begin(), children_.end(), std::pair{host, ino}),
                   {host, ino});
  if (dir) {
    ++inodes_[host].subdirs;
    info.parent = host;
    AlignedBuffer slot = fresh_block();
    if (auto r = load_table_block(table_block(ino), slot, false); !r) return r;
    auto disk =
        decode_inode(std::span<const std::byte>(slot.data() + slot_offset(ino), kInodeSize), ino);
    if (!disk) return fail(disk.error());
    disk->parent = host;
    if (auto r = rewrite_inode(ino, *disk); !r) return r;
  }
  reach(ino);
  return {};
}

Result<void> Checker::check_connectivity() {
  progress("Pass 3: connectivity and link counts", 0, 1);
  if (inodes_.size() <= kRootInode || (inodes_[kRootInode].mode & S_IFMT) != S_IFDIR) {
    found("inode 1: the root directory is missing or not a directory", false);
    return {};
  }
  std::sort(children_.begin(), children_.end());
  reach(kRootInode);
  // Directories first: what they hold comes back with them.
  for (const bool dirs : {true, false}) {
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      InodeInfo& info = inodes_[ino];
      if (info.mode == 0 || info.reached || info.names > 0 ||
          ((info.mode & S_IFMT) == S_IFDIR) != dirs) {
        continue;
      }
      if (info.nlink == 0) {
        found(fmt::format("inode {}: unlinked while open and never freed (an orphan){}", ino,
                          options_.repair ? "; freed" : ""),
              options_.repair);
        if (auto r = clear_inode(ino); !r) return r;
        continue;
      }
      if (auto r = reconnect(ino); !r) return r;
    }
  }
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    InodeInfo& info = inodes_[ino];
    if (info.mode == 0) continue;
    if (!info.reached) {
      found(fmt::format("inode {}: named only inside directories no name from the root reaches "
                        "(a loop); left as it is",
                        ino),
            false);
      continue;
    }
    const bool dir = (info.mode & S_IFMT) == S_IFDIR;
    const uint64_t expected = dir ? 2 + info.subdirs : info.names;
    if (info.nlink == expected) continue;
    if (expected < info.nlink && !incomplete_.empty()) {
      // A directory not read whole may hold the names not counted: lowering nlink could
      // free a file still named.
      found(
          fmt::format("inode {}: field nlink: {}, but {} {} that could be read; left as it is", ino,
                      info.nlink, expected, dir ? "by its subdirectories" : "names reach it"),
          false);
      continue;
    }
    found(fmt::format("inode {}: field nlink: {}, but {} {}{}", ino, info.nlink, expected,
                      dir ? "by its subdirectories" : "names reach it",
                      options_.repair ? "; set" : ""),
          options_.repair);
    if (!options_.repair) continue;
    AlignedBuffer slot = fresh_block();
    if (auto r = load_table_block(table_block(ino), slot, false); !r) return r;
    auto disk =
        decode_inode(std::span<const std::byte>(slot.data() + slot_offset(ino), kInodeSize), ino);
    if (!disk) return fail(disk.error());
    disk->nlink = static_cast<uint32_t>(expected);
    if (auto r = rewrite_inode(ino, *disk); !r) return r;
    info.nlink = disk->nlink;
  }
  return {};
}

}  // namespace stripefs::fs
