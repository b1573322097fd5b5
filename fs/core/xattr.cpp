// Extended attributes: every attribute of an inode in one checksummed block (as ext4 keeps
// them in one block beyond the inode); ENOSPC once they no longer fit.
#include <sys/xattr.h>

#include <algorithm>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

namespace {
Result<void> check_namespace(std::string_view name) {
  if (name.empty() || name.size() > 255) return fail(ERANGE, "bad attribute name length");
  for (std::string_view prefix : {"user.", "trusted.", "security."}) {
    if (name.starts_with(prefix) && name.size() > prefix.size()) return {};
  }
  if (name == "system.posix_acl_access" || name == "system.posix_acl_default") return {};
  return fail(EOPNOTSUPP, "attribute namespace not supported");
}
}  // namespace

Result<std::vector<Xattr>> Filesystem::load_xattrs(Inode& inode) {
  if (inode.disk.xattr_block == 0) return std::vector<Xattr>{};
  auto attrs =
      meta_->read_as(inode.disk.xattr_block,
                     [self = inode.disk.xattr_block](std::span<const std::byte, kBlockSize> image) {
                       return decode_xattrs(image, self);
                     });
  if (!attrs) {
    fs_log().error("inode {}: {}", inode.ino, attrs.error().message);
    return fail(EIO, "inode {}: {}", inode.ino, attrs.error().message);
  }
  return attrs;
}

Result<void> Filesystem::store_xattrs(Inode& inode, const std::vector<Xattr>& attrs) {
  if (attrs.empty()) {
    if (inode.disk.xattr_block != 0) {
      free_blocks(inode.disk.xattr_block, 1);
      --inode.disk.blocks;
      inode.disk.xattr_block = 0;
    }
  } else {
    if (xattr_bytes(attrs) > kXattrCapacity) return fail(ENOSPC, "no room for the attribute");
    if (inode.disk.xattr_block == 0) {
      if (!room_for_metadata(1)) return fail(ENOSPC, "no space for attributes");
      auto run = blocks_->reserve(1, 0, 1);
      if (!run) return fail(ENOSPC, "no space for attributes");
      blocks_->mark_used(*meta_, run->first, 1);
      inode.disk.xattr_block = run->first;
      ++inode.disk.blocks;
      meta_->fresh(run->first);
    }
    encode_xattrs(attrs, inode.disk.xattr_block, meta_->modify(inode.disk.xattr_block));
  }
  inode.disk.ctime = now();
  dirty(inode);
  return {};
}

Result<void> Filesystem::setxattr(uint64_t ino, std::string_view name, std::string_view value,
                                  int flags) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return r;
  if (auto r = check_namespace(name); !r) return r;
  if (value.size() > 65536) return fail(E2BIG, "attribute value too large");
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  auto attrs = load_xattrs(**found);
  if (!attrs) return fail(attrs.error());
  auto it =
      std::find_if(attrs->begin(), attrs->end(), [&](const Xattr& x) { return x.name == name; });
  if ((flags & XATTR_CREATE) && it != attrs->end()) return fail(EEXIST, "attribute exists");
  if ((flags & XATTR_REPLACE) && it == attrs->end()) return fail(ENODATA, "no such attribute");
  if (it != attrs->end()) {
    it->value = std::string(value);
  } else {
    attrs->push_back({std::string(name), std::string(value)});
  }
  return store_xattrs(**found, *attrs);
}

Result<std::string> Filesystem::getxattr(uint64_t ino, std::string_view name) {
  Lock lock(mutex_);
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  auto attrs = load_xattrs(**found);
  if (!attrs) return fail(attrs.error());
  for (const Xattr& x : *attrs) {
    if (x.name == name) return x.value;
  }
  return fail(ENODATA, "no such attribute");
}

Result<std::vector<std::string>> Filesystem::listxattr(uint64_t ino) {
  Lock lock(mutex_);
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  auto attrs = load_xattrs(**found);
  if (!attrs) return fail(attrs.error());
  std::vector<std::string> names;
  for (const Xattr& x : *attrs) names.push_back(x.name);
  return names;
}

Result<void> Filesystem::removexattr(uint64_t ino, std::string_view name) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return r;
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  auto attrs = load_xattrs(**found);
  if (!attrs) return fail(attrs.error());
  auto it =
      std::find_if(attrs->begin(), attrs->end(), [&](const Xattr& x) { return x.name == name; });
  if (it == attrs->end()) return fail(ENODATA, "no such attribute");
  attrs->erase(it);
  return store_xattrs(**found, *attrs);
}

}  // namespace stripefs::fs
