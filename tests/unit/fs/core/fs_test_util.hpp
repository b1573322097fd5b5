// A filesystem on a RAID5 Volume of memory members, for the fs unit tests.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "fs/core/filesystem.hpp"
#include "fs/core/make_fs.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs::test {

// `size` pseudo-random bytes, the same for the same seed.
inline std::vector<std::byte> pattern(size_t size, uint64_t seed) {
  std::vector<std::byte> out(size);
  std::mt19937_64 rng(seed);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

struct MemoryFs {
  static constexpr uint32_t kChunk = 64 * 1024;
  MemoryArray array;
  std::unique_ptr<Volume> volume;
  std::unique_ptr<fs::Filesystem> fs;
  fs::Caller root{0, 0};

  explicit MemoryFs(uint64_t member_size = 64ull << 20, fs::MakeFsOptions make = {})
      : array(4, member_size) {
    auto g = Geometry::create(RaidLevel::raid5, 4, kChunk, member_size);
    EXPECT_TRUE(g.has_value());
    auto v = Volume::create(*g, array.members(), 0);
    EXPECT_TRUE(v.has_value());
    volume = std::move(*v);
    auto made = fs::make_filesystem(*volume, make);
    if (!made) {
      ADD_FAILURE() << made.error().message;
      return;
    }
    mount();
  }
  void mount(fs::FsOptions options = {}) {
    auto m = fs::Filesystem::mount(*volume, options);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    fs = std::move(*m);
  }
  void remount() {
    ASSERT_TRUE(fs->unmount().has_value());
    fs.reset();
    mount();
  }
  // The daemon dies: nothing more is written, nothing is flushed.
  void crash_and_mount() {
    fs.reset();
    mount();
  }

  uint64_t create(uint64_t parent, std::string_view name, uint32_t mode = S_IFREG | 0644) {
    auto a = fs->mknod(parent, name, mode, 0, root);
    EXPECT_TRUE(a.has_value()) << name << ": " << a.error().message;
    return a ? a->ino : 0;
  }
  Result<size_t> write(uint64_t ino, uint64_t offset, std::span<const std::byte> data) {
    return fs->write(ino, offset, data.size(), [&](std::span<std::byte> dest) -> Result<void> {
      std::memcpy(dest.data(), data.data(), data.size());
      return {};
    });
  }
  std::vector<std::byte> read(uint64_t ino, uint64_t offset, size_t size) {
    auto r = fs->read(ino, offset, size);
    EXPECT_TRUE(r.has_value()) << r.error().message;
    std::vector<std::byte> out;
    if (!r) return out;
    for (auto f : r->fragments) out.insert(out.end(), f.begin(), f.end());
    return out;
  }
};

}  // namespace stripefs::test
