#include "fs/core/posix_acl.hpp"

#include <span>

#include "raid/ondisk.hpp"

namespace stripefs::fs {

namespace {

constexpr size_t kHeaderSize = 4;
constexpr size_t kEntrySize = 8;

std::span<const std::byte> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Each class entry's bits within a mode: owner 0700, group 0070, other 0007.
uint32_t class_shift(uint16_t tag) {
  switch (tag) {
    case kAclUserObj:
      return 6;
    case kAclGroupObj:
    case kAclMask:
      return 3;
    default:
      return 0;
  }
}

}  // namespace

Result<PosixAcl> PosixAcl::decode(std::string_view value) {
  const auto in = bytes_of(value);
  if (in.size() < kHeaderSize || (in.size() - kHeaderSize) % kEntrySize != 0) {
    return fail(EINVAL, "ACL of {} bytes: not a version and whole 8-byte entries", in.size());
  }
  const uint32_t version = ondisk::get_le<uint32_t>(in, 0);
  if (version != kVersion) return fail(EINVAL, "ACL version {} (expected 2)", version);
  PosixAcl acl;
  const size_t count = (in.size() - kHeaderSize) / kEntrySize;
  int user_obj = 0, group_obj = 0, other = 0, mask = 0, named = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t at = kHeaderSize + i * kEntrySize;
    AclEntry e{ondisk::get_le<uint16_t>(in, at), ondisk::get_le<uint16_t>(in, at + 2),
               ondisk::get_le<uint32_t>(in, at + 4)};
    if (e.perm & ~7u) return fail(EINVAL, "ACL entry {}: permission bits {:#o}", i, e.perm);
    switch (e.tag) {
      case kAclUserObj:
        ++user_obj;
        break;
      case kAclGroupObj:
        ++group_obj;
        break;
      case kAclOther:
        ++other;
        break;
      case kAclMask:
        ++mask;
        break;
      case kAclUser:
      case kAclGroup:
        if (e.id == kUndefinedId) return fail(EINVAL, "ACL entry {}: named entry without an id", i);
        ++named;
        break;
      default:
        return fail(EINVAL, "ACL entry {}: unknown tag {:#x}", i, e.tag);
    }
    if (e.tag != kAclUser && e.tag != kAclGroup) e.id = kUndefinedId;
    if (!acl.entries_.empty()) {
      const AclEntry& prev = acl.entries_.back();
      const bool ordered =
          prev.tag < e.tag ||
          (prev.tag == e.tag && (e.tag == kAclUser || e.tag == kAclGroup) && prev.id < e.id);
      if (!ordered) return fail(EINVAL, "ACL entry {}: out of order or repeated", i);
    }
    acl.entries_.push_back(e);
  }
  if (count == 0) return acl;
  if (user_obj != 1 || group_obj != 1 || other != 1) {
    return fail(EINVAL, "ACL without exactly one owner, group and other entry");
  }
  if (named > 0 && mask == 0) return fail(EINVAL, "ACL with named entries but no mask");
  return acl;
}

PosixAcl PosixAcl::from_mode(uint32_t mode) {
  PosixAcl acl;
  acl.entries_ = {{kAclUserObj, static_cast<uint16_t>((mode >> 6) & 7), kUndefinedId},
                  {kAclGroupObj, static_cast<uint16_t>((mode >> 3) & 7), kUndefinedId},
                  {kAclOther, static_cast<uint16_t>(mode & 7), kUndefinedId}};
  return acl;
}

std::string PosixAcl::encode() const {
  std::string value(kHeaderSize + entries_.size() * kEntrySize, '\0');
  std::span<std::byte> out{reinterpret_cast<std::byte*>(value.data()), value.size()};
  ondisk::put_le<uint32_t>(out, 0, kVersion);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const size_t at = kHeaderSize + i * kEntrySize;
    ondisk::put_le<uint16_t>(out, at, entries_[i].tag);
    ondisk::put_le<uint16_t>(out, at + 2, entries_[i].perm);
    ondisk::put_le<uint32_t>(out, at + 4, entries_[i].id);
  }
  return value;
}

bool PosixAcl::equivalent_to_mode() const {
  for (const AclEntry& e : entries_) {
    if (e.tag != kAclUserObj && e.tag != kAclGroupObj && e.tag != kAclOther) return false;
  }
  return true;
}

uint32_t PosixAcl::mode_bits() const {
  bool has_mask = false;
  for (const AclEntry& e : entries_) has_mask |= e.tag == kAclMask;
  uint32_t bits = 0;
  for (const AclEntry& e : entries_) {
    if (e.tag == kAclUserObj || e.tag == kAclOther ||
        e.tag == (has_mask ? kAclMask : kAclGroupObj)) {
      bits |= static_cast<uint32_t>(e.perm) << class_shift(e.tag);
    }
  }
  return bits;
}

void PosixAcl::apply_mode(uint32_t mode) {
  bool has_mask = false;
  for (const AclEntry& e : entries_) has_mask |= e.tag == kAclMask;
  for (AclEntry& e : entries_) {
    if (e.tag == kAclUserObj || e.tag == kAclOther ||
        e.tag == (has_mask ? kAclMask : kAclGroupObj)) {
      e.perm = static_cast<uint16_t>((mode >> class_shift(e.tag)) & 7);
    }
  }
}

uint32_t PosixAcl::inherit(uint32_t mode) {
  bool has_mask = false;
  for (const AclEntry& e : entries_) has_mask |= e.tag == kAclMask;
  // The group class is the mask's where there is one: the owning group's entry then keeps
  // its own bits, as the named entries do (the mask limits them all).
  const uint16_t group_class = has_mask ? kAclMask : kAclGroupObj;
  uint32_t bits = mode & 0777;
  for (AclEntry& e : entries_) {
    if (e.tag != kAclUserObj && e.tag != kAclOther && e.tag != group_class) continue;
    const uint32_t shift = class_shift(e.tag);
    e.perm = static_cast<uint16_t>(e.perm & ((bits >> shift) & 7));
    bits = (bits & ~(7u << shift)) | (static_cast<uint32_t>(e.perm) << shift);
  }
  return (mode & ~0777u) | bits;
}

}  // namespace stripefs::fs
