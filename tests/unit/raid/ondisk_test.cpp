#include "raid/ondisk.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace stripefs {
namespace {

constexpr ondisk::Sealed kLayout{0, 0x41424344, 60};

std::array<std::byte, 64> sealed_block() {
  std::array<std::byte, 64> block{};
  ondisk::put_le<uint32_t>(block, 0, 0x41424344);
  ondisk::put_uuid(block, 8, Uuid{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  ondisk::seal(block, 60);
  return block;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Ondisk, SealedRoundTrips) {
  auto block = sealed_block();
  EXPECT_TRUE(ondisk::check_sealed(block, kLayout, "member m", "thing"));
  EXPECT_EQ(ondisk::get_uuid(block, 8)[15], 16);
}

// A block that was never ours (wrong magic) is told apart from a damaged one.
TEST(Ondisk, ForeignAndDamagedAreToldApart) {
  auto foreign = sealed_block();
  ondisk::put_le<uint32_t>(foreign, 0, 0x12345678);
  ondisk::seal(foreign, 60);
  auto r = ondisk::check_sealed(foreign, kLayout, "member m", "thing");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ENODATA);
  EXPECT_TRUE(contains(r.error().message, "member m: thing magic 0x12345678")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "no stripefs thing")) << r.error().message;

  auto damaged = sealed_block();
  damaged[20] ^= std::byte{1};
  r = ondisk::check_sealed(damaged, kLayout, "member m", "thing");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EUCLEAN);
  EXPECT_TRUE(contains(r.error().message, "member m: thing checksum mismatch"))
      << r.error().message;

  auto bad_sum = sealed_block();
  bad_sum[61] ^= std::byte{1};
  EXPECT_EQ(ondisk::check_sealed(bad_sum, kLayout, "m", "thing").error().code, EUCLEAN);
  r = ondisk::check_checksum(bad_sum, 60, "journal commit", "");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "journal commit: checksum mismatch"))
      << r.error().message;
}

}  // namespace
}  // namespace stripefs
