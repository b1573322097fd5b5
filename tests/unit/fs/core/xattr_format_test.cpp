// xattr_format: the one-block form for what fits, the run form for values up to 64 KiB and
// many per inode; every block of a run sealed and checked; the inode field that says which.
#include "fs/core/xattr_format.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace stripefs::fs {
namespace {

std::vector<Xattr> big_attrs() {
  std::vector<Xattr> attrs;
  std::string value(kXattrValueMax, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 7 + i / 251);
  attrs.push_back({"user.DosStream.big:$DATA", value});
  for (int i = 0; i < 30; ++i) attrs.push_back({"user.n" + std::to_string(i), std::string(i, 'x')});
  attrs.push_back({"security.NTACL", std::string(5000, '\1')});
  return attrs;
}

TEST(XattrFormat, WhatFitsTakesOneBlockAndTheRestARun) {
  EXPECT_EQ(xattr_blocks_for(std::vector<Xattr>{}), 1u);
  EXPECT_EQ(xattr_blocks_for(std::vector<Xattr>{{"user.a", std::string(4000, 'a')}}), 1u);
  EXPECT_EQ(xattr_blocks_for(std::vector<Xattr>{{"user.a", std::string(4100, 'a')}}), 2u);
  // 65536 does not fit the one-block form's 16-bit length, whatever the block's room.
  const uint32_t max = xattr_blocks_for(std::vector<Xattr>{{"user.a", std::string(65536, 'a')}});
  EXPECT_EQ(max, (8 + 8 + 6 + 65536 + kXattrRunPayload - 1) / kXattrRunPayload);
  std::vector<Xattr> too_many;
  for (int i = 0; i < 5; ++i)
    too_many.push_back({"user.v" + std::to_string(i), std::string(65536, 'v')});
  EXPECT_EQ(xattr_blocks_for(too_many), 0u) << "more than kMaxXattrBlocks";
}

TEST(XattrFormat, ARunRoundTripsAndEveryBlockIsChecked) {
  const std::vector<Xattr> attrs = big_attrs();
  const uint32_t blocks = xattr_blocks_for(attrs);
  ASSERT_GE(blocks, 2u);
  std::vector<std::byte> run(blocks * kBlockSize);
  encode_xattr_run(attrs, 5000, blocks, run);
  auto back = decode_xattr_run(run, 5000);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->size(), attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    EXPECT_EQ((*back)[i].name, attrs[i].name);
    EXPECT_EQ((*back)[i].value, attrs[i].value) << attrs[i].name;
  }
  // Read at another address (a misdirected write), or one byte wrong in any block.
  auto moved = decode_xattr_run(run, 5001);
  ASSERT_FALSE(moved.has_value());
  EXPECT_NE(moved.error().message.find("xattr run block at volume block 5001"), std::string::npos)
      << moved.error().message;
  for (uint32_t b = 0; b < blocks; ++b) {
    std::vector<std::byte> bad = run;
    bad[b * kBlockSize + 2000] ^= std::byte{0x10};
    auto refused = decode_xattr_run(bad, 5000);
    ASSERT_FALSE(refused.has_value()) << "block " << b;
    EXPECT_NE(refused.error().message.find(std::to_string(5000 + b)), std::string::npos)
        << refused.error().message;
    EXPECT_FALSE(verify_xattr_run_block(std::span<const std::byte, kBlockSize>(
                                            bad.data() + b * kBlockSize, kBlockSize),
                                        5000 + b)
                     .has_value());
  }
  // A run is not a one-block xattr block, nor the other way round.
  EXPECT_FALSE(decode_xattrs(std::span<const std::byte, kBlockSize>(run.data(), kBlockSize), 5000)
                   .has_value());
}

TEST(XattrFormat, TheInodeSaysHowManyBlocksAndRefusesNonsense) {
  DiskInode n;
  n.mode = S_IFREG | 0644;
  n.xattr_block = 900;
  n.xattr_blocks = 17;
  std::array<std::byte, kInodeSize> raw;
  encode_inode(n, raw);
  auto back = decode_inode(raw, 3);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->xattr_blocks, 17u);
  for (const uint32_t wrong : {1u, kMaxXattrBlocks + 1}) {
    n.xattr_blocks = wrong;
    encode_inode(n, raw);
    auto refused = decode_inode(raw, 3);
    ASSERT_FALSE(refused.has_value()) << wrong;
    EXPECT_NE(refused.error().message.find("field xattr_blocks"), std::string::npos);
  }
  n.xattr_block = 0;
  n.xattr_blocks = 4;
  encode_inode(n, raw);
  EXPECT_FALSE(decode_inode(raw, 3).has_value()) << "a run with no first block";
}

}  // namespace
}  // namespace stripefs::fs
