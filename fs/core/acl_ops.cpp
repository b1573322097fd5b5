// POSIX ACLs kept in step with the mode, as a local filesystem keeps them (ext4's acl.c over
// the kernel's posix_acl.c): with FUSE_CAP_POSIX_ACL the kernel enforces the ACLs it reads
// from system.posix_acl_access and leaves inheritance, the umask and the mode to us.
// Called under the filesystem lock; the arithmetic is PosixAcl's (posix_acl.hpp).
#include <algorithm>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"
#include "fs/core/posix_acl.hpp"

namespace stripefs::fs {

namespace {

std::vector<Xattr>::iterator find_attr(std::vector<Xattr>& attrs, std::string_view name) {
  return std::find_if(attrs.begin(), attrs.end(), [&](const Xattr& x) { return x.name == name; });
}

}  // namespace

Result<void> Filesystem::inherit_acls(Inode& dir, Inode& node, uint32_t umask) {
  if (node.is_symlink()) return {};  // a symlink's mode is always 0777
  std::vector<Xattr> dir_attrs;
  if (dir.disk.xattr_block != 0) {
    auto loaded = load_xattrs(dir);
    if (!loaded) return fail(loaded.error());
    dir_attrs = std::move(*loaded);
  }
  auto def = find_attr(dir_attrs, kAclDefaultName);
  if (def == dir_attrs.end()) {
    node.disk.mode &= ~(umask & 0777u);
    return {};
  }
  auto acl = PosixAcl::decode(def->value);
  if (!acl) {
    fs_log().error("directory inode {}: its default ACL: {}", dir.ino, acl.error().message);
    return fail(EIO, "directory inode {}: its default ACL: {}", dir.ino, acl.error().message);
  }
  // The default ACL replaces the umask (POSIX 1003.1e; the kernel's posix_acl_create).
  std::vector<Xattr> own;
  if (node.is_dir()) own.push_back({std::string(kAclDefaultName), def->value});
  node.disk.mode = acl->inherit(node.disk.mode);
  if (!acl->equivalent_to_mode()) own.push_back({std::string(kAclAccessName), acl->encode()});
  if (own.empty()) return {};
  return store_xattrs(node, own);
}

Result<void> Filesystem::chmod_acl(Inode& node, uint32_t mode) {
  if (node.disk.xattr_block == 0) return {};  // no attributes at all: nothing to follow
  auto attrs = load_xattrs(node);
  if (!attrs) return fail(attrs.error());
  auto access = find_attr(*attrs, kAclAccessName);
  if (access == attrs->end()) return {};
  auto acl = PosixAcl::decode(access->value);
  if (!acl) {
    fs_log().error("inode {}: its access ACL: {}", node.ino, acl.error().message);
    return fail(EIO, "inode {}: its access ACL: {}", node.ino, acl.error().message);
  }
  acl->apply_mode(mode);
  access->value = acl->encode();
  return store_xattrs(node, *attrs);
}

Result<void> Filesystem::set_acl(Inode& node, std::string_view name, std::string_view value,
                                 const KeepsSgid& keeps_sgid) {
  if (node.is_symlink()) return fail(EOPNOTSUPP, "symlinks have no ACLs");
  auto acl = PosixAcl::decode(value);
  if (!acl) return fail(acl.error());
  const bool is_default = name == kAclDefaultName;
  if (is_default && !node.is_dir()) {
    return acl->empty() ? Result<void>{} : fail(EACCES, "only a directory has a default ACL");
  }
  auto attrs = load_xattrs(node);
  if (!attrs) return fail(attrs.error());
  auto it = find_attr(*attrs, name);
  // What is stored: nothing for "none", nor for an access ACL the mode says in full.
  std::optional<std::string> stored;
  if (!acl->empty()) stored = acl->encode();
  if (!is_default && !acl->empty()) {
    node.disk.mode = (node.disk.mode & ~0777u) | acl->mode_bits();
    if (keeps_sgid && (node.disk.mode & S_ISGID) && !keeps_sgid(node.disk.gid)) {
      node.disk.mode &= ~uint32_t{S_ISGID};  // as posix_acl_update_mode does
    }
    if (acl->equivalent_to_mode()) stored.reset();
  }
  if (stored) {
    if (it != attrs->end()) {
      it->value = *stored;
    } else {
      attrs->push_back({std::string(name), *stored});
    }
  } else if (it != attrs->end()) {
    attrs->erase(it);
  }
  return store_xattrs(node, *attrs);  // the ctime too, and the mode with the inode
}

}  // namespace stripefs::fs
