// MetaStore's index of blocks read on every data read (index_blocks): what it hands out is
// always what the cache holds, checked as the cache would check it, and never an image that
// has left the cache.
#include <gtest/gtest.h>

#include <cstring>

#include "unit/fs/core/meta_test_util.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kFirst = test::MetaFixture::kFirstFree + 100;  // blocks below it: outside
constexpr uint64_t kCount = 2000;                                 // four index pages

// A block image whose every byte is `fill`.
AlignedBuffer filled(std::byte fill) {
  AlignedBuffer b(fs::kBlockSize);
  std::memset(b.data(), static_cast<int>(fill), fs::kBlockSize);
  return b;
}

// A check that counts its calls and passes every image.
struct CountingCheck {
  int calls = 0;
  Volume::BlockCheck check() {
    return [this](std::span<const std::byte>) {
      ++calls;
      return true;
    };
  }
};

std::byte first_byte(test::MetaFixture& f, uint64_t block, const Volume::BlockCheck& check) {
  auto image = f.meta->read_checked(block, check);
  EXPECT_TRUE(image) << image.error().message;
  return image ? (*image)[0] : std::byte{0};
}

// A MetaStore with [kFirst, kFirst + kCount) indexed, and a counting check.
class MetaStoreIndex : public ::testing::Test {
 protected:
  void SetUp() override { f.meta->index_blocks(kFirst, kCount); }
  std::byte read(uint64_t block) { return first_byte(f, block, check); }
  void put(uint64_t block, std::byte fill) {
    ASSERT_TRUE(f.volume->write(block * fs::kBlockSize, filled(fill).span()));
  }
  test::MetaFixture f;
  CountingCheck counting;
  Volume::BlockCheck check = counting.check();
};

TEST_F(MetaStoreIndex, ChecksOnceAndReturnsTheCachedImage) {
  int blocks = 0;
  for (const uint64_t block : {kFirst, kFirst + 511, kFirst + 512, kFirst + kCount - 1}) {
    put(block, std::byte{7});
    auto first = f.meta->read_checked(block, check);
    ASSERT_TRUE(first);
    auto again = f.meta->read_checked(block, check);
    ASSERT_TRUE(again);
    EXPECT_EQ(counting.calls, ++blocks) << "block " << block;
    EXPECT_EQ(first->data(), again->data());
    EXPECT_EQ((*again)[0], std::byte{7});
    // A change made through modify() is what the next read sees.
    f.meta->modify(block)[0] = std::byte{9};
    EXPECT_EQ(read(block), std::byte{9});
    EXPECT_EQ(counting.calls, blocks);
  }
}

TEST_F(MetaStoreIndex, AFreshBlockIsCheckedAgain) {
  const uint64_t block = kFirst + 600;
  EXPECT_EQ(read(block), std::byte{0});
  f.meta->fresh(block)[0] = std::byte{5};
  f.commit_and_checkpoint();
  EXPECT_EQ(read(block), std::byte{5});
  EXPECT_EQ(counting.calls, 2);  // fresh() made it unchecked: the index forgot it
}

TEST_F(MetaStoreIndex, AForgottenBlockIsReadFromTheVolumeAgain) {
  const uint64_t block = kFirst + 1500;
  put(block, std::byte{1});
  EXPECT_EQ(read(block), std::byte{1});
  put(block, std::byte{2});
  EXPECT_EQ(read(block), std::byte{1});  // cached
  f.meta->forget(block);
  EXPECT_EQ(read(block), std::byte{2});
  EXPECT_EQ(counting.calls, 2);
}

TEST_F(MetaStoreIndex, TrimmedBlocksAreReadFromTheVolumeAgain) {
  f.meta = std::make_unique<fs::MetaStore>(*f.volume, *f.journal, 8);
  f.meta->index_blocks(kFirst, kCount);
  constexpr uint64_t kBlocks = 32;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    put(kFirst + i, std::byte{3});
    EXPECT_EQ(read(kFirst + i), std::byte{3});
  }
  f.meta->trim();  // down to half the limit: at least 28 of the 32 leave
  for (uint64_t i = 0; i < kBlocks; ++i) put(kFirst + i, std::byte{4});
  int reread = 0;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    if (read(kFirst + i) == std::byte{4}) ++reread;
  }
  EXPECT_GE(reread, 28);
  EXPECT_EQ(counting.calls, static_cast<int>(kBlocks) + reread);
}

TEST_F(MetaStoreIndex, BlocksOutsideTheRangeAndBlocksCachedBeforeItWork) {
  f.meta = std::make_unique<fs::MetaStore>(*f.volume, *f.journal, 1u << 14);  // no index yet
  const uint64_t before = kFirst + 10;  // cached and checked before the index exists
  put(before, std::byte{6});
  EXPECT_EQ(read(before), std::byte{6});
  f.meta->index_blocks(kFirst, kCount);
  EXPECT_EQ(read(before), std::byte{6});
  f.meta->forget(before);
  put(before, std::byte{8});
  EXPECT_EQ(read(before), std::byte{8});
  for (const uint64_t outside : {kFirst - 50, kFirst + kCount}) {
    put(outside, std::byte{6});
    EXPECT_EQ(read(outside), std::byte{6});
    EXPECT_EQ(read(outside), std::byte{6});
  }
  EXPECT_EQ(counting.calls, 4);
}

}  // namespace
}  // namespace stripefs
