// Extended attributes: every attribute of an inode in one checksummed block (as ext4 keeps
// them in one block beyond the inode), or, when they do not fit, in a run of blocks
// (xattr_format.hpp): values up to 64 KiB, about 255 KiB in all; ENOSPC past that.
#include <sys/xattr.h>

#include <algorithm>
#include <cstring>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"
#include "fs/core/posix_acl.hpp"
#include "fs/core/xattr_format.hpp"

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
  const uint64_t first = inode.disk.xattr_block;
  if (first == 0) return std::vector<Xattr>{};
  Result<std::vector<Xattr>> attrs = std::vector<Xattr>{};
  if (inode.disk.xattr_blocks == 0) {
    attrs = meta_->read_as(first, [first](std::span<const std::byte, kBlockSize> image) {
      return decode_xattrs(image, first);
    });
  } else {
    // Each block checked (and healed from redundancy) as it is read, then the run whole.
    std::vector<std::byte> run(static_cast<size_t>(inode.disk.xattr_blocks) * kBlockSize);
    for (uint32_t b = 0; b < inode.disk.xattr_blocks && attrs; ++b) {
      const uint64_t block = first + b;
      auto image = meta_->read_checked(block, [block](std::span<const std::byte> bytes) {
        return verify_xattr_run_block(
                   std::span<const std::byte, kBlockSize>(bytes.data(), kBlockSize), block)
            .has_value();
      });
      if (!image) {
        attrs = fail(image.error());
      } else {
        std::memcpy(run.data() + b * kBlockSize, image->data(), kBlockSize);
      }
    }
    if (attrs) attrs = decode_xattr_run(run, first);
  }
  if (!attrs) {
    fs_log().error("inode {}: {}", inode.ino, attrs.error().message);
    return fail(EIO, "inode {}: {}", inode.ino, attrs.error().message);
  }
  return attrs;
}

Result<void> Filesystem::store_xattrs(Inode& inode, const std::vector<Xattr>& attrs) {
  const uint32_t held =
      inode.disk.xattr_block == 0 ? 0 : std::max<uint32_t>(inode.disk.xattr_blocks, 1);
  const uint32_t need = attrs.empty() ? 0 : xattr_blocks_for(attrs);
  if (!attrs.empty() && need == 0) return fail(ENOSPC, "no room for the attribute");
  // Runs are format minor 2: a filesystem of minor 0 (which mount does not raise) keeps the
  // one-block limit.
  if (need >= 2 && sb_.minor < 2) return fail(ENOSPC, "no room for the attribute");
  // listxattr answers in at most 64 KiB (the kernel's XATTR_LIST_MAX): names past that
  // could never be listed again.
  size_t names = 0;
  for (const Xattr& x : attrs) names += x.name.size() + 1;
  if (names > 65536) return fail(ENOSPC, "the attribute names would not fit one listing");
  if (need != held) {
    // A new home of the size needed (a run is contiguous); the old blocks go once it exists.
    uint64_t first = 0;
    if (need > 0) {
      if (!room_for(need)) return fail(ENOSPC, "no space for attributes");
      auto run = blocks_->reserve(need, 0, 1);
      if (!run || run->second < need) {
        if (run) blocks_->unreserve(run->first, run->second);
        return fail(ENOSPC, "no space for attributes");
      }
      blocks_->mark_used(*meta_, run->first, need);
      first = run->first;
      for (uint32_t b = 0; b < need; ++b) meta_->fresh(first + b);
    }
    if (held > 0) free_blocks(inode.disk.xattr_block, held);
    inode.disk.blocks = inode.disk.blocks + need - held;
    inode.disk.xattr_block = first;
    inode.disk.xattr_blocks = need >= 2 ? need : 0;
  }
  if (need == 1) {
    encode_xattrs(attrs, inode.disk.xattr_block, meta_->modify(inode.disk.xattr_block));
  } else if (need >= 2) {
    std::vector<std::byte> run(static_cast<size_t>(need) * kBlockSize);
    encode_xattr_run(attrs, inode.disk.xattr_block, need, run);
    for (uint32_t b = 0; b < need; ++b) {
      std::memcpy(meta_->modify(inode.disk.xattr_block + b).data(), run.data() + b * kBlockSize,
                  kBlockSize);
    }
  }
  inode.has_fcaps =
      std::any_of(attrs.begin(), attrs.end(), [](const Xattr& x) { return x.name == kFcapsName; });
  inode.disk.ctime = now();
  dirty(inode);
  return {};
}

Result<void> Filesystem::setxattr(uint64_t ino, std::string_view name, std::string_view value,
                                  int flags, const KeepsSgid& keeps_sgid) {
  Lock lock = change_lock();
  if (auto r = check_writable(); !r) return r;
  if (auto r = check_namespace(name); !r) return r;
  if (value.size() > 65536) return fail(E2BIG, "attribute value too large");
  auto found = get_inode(ino);
  if (!found) return fail(found.error());
  if (posix_acls_ && (name == kAclAccessName || name == kAclDefaultName)) {
    return set_acl(**found, name, value, keeps_sgid);  // the kernel sends no flags for these
  }
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
