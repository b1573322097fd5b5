// Names and attributes: lookup, create, link, unlink, rename, setattr, statfs.
#include <dirent.h>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

namespace {
uint8_t dtype(uint32_t mode) {
  return static_cast<uint8_t>((mode & S_IFMT) >> 12);
}

Result<void> check_name(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return fail(EINVAL, "invalid name");
  if (name.size() > kMaxNameLength) return fail(ENAMETOOLONG, "name longer than 255 bytes");
  if (name.find('/') != std::string_view::npos) return fail(EINVAL, "name contains '/'");
  return {};
}
}  // namespace

Result<void> Filesystem::check_writable() const {
  if (failed_) return fail(EROFS, "filesystem is read-only after an error: {}", failed_->message);
  if (options_.read_only) return fail(EROFS, "mounted read-only");
  return {};
}

Result<Attr> Filesystem::lookup(uint64_t parent, std::string_view name) {
  Lock lock(mutex_);
  if (name.size() > kMaxNameLength) return fail(ENAMETOOLONG, "name longer than 255 bytes");
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  // "." of any inode is itself: an NFS server exporting the mount asks it of files too, to
  // bring back an inode the kernel no longer holds from its file handle (libfuse's
  // README.NFS).
  if (!(*dir)->is_dir() && name != ".") return fail(ENOTDIR, "not a directory");
  uint64_t ino = 0;
  if (name == ".") {
    ino = parent;
  } else if (name == "..") {
    ino = (*dir)->disk.parent != 0 ? (*dir)->disk.parent : parent;
  } else {
    auto entry = directory(**dir).find(name);
    if (!entry) return fail(entry.error());
    if (!*entry) return fail(ENOENT, "no such entry");
    ino = (*entry)->ino;
  }
  auto inode = get_inode(ino);
  if (!inode) return fail(inode.error());
  ++(*inode)->lookups;
  return attr_of(**inode);
}

void Filesystem::forget(uint64_t ino, uint64_t lookups) {
  Lock lock = change_lock();
  Inode* found = table_->find(ino);
  if (found == nullptr) return;
  Inode& inode = *found;
  inode.lookups -= std::min(inode.lookups, lookups);
  maybe_evict(inode, lock);
}

Result<Attr> Filesystem::getattr(uint64_t ino) {
  Lock lock(mutex_);
  auto inode = get_inode(ino);
  if (!inode) return fail(inode.error());
  return attr_of(**inode);
}

Result<Attr> Filesystem::setattr(uint64_t ino, const SetAttr& change) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return fail(r.error());
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  const Timespec t = now();
  if (change.size) {
    if (n.is_dir()) return fail(EISDIR, "is a directory");
    if (!n.is_reg()) return fail(EINVAL, "not a regular file");
    if (*change.size > kMaxFileSize) return fail(EFBIG, "file too large");
    if (auto r = truncate(n, *change.size, lock); !r) return fail(r.error());
  }
  if (change.mode && posix_acls_) {
    if (auto r = chmod_acl(n, *change.mode); !r) return fail(r.error());
  }
  if (change.mode) n.disk.mode = (n.disk.mode & S_IFMT) | (*change.mode & 07777);
  if (change.uid) n.disk.uid = *change.uid;
  if (change.gid) n.disk.gid = *change.gid;
  if ((change.uid || change.gid) && n.is_reg() && !change.mode) {
    n.disk.mode &= ~uint32_t{S_ISUID};  // chown clears set-user-ID, as on Linux
    if (n.disk.mode & S_IXGRP) n.disk.mode &= ~uint32_t{S_ISGID};
  }
  if (change.atime) n.disk.atime = change.atime->nsec == SetAttr::kTimeNow ? t : *change.atime;
  if (change.mtime) n.disk.mtime = change.mtime->nsec == SetAttr::kTimeNow ? t : *change.mtime;
  n.disk.ctime = t;
  dirty(n);
  return attr_of(n);
}

Result<Attr> Filesystem::mknod(uint64_t parent, std::string_view name, uint32_t mode, uint64_t rdev,
                               const Caller& caller) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return fail(r.error());
  if (auto r = check_name(name); !r) return fail(r.error());
  const uint32_t type = mode & S_IFMT;
  if (type != S_IFREG && type != S_IFDIR && type != S_IFIFO && type != S_IFSOCK &&
      type != S_IFCHR && type != S_IFBLK) {
    return fail(EINVAL, "unsupported file type {:o}", type);
  }
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  Inode& d = **dir;
  if (!d.is_dir()) return fail(ENOTDIR, "not a directory");
  if (d.disk.nlink == 0) return fail(ENOENT, "directory was removed");
  auto existing = directory(d).find(name);
  if (!existing) return fail(existing.error());
  if (*existing) return fail(EEXIST, "exists");
  Caller owner = caller;
  if (d.disk.mode & S_ISGID) owner.gid = d.disk.gid;  // BSD group semantics on setgid dirs
  uint32_t final_mode = mode;
  if (type == S_IFDIR && (d.disk.mode & S_ISGID)) final_mode |= S_ISGID;
  auto created = new_inode(final_mode, owner, type == S_IFDIR ? parent : 0);
  if (!created) return fail(created.error());
  Inode& n = **created;
  n.disk.rdev = (type == S_IFCHR || type == S_IFBLK) ? rdev : 0;
  if (posix_acls_) {
    if (auto r = inherit_acls(d, n, caller.umask); !r) {
      n.disk.nlink = 0;  // never named: freed with its attributes
      maybe_evict(n, lock);
      return fail(r.error());
    }
  }
  if (type == S_IFDIR) {
    n.disk.nlink = 2;
    if (auto r = directory(n).init(); !r) {
      n.disk.nlink = 0;  // never named: freed with what init allocated
      maybe_evict(n, lock);
      return fail(r.error());
    }
  }
  if (auto r = directory(d).add(name, n.ino, dtype(n.disk.mode)); !r) {
    n.disk.nlink = 0;
    maybe_evict(n, lock);
    return fail(r.error());
  }
  if (type == S_IFDIR) ++d.disk.nlink;
  d.disk.mtime = d.disk.ctime = n.disk.ctime;
  dirty(d);
  ++n.lookups;
  fs_log().debug("create {}/{}: inode {}", parent, name, n.ino);
  return attr_of(n);
}

Result<Attr> Filesystem::tmpfile(uint64_t parent, uint32_t mode, const Caller& caller) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return fail(r.error());
  if ((mode & S_IFMT) != S_IFREG) return fail(EINVAL, "a temporary file is a regular file");
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  Inode& d = **dir;
  if (!d.is_dir()) return fail(ENOTDIR, "not a directory");
  if (d.disk.nlink == 0) return fail(ENOENT, "directory was removed");
  Caller owner = caller;
  if (d.disk.mode & S_ISGID) owner.gid = d.disk.gid;
  auto created = new_inode(mode, owner, 0);
  if (!created) return fail(created.error());
  Inode& n = **created;
  n.disk.nlink = 0;  // stored on the orphan list: a crash before linkat frees it at mount
  if (posix_acls_) {
    if (auto r = inherit_acls(d, n, caller.umask); !r) {
      maybe_evict(n, lock);
      return fail(r.error());
    }
  }
  dirty(n);
  ++n.lookups;
  return attr_of(n);
}

Result<Attr> Filesystem::symlink(uint64_t parent, std::string_view name, std::string_view target,
                                 const Caller& caller) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return fail(r.error());
  if (auto r = check_name(name); !r) return fail(r.error());
  if (target.empty()) return fail(ENOENT, "empty symlink target");
  if (target.size() > kMaxSymlinkLength) return fail(ENAMETOOLONG, "symlink target too long");
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  Inode& d = **dir;
  if (!d.is_dir()) return fail(ENOTDIR, "not a directory");
  auto existing = directory(d).find(name);
  if (!existing) return fail(existing.error());
  if (*existing) return fail(EEXIST, "exists");
  auto created = new_inode(S_IFLNK | 0777, caller, 0);
  if (!created) return fail(created.error());
  Inode& n = **created;
  n.disk.size = target.size();
  if (target.size() <= kInlineSymlink) {
    n.disk.inline_symlink = std::string(target);
  } else {
    auto block = ensure_block(n, 0);
    if (!block) {
      n.disk.nlink = 0;
      maybe_evict(n, lock);
      return fail(block.error());
    }
    auto image = meta_->fresh(*block);
    std::memcpy(image.data(), target.data(), target.size());
    n.disk.symlink_crc = symlink_checksum(target);
  }
  if (auto r = directory(d).add(name, n.ino, DT_LNK); !r) {
    n.disk.nlink = 0;
    maybe_evict(n, lock);
    return fail(r.error());
  }
  d.disk.mtime = d.disk.ctime = n.disk.ctime;
  dirty(d);
  ++n.lookups;
  return attr_of(n);
}

Result<std::string> Filesystem::readlink(uint64_t ino) {
  Lock lock(mutex_);
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (!n.is_symlink()) return fail(EINVAL, "not a symlink");
  if (!n.disk.inline_symlink.empty()) return n.disk.inline_symlink;
  auto block = map_block(n, 0);
  if (!block) return fail(block.error());
  if (*block == 0) return fail(EIO, "inode {}: symlink without a target block", ino);
  auto target = meta_->read_as(*block, [&](std::span<const std::byte, kBlockSize> image) {
    return decode_symlink(image, ino, n.disk.size, n.disk.symlink_crc);
  });
  if (!target) {
    fs_log().error("{}", target.error().message);
    return fail(EIO, "{}", target.error().message);
  }
  return target;
}

Result<Attr> Filesystem::link(uint64_t ino, uint64_t parent, std::string_view name) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return fail(r.error());
  if (auto r = check_name(name); !r) return fail(r.error());
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (n.is_dir()) return fail(EPERM, "hard link to a directory");
  if (n.disk.nlink >= 65000) return fail(EMLINK, "too many links");
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  Inode& d = **dir;
  if (!d.is_dir()) return fail(ENOTDIR, "not a directory");
  auto existing = directory(d).find(name);
  if (!existing) return fail(existing.error());
  if (*existing) return fail(EEXIST, "exists");
  if (auto r = directory(d).add(name, ino, dtype(n.disk.mode)); !r) return fail(r.error());
  ++n.disk.nlink;
  n.disk.ctime = d.disk.mtime = d.disk.ctime = now();
  dirty(n);
  dirty(d);
  ++n.lookups;
  return attr_of(n);
}

Result<void> Filesystem::unlink(uint64_t parent, std::string_view name) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return r;
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  Inode& d = **dir;
  auto entry = directory(d).find(name);
  if (!entry) return fail(entry.error());
  if (!*entry) return fail(ENOENT, "no such entry");
  auto found = get_inode((*entry)->ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (n.is_dir()) return fail(EISDIR, "is a directory");
  if (auto r = directory(d).remove(name); !r) return r;
  fs_log().debug("unlink {}/{}: inode {}", parent, name, n.ino);
  --n.disk.nlink;
  n.disk.ctime = d.disk.mtime = d.disk.ctime = now();
  dirty(n);
  dirty(d);
  if (auto r = free_unlinked(n, lock); !r) return r;
  maybe_evict(n, lock);
  return {};
}

// A file of many TiB is more than one transaction to free: its blocks go now, in steps,
// and destroy_inode (one transaction) finds little left.
Result<void> Filesystem::free_unlinked(Inode& n, Lock& lock) {
  if (n.disk.nlink != 0 || n.opens != 0 || !n.is_reg()) return {};
  {
    InSteps steps(*this, n, lock);  // not evicted by a writeback's end while we wait for it
    wait_writeback(n, lock);
  }
  if (n.disk.nlink != 0 || n.opens != 0) return {};  // linked or opened again meanwhile
  drop_ranges(n, 0, UINT64_MAX);
  return free_range_in_steps(n, 0, UINT64_MAX, lock);
}

Result<void> Filesystem::rmdir(uint64_t parent, std::string_view name) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return r;
  if (name == ".") return fail(EINVAL, "cannot remove '.'");
  if (name == "..") return fail(ENOTEMPTY, "cannot remove '..'");
  auto dir = get_inode(parent);
  if (!dir) return fail(dir.error());
  Inode& d = **dir;
  auto entry = directory(d).find(name);
  if (!entry) return fail(entry.error());
  if (!*entry) return fail(ENOENT, "no such entry");
  auto found = get_inode((*entry)->ino);
  if (!found) return fail(found.error());
  Inode& n = **found;
  if (!n.is_dir()) return fail(ENOTDIR, "not a directory");
  auto empty = directory(n).empty();
  if (!empty) return fail(empty.error());
  if (!*empty) return fail(ENOTEMPTY, "directory not empty");
  if (auto r = directory(d).remove(name); !r) return r;
  n.disk.nlink = 0;
  --d.disk.nlink;
  n.disk.ctime = d.disk.mtime = d.disk.ctime = now();
  dirty(n);
  dirty(d);
  maybe_evict(n, lock);
  return {};
}

Result<void> Filesystem::rename(uint64_t parent, std::string_view name, uint64_t new_parent,
                                std::string_view new_name, unsigned flags) {
  Lock lock = change_lock();
  uint64_t replaced = 0;  // the inode a rename over an existing name unlinked
  if (auto r = check_writable(); !r) return r;
  if ((flags & kRenameNoReplace) && (flags & kRenameExchange)) return fail(EINVAL, "bad flags");
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return fail(EINVAL, "unsupported flags");
  if (auto r = check_name(new_name); !r) return r;
  auto src_dir = get_inode(parent);
  if (!src_dir) return fail(src_dir.error());
  auto dst_dir = get_inode(new_parent);
  if (!dst_dir) return fail(dst_dir.error());
  Inode& sd = **src_dir;
  Inode& dd = **dst_dir;
  if (!sd.is_dir() || !dd.is_dir()) return fail(ENOTDIR, "not a directory");
  auto src_entry = directory(sd).find(name);
  if (!src_entry) return fail(src_entry.error());
  if (!*src_entry) return fail(ENOENT, "no such entry");
  auto dst_entry = directory(dd).find(new_name);
  if (!dst_entry) return fail(dst_entry.error());
  if ((flags & kRenameNoReplace) && *dst_entry) return fail(EEXIST, "target exists");
  if ((flags & kRenameExchange) && !*dst_entry) return fail(ENOENT, "no target to exchange");
  auto found = get_inode((*src_entry)->ino);
  if (!found) return fail(found.error());
  Inode& s = **found;
  if (*dst_entry && (*dst_entry)->ino == s.ino) return {};  // the same file: nothing to do

  // A directory may not move below itself.
  auto inside = [&](uint64_t ancestor, uint64_t dir) -> Result<bool> {
    for (uint64_t at = dir; at != kRootInode && at != 0;) {
      if (at == ancestor) return true;
      auto i = get_inode(at);
      if (!i) return fail(i.error());
      at = (*i)->disk.parent;
    }
    return ancestor == kRootInode;
  };
  if (s.is_dir()) {
    auto below = inside(s.ino, new_parent);
    if (!below) return fail(below.error());
    if (*below) return fail(EINVAL, "cannot move a directory below itself");
  }
  const Timespec t = now();
  if (flags & kRenameExchange) {
    auto other = get_inode((*dst_entry)->ino);
    if (!other) return fail(other.error());
    Inode& o = **other;
    if (o.is_dir()) {
      auto below = inside(o.ino, parent);
      if (!below) return fail(below.error());
      if (*below) return fail(EINVAL, "cannot move a directory below itself");
    }
    if (auto r = directory(sd).set(name, o.ino, dtype(o.disk.mode)); !r) return r;
    if (auto r = directory(dd).set(new_name, s.ino, dtype(s.disk.mode)); !r) return r;
    if (parent != new_parent) {
      if (s.is_dir()) {
        s.disk.parent = new_parent;
        --sd.disk.nlink;
        ++dd.disk.nlink;
      }
      if (o.is_dir()) {
        o.disk.parent = parent;
        --dd.disk.nlink;
        ++sd.disk.nlink;
      }
    }
    s.disk.ctime = o.disk.ctime = sd.disk.mtime = sd.disk.ctime = dd.disk.mtime = dd.disk.ctime = t;
    dirty(s);
    dirty(o);
    dirty(sd);
    dirty(dd);
    return {};
  }
  if (*dst_entry) {
    auto other = get_inode((*dst_entry)->ino);
    if (!other) return fail(other.error());
    Inode& o = **other;
    if (s.is_dir()) {
      if (!o.is_dir()) return fail(ENOTDIR, "target is not a directory");
      auto empty = directory(o).empty();
      if (!empty) return fail(empty.error());
      if (!*empty) return fail(ENOTEMPTY, "target directory not empty");
    } else if (o.is_dir()) {
      return fail(EISDIR, "target is a directory");
    }
    if (auto r = directory(dd).set(new_name, s.ino, dtype(s.disk.mode)); !r) return r;
    if (o.is_dir()) {
      o.disk.nlink = 0;
      --dd.disk.nlink;
    } else {
      --o.disk.nlink;
    }
    o.disk.ctime = t;
    dirty(o);
    replaced = o.ino;
  } else if (auto r = directory(dd).add(new_name, s.ino, dtype(s.disk.mode)); !r) {
    return r;
  }
  if (auto r = directory(sd).remove(name); !r) return r;
  if (s.is_dir() && parent != new_parent) {
    s.disk.parent = new_parent;
    --sd.disk.nlink;
    ++dd.disk.nlink;
  }
  s.disk.ctime = sd.disk.mtime = sd.disk.ctime = dd.disk.mtime = dd.disk.ctime = t;
  dirty(s);
  dirty(sd);
  dirty(dd);
  fs_log().debug("rename {}/{} to {}/{}: inode {}, replacing {}", parent, name, new_parent,
                 new_name, s.ino, replaced);
  // The replaced file, once the rename is whole: freeing it may commit in between.
  if (Inode* found = replaced != 0 ? table_->find(replaced) : nullptr) {
    Inode& o = *found;
    if (auto r = free_unlinked(o, lock); !r) return r;
    maybe_evict(o, lock);
  }
  return {};
}

DirectoryIndex Filesystem::directory(Inode& dir) {
  return DirectoryIndex(*meta_,
                        {[this, &dir](uint64_t b) { return map_block(dir, b); },
                         [this, &dir](uint64_t b) { return ensure_block(dir, b); }},
                        sb_.hash_seed, dir.ino, dir.dir, dir.disk.size);
}

Result<void> Filesystem::readdir(uint64_t ino, uint64_t cookie, const DirFiller& add) {
  Lock lock(mutex_);
  auto dir = get_inode(ino);
  if (!dir) return fail(dir.error());
  if (!(*dir)->is_dir()) return fail(ENOTDIR, "not a directory");
  if (cookie == 0 && !add(".", ino, DT_DIR, 1)) return {};
  if (cookie <= 1) {
    const uint64_t parent = (*dir)->disk.parent != 0 ? (*dir)->disk.parent : ino;
    if (!add("..", parent, DT_DIR, 2)) return {};
  }
  return directory(**dir).list(cookie, add);
}

Result<void> Filesystem::open(uint64_t ino) {
  Lock lock(mutex_);
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  wait_in_steps(**found, lock);
  ++(*found)->opens;
  return {};
}

void Filesystem::release(uint64_t ino) {
  Lock lock = change_lock();
  Inode* found = table_->find(ino);
  if (found == nullptr) return;
  Inode& n = *found;
  if (n.opens > 0) --n.opens;
  if (auto r = free_unlinked(n, lock); !r) {
    fs_log().error("inode {}: freeing its blocks: {}", ino, r.error().message);
  }
  maybe_evict(n, lock);
}

FsStatfs Filesystem::statfs() {
  Lock lock(mutex_);
  FsStatfs s;
  s.blocks = sb_.total_blocks - sb_.data_start;
  const uint64_t used = delalloc_reserved_ + metadata_reserve_;
  const uint64_t free = blocks_->free_count() + blocks_->deferred_count();
  s.blocks_free = free > used ? free - used : 0;
  s.files = sb_.inode_count;
  s.files_free = inodes_->free_count() + inodes_->deferred_count();
  return s;
}

}  // namespace stripefs::fs
