// The directory index alone: a MetaStore and a map of the directory's blocks, no Filesystem.
#include "fs/core/directory_index.hpp"

#include <gtest/gtest.h>

#include <dirent.h>

#include <map>
#include <set>

#include "unit/fs/core/meta_test_util.hpp"

namespace stripefs::fs {
namespace {

// A directory whose file blocks get volume blocks from a counter.
struct Directory {
  test::MetaFixture fixture;
  std::map<uint64_t, uint64_t> blocks;  // file block -> volume block
  uint64_t next = test::MetaFixture::kFirstFree;
  std::optional<DirHeader> header;
  uint64_t size = 0;
  uint64_t seed = 0x1234;

  DirectoryIndex index() {
    return DirectoryIndex(*fixture.meta,
                          {[this](uint64_t b) -> Result<uint64_t> {
                             auto it = blocks.find(b);
                             return it == blocks.end() ? 0 : it->second;
                           },
                           [this](uint64_t b) -> Result<uint64_t> {
                             auto [it, added] = blocks.try_emplace(b, next);
                             if (added) ++next;
                             return it->second;
                           }},
                          seed, 42, header, size);
  }
  // Every name listed, from `cookie` on, in batches of `batch` (each resumes at the last
  // cookie handed out, as the kernel does).
  std::map<std::string, uint64_t> list_all(size_t batch) {
    std::map<std::string, uint64_t> names;
    uint64_t cookie = 2;
    for (;;) {
      size_t taken = 0;
      uint64_t last = cookie;
      auto r = index().list(cookie, [&](std::string_view name, uint64_t ino, uint8_t, uint64_t n) {
        if (taken == batch) return false;
        EXPECT_TRUE(names.emplace(std::string(name), ino).second) << "listed twice: " << name;
        ++taken;
        last = n;
        return true;
      });
      EXPECT_TRUE(r) << r.error().message;
      if (taken < batch) return names;
      cookie = last;
    }
  }
};

std::string name_of(int i) {
  return "file-" + std::to_string(i);
}

TEST(DirectoryIndex, FindsAddsRemovesAndSetsThroughManySplits) {
  Directory d;
  ASSERT_TRUE(d.index().init());
  EXPECT_EQ(d.size, 2 * kBlockSize);
  EXPECT_TRUE(*d.index().empty());
  constexpr int kNames = 10000;
  for (int i = 0; i < kNames; ++i) {
    ASSERT_TRUE(d.index().add(name_of(i), 1000 + i, DT_REG)) << i;
  }
  auto header = d.index().read_header();
  ASSERT_TRUE(header);
  EXPECT_EQ(header->entries, uint64_t{kNames});
  EXPECT_GT(header->buckets(), uint64_t{kNames} / 64) << "split as it grew";
  EXPECT_EQ(d.size, (1 + header->buckets()) * kBlockSize);
  for (int i = 0; i < kNames; i += 7) {
    auto found = d.index().find(name_of(i));
    ASSERT_TRUE(found);
    ASSERT_TRUE(found->has_value()) << name_of(i);
    EXPECT_EQ((*found)->ino, uint64_t(1000 + i));
  }
  EXPECT_FALSE(*d.index().find("absent"));
  for (int i = 0; i < kNames; i += 2) ASSERT_TRUE(d.index().remove(name_of(i)));
  EXPECT_EQ(d.index().remove(name_of(0)).error().code, ENOENT);
  ASSERT_TRUE(d.index().set(name_of(1), 7, DT_DIR));
  EXPECT_EQ((*d.index().find(name_of(1)))->ino, 7u);
  EXPECT_EQ(d.index().set("absent", 7, DT_DIR).error().code, ENOENT);
  auto names = d.list_all(100);
  EXPECT_EQ(names.size(), size_t{kNames / 2});
  EXPECT_EQ(names.count(name_of(0)), 0u);
  EXPECT_EQ(names.at(name_of(1)), 7u);
  EXPECT_FALSE(*d.index().empty());
}

// The index lives in metadata blocks: what a commit made durable reads back the same from a
// cold cache.
TEST(DirectoryIndex, ReadsBackFromItsBlocks) {
  Directory d;
  ASSERT_TRUE(d.index().init());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(d.index().add(name_of(i), i + 1, DT_REG));
  d.fixture.commit_and_checkpoint();
  d.fixture.meta->trim();
  d.header.reset();
  for (int i = 0; i < 500; ++i) {
    auto found = d.index().find(name_of(i));
    ASSERT_TRUE(found && found->has_value()) << name_of(i);
  }
}

// A listing resumed from a cookie after the directory grew (buckets split meanwhile) still
// lists every name that was there throughout, once.
TEST(DirectoryIndex, CookiesSurviveSplits) {
  Directory d;
  ASSERT_TRUE(d.index().init());
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(d.index().add(name_of(i), i + 1, DT_REG));
  std::set<std::string> seen;
  uint64_t cookie = 2;
  int batches = 0;
  for (;;) {
    size_t taken = 0;
    auto r = d.index().list(cookie, [&](std::string_view name, uint64_t, uint8_t, uint64_t n) {
      if (taken == 50) return false;
      seen.insert(std::string(name));
      ++taken;
      cookie = n;
      return true;
    });
    ASSERT_TRUE(r);
    if (taken < 50) break;
    if (++batches % 5 == 0) {  // the directory grows between batches
      for (int i = 0; i < 500; ++i) {
        ASSERT_TRUE(
            d.index().add("late-" + std::to_string(batches) + "-" + std::to_string(i), 1, DT_REG));
      }
    }
  }
  for (int i = 0; i < 2000; ++i) EXPECT_TRUE(seen.contains(name_of(i))) << name_of(i);
}

// Long names fill buckets before a split is due: overflow blocks chain, and an emptied one
// goes to the free list and is used again.
TEST(DirectoryIndex, OverflowChainsAndTheirFreeList) {
  Directory d;
  ASSERT_TRUE(d.index().init());
  auto long_name = [](int i) { return std::string(240, 'x') + std::to_string(i); };
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(d.index().add(long_name(i), i + 1, DT_REG));
  auto header = d.index().read_header();
  ASSERT_EQ(header->buckets(), 1u) << "no split below 64 entries per bucket";
  EXPECT_GT(header->next_overflow, kOverflowBase) << "overflow blocks chained";
  const uint64_t allocated = d.blocks.size();
  for (int i = 0; i < 60; ++i) {
    auto found = d.index().find(long_name(i));
    ASSERT_TRUE(found && found->has_value()) << i;
  }
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(d.index().remove(long_name(i)));
  EXPECT_NE(d.index().read_header()->free_overflow, 0u);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(d.index().add(long_name(i), i + 1, DT_REG));
  EXPECT_EQ(d.blocks.size(), allocated) << "freed overflow blocks were used again";
  EXPECT_EQ(d.list_all(1000).size(), 60u);
}

TEST(DirectoryIndex, NameKeysDependOnTheSeed) {
  EXPECT_EQ(DirectoryIndex::name_key("a", 1), DirectoryIndex::name_key("a", 1));
  EXPECT_NE(DirectoryIndex::name_key("a", 1), DirectoryIndex::name_key("a", 2));
  EXPECT_NE(DirectoryIndex::name_key("a", 1), DirectoryIndex::name_key("b", 1));
  EXPECT_LT(DirectoryIndex::name_key("a", 1), uint64_t{1} << kKeyBits);
}

}  // namespace
}  // namespace stripefs::fs
