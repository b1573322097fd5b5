#include "raid/units.hpp"

#include <gtest/gtest.h>

namespace stripefs {
namespace {

TEST(Units, ParsesSizes) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("64K"), 65536u);
  EXPECT_EQ(*parse_size("64k"), 65536u);
  EXPECT_EQ(*parse_size("1M"), 1u << 20);
  EXPECT_EQ(*parse_size("1MiB"), 1u << 20);
  EXPECT_EQ(*parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(*parse_size("2T"), 2ull << 40);
  EXPECT_EQ(*parse_size("512B"), 512u);
}

TEST(Units, RejectsGarbageWithTheText) {
  for (const char* bad : {"", "abc", "12Q", "1.3", "-5", "1KX", "0.1K"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find(fmt::format("'{}'", bad)), std::string::npos) << bad;
  }
}

TEST(Units, Formats) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(3 << 20), "3.0 MiB");
}

}  // namespace
}  // namespace stripefs
