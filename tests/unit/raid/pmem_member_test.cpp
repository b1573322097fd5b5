// PmemMember on an ordinary file: a page-granularity mapping, so "persist" is msync; the
// statistics show when the member asks for durability.
#include "raid/pmem_member.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "raid/aligned_buffer.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs {
namespace {

constexpr uint64_t kSize = 8 << 20;
constexpr uint64_t kKiB = 1024;

class PmemMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/dev/shm/stripefs-pmem-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/pmem0";
    int fd = ::open(path_.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kSize)), 0);
    ::close(fd);
    auto member = PmemMember::open(path_);
    ASSERT_TRUE(member) << member.error().message;
    member_ = std::move(*member);
  }
  void TearDown() override {
    member_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Submits one request with several buffers; the member completes it inside submit().
  int64_t submit(MemberOp op, uint64_t offset, const std::vector<std::span<std::byte>>& parts) {
    MemberRequest request;
    request.op = op;
    request.offset = offset;
    for (auto part : parts) request.iov.push_back({part.data(), part.size()});
    int64_t result = 1;
    bool called = false;
    request.done = [&](int64_t r) {
      EXPECT_FALSE(called) << "done called twice";
      called = true;
      result = r;
    };
    member_->submit(std::move(request));
    EXPECT_TRUE(called) << "done not called inside submit()";
    return result;
  }

  // The file's bytes as another process would see them, bypassing the member.
  AlignedBuffer read_file(uint64_t offset, size_t length) {
    AlignedBuffer out(length);
    int fd = ::open(path_.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), length, static_cast<off_t>(offset)),
              static_cast<ssize_t>(length));
    ::close(fd);
    return out;
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<PmemMember> member_;
};

TEST_F(PmemMemberTest, MapsTheWholeFileWithPageGranularityLimits) {
  EXPECT_EQ(member_->size(), kSize);
  EXPECT_EQ(member_->name(), path_);
  const DeviceLimits& limits = member_->limits();
  EXPECT_EQ(limits.logical_block, 512u);
  EXPECT_EQ(limits.physical_block, 4096u);
  EXPECT_EQ(limits.minimum_io, 4096u);
  EXPECT_EQ(limits.optimal_io, 0u);
  EXPECT_EQ(limits.max_io, 1u << 20);
  EXPECT_FALSE(limits.rotational);
  EXPECT_FALSE(limits.dax);  // an ordinary file is a page-cache mapping
  EXPECT_TRUE(limits.volatile_cache);
  EXPECT_EQ(member_->persist_calls(), 0u);
  EXPECT_EQ(member_->dirty_bytes(), 0u);
}

TEST_F(PmemMemberTest, ReadsBackWritesOfSeveralBuffers) {
  AlignedBuffer data = test::random_buffer(12 * kKiB, 7);
  const uint64_t offset = 512 * 13;
  // Buffers of 512 B, 5.5 KiB and 6 KiB: pieces need not be page multiples.
  ASSERT_EQ(submit(MemberOp::write, offset,
                   {data.span().subspan(0, 512), data.span().subspan(512, 5632),
                    data.span().subspan(6144, 6144)}),
            static_cast<int64_t>(data.size()));

  AlignedBuffer whole(data.size());
  ASSERT_TRUE(member_read(*member_, offset, whole.span()));
  EXPECT_EQ(std::memcmp(whole.data(), data.data(), data.size()), 0);

  AlignedBuffer a(1536), b(data.size() - 1536);
  ASSERT_EQ(submit(MemberOp::read, offset, {a.span(), b.span()}),
            static_cast<int64_t>(data.size()));
  EXPECT_EQ(std::memcmp(a.data(), data.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(b.data(), data.data() + a.size(), b.size()), 0);

  // A read at an odd sector inside the written range.
  AlignedBuffer part(2048);
  ASSERT_TRUE(member_read(*member_, offset + 512 * 3, part.span()));
  EXPECT_EQ(std::memcmp(part.data(), data.data() + 512 * 3, part.size()), 0);
}

TEST_F(PmemMemberTest, WritesStayDirtyUntilFlush) {
  AlignedBuffer first = test::random_buffer(8 * kKiB, 1);
  AlignedBuffer second = test::random_buffer(8 * kKiB, 2);
  ASSERT_TRUE(member_write(*member_, 64 * kKiB, first.span()));
  EXPECT_EQ(member_->persist_calls(), 0u);
  EXPECT_EQ(member_->dirty_bytes(), 8 * kKiB);

  // Overlaps the first write by 4 KiB: one 12 KiB range.
  ASSERT_TRUE(member_write(*member_, 68 * kKiB, second.span()));
  EXPECT_EQ(member_->persist_calls(), 0u);
  EXPECT_EQ(member_->dirty_bytes(), 12 * kKiB);

  ASSERT_TRUE(member_flush(*member_));
  EXPECT_EQ(member_->dirty_bytes(), 0u);
  EXPECT_EQ(member_->persist_calls(), 1u);  // the merged range, once

  // Nothing dirty: a flush has nothing to persist.
  ASSERT_TRUE(member_flush(*member_));
  EXPECT_EQ(member_->persist_calls(), 1u);
}

TEST_F(PmemMemberTest, MergesAdjacentRangesAndKeepsDistantOnesApart) {
  AlignedBuffer data = test::random_buffer(4 * kKiB, 3);
  ASSERT_TRUE(member_write(*member_, 0, data.span()));
  ASSERT_TRUE(member_write(*member_, 8 * kKiB, data.span()));
  ASSERT_TRUE(member_write(*member_, 1 << 20, data.span()));
  EXPECT_EQ(member_->dirty_bytes(), 12 * kKiB);
  // Lies inside an existing range: adds nothing.
  ASSERT_TRUE(member_write(*member_, 2 * kKiB, data.span().subspan(0, 1024)));
  EXPECT_EQ(member_->dirty_bytes(), 12 * kKiB);
  // Touches both neighbours without overlapping them: the three become one range.
  ASSERT_TRUE(member_write(*member_, 4 * kKiB, data.span()));
  EXPECT_EQ(member_->dirty_bytes(), 16 * kKiB);

  ASSERT_TRUE(member_flush(*member_));
  EXPECT_EQ(member_->persist_calls(), 2u);  // [0, 12 KiB) and [1 MiB, 1 MiB + 4 KiB)
  EXPECT_EQ(member_->dirty_bytes(), 0u);
}

TEST_F(PmemMemberTest, FuaWritePersistsAtOnceAndIsNotDirty) {
  AlignedBuffer data = test::random_buffer(4 * kKiB, 4);
  ASSERT_TRUE(member_write(*member_, 0, data.span()));
  ASSERT_EQ(member_->dirty_bytes(), 4 * kKiB);

  ASSERT_TRUE(member_write(*member_, 2 << 20, data.span(), /*fua=*/true));
  EXPECT_EQ(member_->persist_calls(), 1u);
  EXPECT_EQ(member_->dirty_bytes(), 4 * kKiB);
  EXPECT_EQ(std::memcmp(read_file(2 << 20, data.size()).data(), data.data(), data.size()), 0);
}

TEST_F(PmemMemberTest, PersistEachWriteMakesEveryWriteDurableAtOnce) {
  member_->set_persist_each_write(true);
  AlignedBuffer data = test::random_buffer(4 * kKiB, 6);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(member_write(*member_, i * 4 * kKiB, data.span()));
  // One persist per write, adjacent or not, and nothing left for a flush.
  EXPECT_EQ(member_->persist_calls(), 3u);
  EXPECT_EQ(member_->dirty_bytes(), 0u);
  ASSERT_TRUE(member_flush(*member_));
  EXPECT_EQ(member_->persist_calls(), 3u);
  EXPECT_EQ(std::memcmp(read_file(8 * kKiB, data.size()).data(), data.data(), data.size()), 0);

  member_->set_persist_each_write(false);
  ASSERT_TRUE(member_write(*member_, 0, data.span()));
  EXPECT_EQ(member_->persist_calls(), 3u);
  EXPECT_EQ(member_->dirty_bytes(), 4 * kKiB);
}

TEST_F(PmemMemberTest, FlushedDataIsInTheFile) {
  AlignedBuffer data = test::random_buffer(64 * kKiB, 5);
  const uint64_t offset = kSize - data.size();
  ASSERT_TRUE(member_write(*member_, offset, data.span()));
  ASSERT_TRUE(member_flush(*member_));
  EXPECT_EQ(std::memcmp(read_file(offset, data.size()).data(), data.data(), data.size()), 0);
}

TEST_F(PmemMemberTest, ConcurrentWritersAndFlushersLeaveNothingDirty) {
  constexpr unsigned kThreads = 4;
  constexpr unsigned kWrites = 64;
  std::vector<AlignedBuffer> data;
  for (unsigned t = 0; t < kThreads; ++t) data.push_back(test::random_buffer(4 * kKiB, 10 + t));
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (unsigned i = 0; i < kWrites; ++i) {
        // Thread t owns every kThreads-th block: writes never overlap.
        const uint64_t offset = (uint64_t{i} * kThreads + t) * 4 * kKiB;
        EXPECT_TRUE(member_write(*member_, offset, data[t].span()));
        if (i % 8 == 7) {
          EXPECT_TRUE(member_flush(*member_));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(member_flush(*member_));
  EXPECT_EQ(member_->dirty_bytes(), 0u);
  AlignedBuffer out(4 * kKiB);
  for (unsigned block = 0; block < kThreads * kWrites; ++block) {
    ASSERT_TRUE(member_read(*member_, block * 4 * kKiB, out.span()));
    ASSERT_EQ(std::memcmp(out.data(), data[block % kThreads].data(), out.size()), 0) << block;
  }
}

TEST_F(PmemMemberTest, RejectsRequestsBeyondTheMapping) {
  AlignedBuffer data(8 * kKiB);
  data.zero();
  auto read = member_read(*member_, kSize - 4 * kKiB, data.span());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, EINVAL);
  auto write = member_write(*member_, kSize + 512, data.span().subspan(0, 512));
  ASSERT_FALSE(write);
  EXPECT_EQ(write.error().code, EINVAL);
  EXPECT_EQ(member_->dirty_bytes(), 0u);
  // The last sector is still in range.
  EXPECT_TRUE(member_write(*member_, kSize - 512, data.span().subspan(0, 512)));
}

TEST_F(PmemMemberTest, OpeningAMissingPathNamesIt) {
  const std::string missing = dir_ + "/absent";
  auto member = PmemMember::open(missing);
  ASSERT_FALSE(member);
  EXPECT_EQ(member.error().code, ENOENT);
  EXPECT_NE(member.error().message.find(missing), std::string::npos) << member.error().message;
}

TEST_F(PmemMemberTest, LibraryFailuresNameThePathAndTheStep) {
  const std::string empty = dir_ + "/empty";
  int fd = ::open(empty.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto member = PmemMember::open(empty);  // nothing to map
  ASSERT_FALSE(member);
  EXPECT_NE(member.error().message.find(empty), std::string::npos) << member.error().message;
  EXPECT_NE(member.error().message.find("pmem2_"), std::string::npos) << member.error().message;
}

TEST_F(PmemMemberTest, IgnoresATrailingPartialSector) {
  const std::string odd = dir_ + "/odd";
  int fd = ::open(odd.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kSize + 100)), 0);
  ::close(fd);
  auto member = PmemMember::open(odd);
  ASSERT_TRUE(member) << member.error().message;
  EXPECT_EQ((*member)->size(), kSize);
}

TEST_F(PmemMemberTest, RejectsADirectory) {
  auto member = PmemMember::open(dir_);
  ASSERT_FALSE(member);
  EXPECT_NE(member.error().message.find(dir_), std::string::npos) << member.error().message;
}

}  // namespace
}  // namespace stripefs
