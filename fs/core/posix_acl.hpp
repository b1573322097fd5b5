// POSIX access control lists as the kernel hands them to a filesystem: the values of
// system.posix_acl_access and system.posix_acl_default (linux/posix_acl_xattr.h), a
// little-endian 32-bit version (2) followed by 8-byte entries {le16 tag, le16 perm, le32 id},
// sorted by tag and, among named users and named groups, by id.
//
// With FUSE_CAP_POSIX_ACL the kernel checks access against them, and the filesystem keeps
// the mode in step with them, as a local filesystem does with the kernel's helpers:
// chmod rewrites the access ACL (posix_acl_chmod), setting an access ACL rewrites the mode
// (posix_acl_update_mode), and a new node inherits its directory's default ACL
// (posix_acl_create). This file is the arithmetic alone; fs/core/acl_ops.cpp applies it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "raid/result.hpp"

namespace stripefs::fs {

inline constexpr std::string_view kAclAccessName = "system.posix_acl_access";
inline constexpr std::string_view kAclDefaultName = "system.posix_acl_default";

enum AclTag : uint16_t {
  kAclUserObj = 0x01,
  kAclUser = 0x02,
  kAclGroupObj = 0x04,
  kAclGroup = 0x08,
  kAclMask = 0x10,
  kAclOther = 0x20,
};

struct AclEntry {
  uint16_t tag = 0;
  uint16_t perm = 0;  // rwx: 4, 2, 1
  uint32_t id = 0;    // a uid or gid for kAclUser and kAclGroup; unused otherwise
  bool operator==(const AclEntry&) const = default;
};

class PosixAcl {
 public:
  static constexpr uint32_t kVersion = 2;
  static constexpr uint32_t kUndefinedId = 0xffffffff;

  // Parses a value, refusing (EINVAL, naming what is wrong) a bad version or size, an
  // unknown tag or permission bit, entries out of order or repeated, a missing owner, group
  // or other entry, and named entries without a mask. A value of the version alone is an
  // ACL of no entries (empty()): the kernel's way of saying "none".
  static Result<PosixAcl> decode(std::string_view value);
  // The three entries a mode's permission bits make.
  static PosixAcl from_mode(uint32_t mode);

  std::string encode() const;
  bool empty() const { return entries_.empty(); }
  const std::vector<AclEntry>& entries() const { return entries_; }

  // True when the mode's permission bits say everything it says (owner, group and other
  // alone): such an access ACL is not stored, as on ext4.
  bool equivalent_to_mode() const;
  // The permission bits (0777) it gives the mode: owner from the owner entry, group from
  // the mask (or the group entry without one), other from the other entry.
  uint32_t mode_bits() const;
  // chmod: the owner, mask (or group) and other entries take the new mode's bits.
  void apply_mode(uint32_t mode);
  // This ACL, a directory's default, becomes the access ACL of a node created in it with
  // `mode`: each class entry is limited by the mode and the mode by the entries. Returns
  // the node's mode (type and set-id bits kept).
  uint32_t inherit(uint32_t mode);

 private:
  std::vector<AclEntry> entries_;
};

}  // namespace stripefs::fs
