// Privileges a change takes from a file, as a local filesystem takes them in the VFS
// (file_remove_privs, setattr_should_drop_suidgid). A FUSE filesystem that negotiates
// FUSE_HANDLE_KILLPRIV_V2 does this itself; the kernel then stops asking for the
// security.capability attribute before every write (a round trip per write).
#include <sys/stat.h>

#include <algorithm>

#include "fs/core/filesystem.hpp"

namespace stripefs::fs {

Result<void> Filesystem::kill_privs(Inode& n, KillPrivs& what) {
  if (!n.is_reg()) return {};
  const uint32_t set_ids = n.disk.mode & (S_ISUID | S_ISGID);
  if (set_ids != 0 && (what.suid_sgid || (what.lacks_fsetid && what.lacks_fsetid()))) {
    const uint32_t mode = n.disk.mode;
    uint32_t drop = mode & S_ISUID;
    if (mode & S_ISGID) {
      const bool keeps = (mode & S_IXGRP) == 0 && (what.who.gid == n.disk.gid ||
                                                   (what.in_group && what.in_group(n.disk.gid)));
      if (!keeps) drop |= S_ISGID;
    }
    if (drop != 0) {
      if (auto r = check_writable(); !r) return r;
      n.disk.mode &= ~drop;
      n.disk.ctime = now();
      dirty(n);
      what.killed = true;
    }
  }
  // Only a file with attributes can hold capabilities; once looked, the inode remembers.
  if (what.caps && n.disk.xattr_block != 0 && n.has_fcaps.value_or(true)) {
    auto attrs = load_xattrs(n);
    if (!attrs) return fail(attrs.error());
    auto it = std::find_if(attrs->begin(), attrs->end(),
                           [](const Xattr& x) { return x.name == kFcapsName; });
    if (it == attrs->end()) {
      n.has_fcaps = false;
    } else {
      if (auto r = check_writable(); !r) return r;
      attrs->erase(it);
      if (auto r = store_xattrs(n, *attrs); !r) return r;
      what.killed = true;
    }
  }
  return {};
}

Result<void> Filesystem::kill_privs(uint64_t ino, KillPrivs& what) {
  Lock lock = change_lock();
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  return kill_privs(**found, what);
}

}  // namespace stripefs::fs
