// Pass 3: what the root reaches. Orphans are freed; inodes no name reaches, and directory
// loops, are given a name in /lost+found (made when there is none); link counts are set to
// the names found.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <deque>
#include <unordered_set>

#include "fs/check/checker.hpp"
#include "fs/core/directory_index.hpp"

namespace stripefs::fs {

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

Result<bool> Checker::read_entries(uint64_t dir, std::vector<DirEntry>& out) {
  const uint64_t header_block = map_block(dir, 0);
  if (header_block == 0) return false;
  AlignedBuffer block = fresh_block();
  if (auto r = read(header_block, block); !r) return fail(r.error());
  auto header = decode_dir_header(image(block), header_block);
  if (!header) return false;
  for (uint64_t bucket = 0; bucket < header->buckets(); ++bucket) {
    std::unordered_set<uint64_t> seen;
    for (uint64_t file_block = 1 + bucket; file_block != 0;) {
      const uint64_t self = map_block(dir, file_block);
      if (self == 0 || !seen.insert(file_block).second) return false;
      if (auto r = read(self, block); !r) return fail(r.error());
      auto contents = decode_dir_bucket(image(block), self);
      if (!contents) return false;
      out.insert(out.end(), contents->entries.begin(), contents->entries.end());
      file_block = contents->overflow;
    }
  }
  return true;
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
  // Every block of the chain is full: laid out again, with room to spare.
  std::vector<DirEntry> entries;
  auto whole = read_entries(dir, entries);
  if (!whole || !*whole) return whole;
  entries.push_back({key, ino, type, name});
  if (auto r = write_directory(dir, std::move(entries)); !r) return fail(r.error());
  return true;
}

Result<uint64_t> Checker::remove_entries(uint64_t dir, uint64_t ino) {
  const uint64_t header_block = map_block(dir, 0);
  if (header_block == 0) return uint64_t{0};
  AlignedBuffer block = fresh_block();
  if (auto r = read(header_block, block); !r) return fail(r.error());
  auto header = decode_dir_header(image(block), header_block);
  if (!header) return uint64_t{0};
  uint64_t removed = 0;
  for (uint64_t bucket = 0; bucket < header->buckets(); ++bucket) {
    std::unordered_set<uint64_t> seen;
    for (uint64_t file_block = 1 + bucket; file_block != 0;) {
      const uint64_t self = map_block(dir, file_block);
      if (self == 0 || !seen.insert(file_block).second) break;
      if (auto r = read(self, block); !r) return fail(r.error());
      auto contents = decode_dir_bucket(image(block), self);
      if (!contents) break;
      const size_t n =
          std::erase_if(contents->entries, [ino](const DirEntry& e) { return e.ino == ino; });
      if (n > 0) {
        removed += n;
        encode_dir_bucket(*contents, self,
                          std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
        if (auto r = write(self, block.span().first(kBlockSize)); !r) return fail(r.error());
      }
      file_block = contents->overflow;
    }
  }
  if (removed == 0) return removed;
  header->entries -= std::min(header->entries, removed);
  encode_dir_header(*header, header_block,
                    std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
  if (auto r = write(header_block, block.span().first(kBlockSize)); !r) return fail(r.error());
  return removed;
}

Result<void> Checker::make_lost_found() {
  if (lost_found_taken_) return fail(EEXIST, "the root names something else lost+found");
  uint64_t ino = kRootInode + 1;
  while (ino < inodes_.size() && (inodes_[ino].mode != 0 || inode_bits_[ino - 1])) ++ino;
  if (ino >= inodes_.size()) return fail(ENOSPC, "no free inode for /lost+found");
  AlignedBuffer slot = fresh_block();
  if (auto r = load_table_block(table_block(ino), slot, false); !r) return r;
  DiskInode disk;
  if (auto old = decode_inode(
          std::span<const std::byte>(slot.data() + slot_offset(ino), kInodeSize), ino)) {
    disk.generation = old->generation + 1;
  }
  disk.mode = S_IFDIR | 0700;  // as mklost+found makes it
  disk.nlink = 2;
  disk.parent = kRootInode;
  const Timespec now{time(nullptr), 0};
  disk.atime = disk.mtime = disk.ctime = now;
  if (auto r = rewrite_inode(ino, disk); !r) return r;
  inodes_[ino] = InodeInfo{disk.mode, disk.nlink, kRootInode, 0, 0, true};
  extents_[ino] = {};
  // Undone when it cannot be finished: nothing half made is left.
  const auto undo = [&](const Error& why) -> Result<void> {
    if (auto r = clear_inode(ino); !r) return r;
    return fail(why);
  };
  if (auto r = write_directory(ino, {}); !r) return undo(r.error());
  auto added = add_entry(kRootInode, "lost+found", ino, DT_DIR);
  if (!added) return undo(added.error());
  if (!*added) return undo(Error{EUCLEAN, "the root directory cannot be read to name it"});
  ++inodes_[ino].names;
  children_.insert(std::lower_bound(children_.begin(), children_.end(), std::pair{kRootInode, ino}),
                   {kRootInode, ino});
  // The root's link count grows with it.
  ++inodes_[kRootInode].subdirs;
  if (auto r = load_table_block(table_block(kRootInode), slot, false); !r) return r;
  auto root = decode_inode(
      std::span<const std::byte>(slot.data() + slot_offset(kRootInode), kInodeSize), kRootInode);
  if (!root) return fail(root.error());
  if (root->nlink == inodes_[kRootInode].nlink) {
    ++root->nlink;
    if (auto r = rewrite_inode(kRootInode, *root); !r) return r;
    inodes_[kRootInode].nlink = root->nlink;
  }
  lost_found_ = ino;
  found(fmt::format("/lost+found: missing; made (inode {})", ino), true);
  return {};
}

Result<void> Checker::reconnect(uint64_t ino) {
  InodeInfo& info = inodes_[ino];
  const std::string what = fmt::format(
      "inode {}: in use ({} links) but no name from the root reaches it", ino, info.nlink);
  const std::string name = "#" + std::to_string(ino);
  if (!options_.repair) {
    found(fmt::format("{}; it would be named {} in /lost+found", what, name), false, false);
    reach(ino);  // what it holds is not reported again
    return {};
  }
  if (lost_found_ == 0) {
    // Without one (no free inode or space, the root unreadable, the name taken) the inode
    // goes in the root; an I/O error stops the check.
    if (auto r = make_lost_found(); !r && r.error().code == EIO) return r;
  }
  const uint64_t host = lost_found_ != 0 ? lost_found_ : kRootInode;
  const std::string where = lost_found_ != 0 ? "/lost+found" : "the root directory";
  const bool dir = (info.mode & S_IFMT) == S_IFDIR;
  auto added = add_entry(host, name, ino, static_cast<uint8_t>((info.mode & S_IFMT) >> 12));
  if (!added) return fail(added.error());
  if (!*added) {
    found(fmt::format("{}; {} cannot be read to name it, left as it is", what, where), false,
          false);
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

Result<void> Checker::break_loop(uint64_t dir) {
  // Its names inside what the root does not reach go; then it is reconnected like any
  // inode no name reaches, and what it holds comes back with it.
  const auto first = [&]() {
    return std::find_if(children_.begin(), children_.end(), [&](const auto& c) {
      return c.second == dir && !inodes_[c.first].reached;
    });
  };
  for (auto it = first(); it != children_.end(); it = first()) {
    const uint64_t parent = it->first;
    auto removed = remove_entries(parent, dir);
    if (!removed) return fail(removed.error());
    if (*removed == 0) {
      // Not readable now: reconnected, it would have two names.
      found(fmt::format("directory {}: its name in directory {} cannot be removed; left as it is",
                        dir, parent),
            false, false);
      return {};
    }
    std::erase(children_, std::pair{parent, dir});
    InodeInfo& info = inodes_[dir];
    info.names -= static_cast<uint32_t>(std::min<uint64_t>(info.names, *removed));
    inodes_[parent].subdirs -=
        static_cast<uint32_t>(std::min<uint64_t>(inodes_[parent].subdirs, *removed));
  }
  found(fmt::format("directory {}: named only inside directories no name from the root reaches "
                    "(a loop); those names removed",
                    dir),
        true, false);
  return reconnect(dir);
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
        found(fmt::format("inode {}: unlinked while open and never freed (an orphan){}{}", ino,
                          sb_.has_orphan_list() && !orphan_bits_[ino - 1]
                              ? ", and the orphan list does not name it (a mount after a crash "
                                "would never free it)"
                              : "",
                          options_.repair ? "; freed" : ""),
              options_.repair);
        if (auto r = clear_inode(ino); !r) return r;
        continue;
      }
      if (auto r = reconnect(ino); !r) return r;
    }
    if (!dirs || !options_.repair) continue;
    // Directories named only inside each other (a loop): each is reconnected in turn.
    for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
      const InodeInfo& info = inodes_[ino];
      if (info.mode == 0 || info.reached || (info.mode & S_IFMT) != S_IFDIR) continue;
      if (auto r = break_loop(ino); !r) return r;
    }
  }
  for (uint64_t ino = 1; ino < inodes_.size(); ++ino) {
    InodeInfo& info = inodes_[ino];
    if (info.mode == 0) continue;
    if (!info.reached) {
      found(fmt::format("inode {}: named only inside directories no name from the root reaches "
                        "(a loop){}",
                        ino, options_.repair ? "; left as it is" : ""),
            false, false);
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
