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

TEST(MetaStoreIndex, ChecksOnceAndReturnsTheCachedImage) {
  test::MetaFixture f;
  f.meta->index_blocks(kFirst, kCount);
  for (const uint64_t block : {kFirst, kFirst + 511, kFirst + 512, kFirst + kCount - 1}) {
    ASSERT_TRUE(f.volume->write(block * fs::kBlockSize, filled(std::byte{7}).span()));
    CountingCheck counting;
    auto check = counting.check();
    auto first = f.meta->read_checked(block, check);
    ASSERT_TRUE(first);
    auto again = f.meta->read_checked(block, check);
    ASSERT_TRUE(again);
    EXPECT_EQ(counting.calls, 1) << "block " << block;
    EXPECT_EQ(first->data(), again->data());
    EXPECT_EQ((*again)[0], std::byte{7});
    // A change made through modify() is what the next read sees.
    f.meta->modify(block)[0] = std::byte{9};
    EXPECT_EQ(first_byte(f, block, check), std::byte{9});
    EXPECT_EQ(counting.calls, 1);
  }
}

TEST(MetaStoreIndex, AFreshBlockIsCheckedAgain) {
  test::MetaFixture f;
  f.meta->index_blocks(kFirst, kCount);
  const uint64_t block = kFirst + 600;
  CountingCheck counting;
  auto check = counting.check();
  EXPECT_EQ(first_byte(f, block, check), std::byte{0});
  f.meta->fresh(block)[0] = std::byte{5};
  f.commit_and_checkpoint();
  EXPECT_EQ(first_byte(f, block, check), std::byte{5});
  EXPECT_EQ(counting.calls, 2);  // fresh() made it unchecked: the index forgot it
}

TEST(MetaStoreIndex, AForgottenBlockIsReadFromTheVolumeAgain) {
  test::MetaFixture f;
  f.meta->index_blocks(kFirst, kCount);
  const uint64_t block = kFirst + 1500;
  CountingCheck counting;
  auto check = counting.check();
  ASSERT_TRUE(f.volume->write(block * fs::kBlockSize, filled(std::byte{1}).span()));
  EXPECT_EQ(first_byte(f, block, check), std::byte{1});
  ASSERT_TRUE(f.volume->write(block * fs::kBlockSize, filled(std::byte{2}).span()));
  EXPECT_EQ(first_byte(f, block, check), std::byte{1});  // cached
  f.meta->forget(block);
  EXPECT_EQ(first_byte(f, block, check), std::byte{2});
  EXPECT_EQ(counting.calls, 2);
}

TEST(MetaStoreIndex, TrimmedBlocksAreReadFromTheVolumeAgain) {
  test::MetaFixture f;
  f.meta = std::make_unique<fs::MetaStore>(*f.volume, *f.journal, 8);
  f.meta->index_blocks(kFirst, kCount);
  CountingCheck counting;
  auto check = counting.check();
  constexpr uint64_t kBlocks = 32;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    ASSERT_TRUE(f.volume->write((kFirst + i) * fs::kBlockSize, filled(std::byte{3}).span()));
    EXPECT_EQ(first_byte(f, kFirst + i, check), std::byte{3});
  }
  f.meta->trim();  // down to half the limit: at least 28 of the 32 leave
  for (uint64_t i = 0; i < kBlocks; ++i) {
    ASSERT_TRUE(f.volume->write((kFirst + i) * fs::kBlockSize, filled(std::byte{4}).span()));
  }
  int reread = 0;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    if (first_byte(f, kFirst + i, check) == std::byte{4}) ++reread;
  }
  EXPECT_GE(reread, 28);
  EXPECT_EQ(counting.calls, static_cast<int>(kBlocks) + reread);
}

TEST(MetaStoreIndex, BlocksOutsideTheRangeAndBlocksCachedBeforeItWork) {
  test::MetaFixture f;
  CountingCheck counting;
  auto check = counting.check();
  const uint64_t before = kFirst + 10;  // cached and checked before the index exists
  ASSERT_TRUE(f.volume->write(before * fs::kBlockSize, filled(std::byte{6}).span()));
  EXPECT_EQ(first_byte(f, before, check), std::byte{6});
  f.meta->index_blocks(kFirst, kCount);
  EXPECT_EQ(first_byte(f, before, check), std::byte{6});
  f.meta->forget(before);  // must leave the index too
  ASSERT_TRUE(f.volume->write(before * fs::kBlockSize, filled(std::byte{8}).span()));
  EXPECT_EQ(first_byte(f, before, check), std::byte{8});
  for (const uint64_t outside : {kFirst - 50, kFirst + kCount}) {
    ASSERT_TRUE(f.volume->write(outside * fs::kBlockSize, filled(std::byte{6}).span()));
    EXPECT_EQ(first_byte(f, outside, check), std::byte{6});
    EXPECT_EQ(first_byte(f, outside, check), std::byte{6});
  }
  EXPECT_EQ(counting.calls, 4);
}

}  // namespace
}  // namespace stripefs
