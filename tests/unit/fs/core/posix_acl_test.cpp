// posix_acl: the kernel's xattr form read and written byte for byte, every kind of bad
// value refused, and the mode arithmetic of chmod, setfacl and inheritance as ext4 does it.
#include "fs/core/posix_acl.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

namespace stripefs::fs {
namespace {

constexpr uint32_t kNone = PosixAcl::kUndefinedId;

// The value as setfacl hands it to the kernel, built by hand (little-endian fields).
std::string raw(std::initializer_list<AclEntry> entries, uint32_t version = 2) {
  std::string s;
  auto put = [&s](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(version, 4);
  for (const AclEntry& e : entries) {
    put(e.tag, 2);
    put(e.perm, 2);
    put(e.id, 4);
  }
  return s;
}

// u::rw-, u:1000:r--, g::r--, g:50:rw-, m::rw-, o::---
std::string named_acl() {
  return raw({{kAclUserObj, 6, kNone},
              {kAclUser, 4, 1000},
              {kAclGroupObj, 4, kNone},
              {kAclGroup, 6, 50},
              {kAclMask, 6, kNone},
              {kAclOther, 0, kNone}});
}

TEST(PosixAcl, DecodesTheKernelsFormAndEncodesItBack) {
  auto acl = PosixAcl::decode(named_acl());
  ASSERT_TRUE(acl) << acl.error().message;
  ASSERT_EQ(acl->entries().size(), 6u);
  EXPECT_EQ(acl->entries()[1], (AclEntry{kAclUser, 4, 1000}));
  EXPECT_EQ(acl->encode(), named_acl());
  EXPECT_FALSE(acl->equivalent_to_mode());
  EXPECT_EQ(acl->mode_bits(), 0660u) << "group bits from the mask";
  auto plain = PosixAcl::from_mode(0754);
  EXPECT_TRUE(plain.equivalent_to_mode());
  EXPECT_EQ(plain.mode_bits(), 0754u);
  EXPECT_EQ(plain.encode(),
            raw({{kAclUserObj, 7, kNone}, {kAclGroupObj, 5, kNone}, {kAclOther, 4, kNone}}));
  auto none = PosixAcl::decode(raw({}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(PosixAcl, RefusesEveryKindOfBadValue) {
  const std::pair<std::string, const char*> bad[] = {
      {"", "bytes"},
      {raw({}) + "abc", "bytes"},
      {raw({{kAclUserObj, 6, kNone}, {kAclGroupObj, 4, kNone}, {kAclOther, 0, kNone}}, 1),
       "version"},
      {raw({{kAclUserObj, 8, kNone}, {kAclGroupObj, 4, kNone}, {kAclOther, 0, kNone}}),
       "permission"},
      {raw({{kAclUserObj, 6, kNone}, {0x40, 4, kNone}, {kAclOther, 0, kNone}}), "tag"},
      {raw({{kAclGroupObj, 4, kNone}, {kAclUserObj, 6, kNone}, {kAclOther, 0, kNone}}), "order"},
      {raw({{kAclUserObj, 6, kNone},
            {kAclUser, 4, 7},
            {kAclUser, 4, 7},
            {kAclGroupObj, 4, kNone},
            {kAclMask, 4, kNone},
            {kAclOther, 0, kNone}}),
       "order"},
      {raw({{kAclUserObj, 6, kNone}, {kAclOther, 0, kNone}}), "exactly one"},
      {raw({{kAclUserObj, 6, kNone},
            {kAclUser, 4, 7},
            {kAclGroupObj, 4, kNone},
            {kAclOther, 0, kNone}}),
       "mask"},
      {raw({{kAclUserObj, 6, kNone},
            {kAclUser, 4, kNone},
            {kAclGroupObj, 4, kNone},
            {kAclMask, 4, kNone},
            {kAclOther, 0, kNone}}),
       "id"},
  };
  for (const auto& [value, word] : bad) {
    auto r = PosixAcl::decode(value);
    ASSERT_FALSE(r) << word;
    EXPECT_EQ(r.error().code, EINVAL);
    EXPECT_NE(r.error().message.find(word), std::string::npos) << r.error().message;
  }
}

TEST(PosixAcl, ChmodMovesTheMaskNotTheOwningGroup) {
  auto acl = PosixAcl::decode(named_acl());
  ASSERT_TRUE(acl);
  acl->apply_mode(0740);
  EXPECT_EQ(acl->entries()[0].perm, 7);  // owner
  EXPECT_EQ(acl->entries()[2].perm, 4);  // the owning group keeps its entry
  EXPECT_EQ(acl->entries()[4].perm, 4);  // the mask takes the group bits
  EXPECT_EQ(acl->entries()[5].perm, 0);
  EXPECT_EQ(acl->mode_bits(), 0740u);
  auto plain = PosixAcl::from_mode(0600);
  plain.apply_mode(0755);
  EXPECT_EQ(plain.mode_bits(), 0755u) << "without a mask the group entry is the group class";
}

TEST(PosixAcl, InheritanceLimitsTheDefaultByTheModeAndTheModeByTheDefault) {
  // d:u::rwx, d:u:1000:rwx, d:g::r-x, d:m::rwx, d:o::---, and open(O_CREAT, 0666).
  auto def = PosixAcl::decode(raw({{kAclUserObj, 7, kNone},
                                   {kAclUser, 7, 1000},
                                   {kAclGroupObj, 5, kNone},
                                   {kAclMask, 7, kNone},
                                   {kAclOther, 0, kNone}}));
  ASSERT_TRUE(def);
  PosixAcl file = *def;
  EXPECT_EQ(file.inherit(S_IFREG | 0666), uint32_t{S_IFREG | 0660});
  EXPECT_EQ(file.entries()[0].perm, 6);  // rw- : the mode had no x
  EXPECT_EQ(file.entries()[1].perm, 7);  // named entries keep theirs; the mask limits them
  EXPECT_EQ(file.entries()[2].perm, 5);
  EXPECT_EQ(file.entries()[3].perm, 6);
  EXPECT_EQ(file.entries()[4].perm, 0);
  EXPECT_FALSE(file.equivalent_to_mode());
  // A plain default: the mode and the ACL meet, and nothing beyond the mode is left.
  PosixAcl plain = PosixAcl::from_mode(0750);
  EXPECT_EQ(plain.inherit(S_IFDIR | S_ISGID | 0777), uint32_t{S_IFDIR | S_ISGID | 0750});
  EXPECT_TRUE(plain.equivalent_to_mode());
}

}  // namespace
}  // namespace stripefs::fs
